"""Winograd F(2x2, 3x3) convolutions (backends/numba_cpu/winograd.py): which convs take it, and
that they equal O0's im2col convolution at O1 and O2, with and without an epilogue."""

import numpy as np
import pytest

import jitlab as jl
from jitlab.backends.numba_cpu import conv_operands, winograd
from jitlab.backends.numba_cpu.blas import addresses, one_blas_thread
from jitlab.backends.numba_cpu.library import conv2d_nb
from tests.budget import first_fast
from tests.programs import assert_same

RNG = np.random.default_rng(7)


pytestmark = pytest.mark.usefixtures("private_cache")


def conv_program(c: int, o: int, size: tuple[int, int], attrs: str = "pads = [1, 1, 1, 1]", k: int = 3,
                 weight: bool = True, dtype: str = "f32", n: int = 1, out: tuple[int, int] | None = None) -> jl.Program:
    """x -> relu(conv2d(x, w) + b) with an output of `out` (the input's size unless given); w a
    weight or, with weight=False, an input."""
    h, w = size
    oh, ow = out or size
    wt = f"{dtype}[{o},{c},{k},{k}]"
    params = f"%x: {dtype}[{n},{c},{h},{w}]" + ("" if weight else f", %w: {wt}")
    text = f"""func @f({params}) -> ({dtype}[{n},{o},{oh},{ow}]) {{
  {f'%w = np.weight() {{name = "w"}} : {wt}' if weight else ''}
  %b = np.weight() {{name = "b"}} : {dtype}[{o},1,1]
  %c = np.conv2d(%x, %w) {{{attrs}}} : {dtype}[{n},{o},{oh},{ow}]
  %s = np.add(%c, %b) : {dtype}[{n},{o},{oh},{ow}]
  %r = np.relu(%s) : {dtype}[{n},{o},{oh},{ow}]
  func.return(%r)
}}"""
    np_dtype = np.float32 if dtype == "f32" else np.float64
    weights = {"b": RNG.standard_normal((o, 1, 1)).astype(np_dtype)}
    if weight:
        weights["w"] = (RNG.standard_normal((o, c, k, k)) / np.sqrt(9 * c)).astype(np_dtype)
    return jl.parse(text, weights=weights)


def only_conv(program: jl.Program):
    return next(op for op in program.walk() if op.name == "np.conv2d")


@pytest.mark.parametrize("attrs, size, out, fits", [
    ("pads = [1, 1, 1, 1]", (14, 14), None, True),
    ("pads = [1, 1, 1, 1]", (16, 28), None, True),
    ("pads = [1, 1, 1, 1]", (12, 12), None, False),     # 36 tiles: too few for the 16 GEMMs to pay
    ("pads = [1, 1, 1, 1]", (15, 15), None, False),     # odd: the last tile would be partial
    ("strides = [2, 2], pads = [1, 1, 1, 1]", (28, 28), (14, 14), False),
    ("pads = [1, 1, 1, 1], dilations = [2, 2]", (28, 28), (26, 26), False),
    ("", (16, 16), (14, 14), False),                    # no padding: the output is smaller than the input
])
def test_fits_3x3_stride_1_same_padding_on_large_enough_even_images(attrs, size, out, fits):
    program = conv_program(4, 4, size, attrs, out=out)
    assert winograd.fits(only_conv(program)) is fits


def test_fits_neither_other_kernel_sizes_nor_half_floats():
    assert not winograd.fits(only_conv(conv_program(4, 4, (16, 16), k=1, attrs="")))
    program = jl.parse("""func @f(%x: f16[1,2,16,16], %w: f16[2,2,3,3]) -> (f16[1,2,16,16]) {
  %c = np.conv2d(%x, %w) {pads = [1, 1, 1, 1]} : f16[1,2,16,16]
  func.return(%c)
}""")
    assert not winograd.fits(only_conv(program))


@pytest.mark.parametrize("level", ["O1", "O2"])
# Sizes of at least 4M multiply-adds: O2 calls such a conv's kernel between its segments (a smaller
# one runs inside a segment, where the im2col conv is inlined).
@pytest.mark.parametrize("c, o, size, dtype, n", first_fast(
    (32, 32, (28, 28), "f32", 1), (24, 40, (16, 20), "f32", 2), (64, 32, (18, 14), "f64", 1), unpack=True))
def test_winograd_conv_with_its_epilogue_equals_o0(level, c, o, size, dtype, n):
    program = conv_program(c, o, size, dtype=dtype, n=n)
    x = RNG.standard_normal((n, c, *size)).astype(np.float32 if dtype == "f32" else np.float64)
    exe = jl.compile(program, level=level)
    expected = jl.compile(program, level="O0")(x)
    assert any("Winograd" in k.choice for k in exe.report.kernels)
    for _ in range(2):          # the second call takes the cached filter transform
        assert_same(exe(x), expected, rtol=1e-5, atol=1e-5)


def test_a_filter_that_is_an_input_keeps_im2col():
    # Its transform could not be cached: the caller may pass other values each call.
    program = conv_program(4, 4, (14, 14), weight=False)
    exe = jl.compile(program, level="O1")
    choices = [k.choice for k in exe.report.kernels if "conv" in k.choice]
    assert choices and all("im2col" in c for c in choices)
    x, w = RNG.standard_normal((1, 4, 14, 14)).astype(np.float32), RNG.standard_normal((4, 4, 3, 3)).astype(np.float32)
    assert_same(exe(x, w), jl.compile(program, level="O0")(x, w), rtol=1e-5, atol=1e-5)


def test_filter_cache_transforms_each_weight_once():
    cache = conv_operands.FilterCache()
    a, b = RNG.standard_normal((2, 3, 4, 3, 3)).astype(np.float32)
    first = cache(a)
    assert cache(a) is first and cache(b) is not first and cache(a) is first
    assert first.shape == (16, 3, 4) and first.dtype == np.float32


@pytest.mark.slow        # 26-34 s: numba compiles both dispatchers; the native library's Winograd is test_native.py's
@pytest.mark.parametrize("split", [False, True])
def test_winograd_kernel_equals_im2col_on_a_resnet_stage_shape(split):
    # split: the GEMMs shared out between numba's threads, each calling a one-thread BLAS
    x = RNG.standard_normal((1, 64, 56, 56)).astype(np.float32)
    w = (RNG.standard_normal((64, 64, 3, 3)) / 24).astype(np.float32)
    expected, out = np.empty((1, 64, 56, 56), np.float32), np.empty((1, 64, 56, 56), np.float32)
    conv2d_nb(x, w, expected, 1, 1, 1, 1, 1, 1, 1, addresses())
    with one_blas_thread() as parallel:
        winograd.winograd_nb(x, conv_operands.filter_transform(w), out, addresses(), parallel and split)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=2e-5 * np.abs(expected).max())


@pytest.mark.parametrize("k, stride, pad, dilation, groups", [
    (1, 2, 0, 1, 1), (3, 2, 1, 1, 1), (7, 2, 3, 1, 1), (3, 1, 0, 2, 1), (5, 3, 4, 1, 2), (3, 1, 2, 3, 4), (2, 2, 1, 1, 1)])
def test_im2col_conv_equals_the_reference_on_every_border(k, stride, pad, dilation, groups):
    from jitlab.dialects.np.nn import _conv2d

    x = RNG.standard_normal((2, 4, 9, 11)).astype(np.float32)
    w = RNG.standard_normal((8, 4 // groups, k, k)).astype(np.float32)
    expected = _conv2d(x, w, (stride, stride), (pad, pad, pad, pad), (dilation, dilation), groups)
    out = np.full(expected.shape, np.nan, np.float32)
    with one_blas_thread() as split:
        conv2d_nb(x, w, out, stride, stride, pad, pad, dilation, dilation, groups, addresses(), 2 if split else 1)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)

"""Library contractions on cuda: which route kernel selection takes and why, cuBLAS's arguments
against a column-major GEMM written in numpy, and both routes run against O0 under the simulator
(the library route through a stand-in that computes what those arguments ask cuBLAS for)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jitlab as jl
from jitlab.backends.numba_cuda import library
from jitlab.backends.numba_cuda.library import Gemm, Libraries
from tests.cuda.helpers import check, layouts, on_cuda, rand
from tests.cuda.test_contractions import conv_program

AVAILABLE = Libraries(cublas=None)


def contraction(fn, *args):
    """The first group holding a contraction in `fn`'s program compiled at O1 for cuda, and that contraction."""
    program = jl.compile(jl.trace(fn, *args), level="O1", target="cuda", progress=False).program
    for group in (op for op in program.walk() if op.name == "jit.group"):
        con = next((op for op in group.body.ops if op.name in ("np.matmul", "np.conv2d")), None)
        if con is not None:
            return group, con
    raise AssertionError("no contraction group")


@pytest.mark.parametrize("shapes,batched", [([(5, 7), (7, 3)], False), ([(2, 5, 4), (2, 4, 3)], True),
                                             ([(2, 5, 4), (4, 3)], True), ([(5, 4), (3, 4, 2)], True)])
def test_float_matmuls_go_to_cublas_without_tf32(shapes, batched):
    group, con = contraction(lambda a, b: a @ b, *(rand(*s) for s in shapes))
    chosen = library.select(group, con, AVAILABLE, allow_tf32=False)
    assert chosen.library == "cublas"
    assert "no TF32" in chosen.reason and ("strided-batched" in chosen.reason) == batched
    assert "TF32 tensor cores allowed" in library.select(group, con, AVAILABLE, allow_tf32=True).reason


def test_convolutions_go_to_cublas_over_im2col():
    program = conv_program((1, 2, 5, 5), (3, 2, 3, 3))
    group = next(op for op in jl.compile(program, level="O1", target="cuda", progress=False).program.walk()
                 if op.name == "jit.group" and any(o.name == "np.conv2d" for o in op.body.ops))
    con = next(o for o in group.body.ops if o.name == "np.conv2d")
    chosen = library.select(group, con, AVAILABLE, allow_tf32=False)
    assert chosen.library == "cublas" and "im2col" in chosen.reason and "no TF32" in chosen.reason


@pytest.mark.parametrize("fn,args,why", [
    (lambda a, b: a @ b, (rand(2, 3, 5, 4), rand(3, 4, 6)), "broadcast partially"),
    (lambda a, b: a @ b, (rand(4, 5, dtype=np.int32), rand(5, 3, dtype=np.int32)), "int32"),
])
def test_matmuls_cublas_cannot_take_stay_generated_with_the_reason(fn, args, why):
    group, con = contraction(fn, *args)
    chosen = library.select(group, con, AVAILABLE, allow_tf32=False)
    assert chosen.library is None and why in chosen.reason


def test_without_the_library_the_reason_is_the_probe_s():
    group, con = contraction(lambda a, b: a @ b, rand(5, 7), rand(7, 3))
    chosen = library.select(group, con, Libraries(cublas="CuPy is not importable"), allow_tf32=False)
    assert chosen.library is None and "CuPy is not importable" in chosen.reason


@pytest.mark.simulator
def test_the_simulator_reports_no_libraries():
    assert "simulator" in library.probe().cublas


def _column_major_gemm(g: Gemm, a_flat: np.ndarray, b_flat: np.ndarray, c_flat: np.ndarray) -> None:
    """What cublasGemmStridedBatchedEx computes (C = A B per batch, all column-major), in numpy."""
    view = lambda flat, rows, cols, ld, off: np.lib.stride_tricks.as_strided(  # noqa: E731
        flat[off:], (rows, cols), (flat.itemsize, ld * flat.itemsize))
    for i in range(g.count):
        product = view(a_flat, g.m, g.k, g.lda, i * g.stride_a) @ view(b_flat, g.k, g.n, g.ldb, i * g.stride_b)
        view(c_flat, g.m, g.n, g.ldc, i * g.stride_c)[...] = product


@pytest.mark.parametrize("a_shape,b_shape", [((5, 7), (7, 3)), ((2, 5, 4), (2, 4, 3)), ((2, 5, 4), (4, 3)),
                                             ((5, 4), (3, 4, 2)), ((2, 3, 2, 4), (2, 3, 4, 5)), ((1, 1), (1, 6))])
def test_cublas_arguments_compute_the_row_major_product(a_shape, b_shape):
    a, b = rand(*a_shape, dtype=np.float64), rand(*b_shape, dtype=np.float64)
    expected = np.matmul(a, b)
    got = np.zeros(expected.size)
    # Our B is cuBLAS's A: the call passes b's pointer first.
    _column_major_gemm(Gemm.of(a.shape, b.shape, expected.shape), b.ravel(), a.ravel(), got)
    np.testing.assert_allclose(got.reshape(expected.shape), expected, rtol=1e-12)


@settings(max_examples=60, deadline=None)
@given(batch=st.lists(st.integers(1, 3), max_size=2), m=st.integers(1, 4), k=st.integers(1, 4),
       n=st.integers(1, 4), broadcast=st.sampled_from(["none", "a", "b"]))
def test_cublas_arguments_for_any_matmul_cublas_is_chosen_for(batch, m, k, n, broadcast):
    a_shape = (() if broadcast == "a" else tuple(batch)) + (m, k)
    b_shape = (() if broadcast == "b" else tuple(batch)) + (k, n)
    a, b = rand(*a_shape, dtype=np.float64), rand(*b_shape, dtype=np.float64)
    expected = np.matmul(a, b)
    got = np.zeros(expected.size)
    _column_major_gemm(Gemm.of(a.shape, b.shape, expected.shape), b.ravel(), a.ravel(), got)
    np.testing.assert_allclose(got.reshape(expected.shape), expected, rtol=1e-12)


class FakeCublas:
    """Stands in for library.Cublas under the simulator: the same GEMM arguments, computed in numpy."""

    calls: list = []

    def __init__(self, dtype, allow_tf32):
        pass

    def __call__(self, g, a, a_offset, b, b_offset, c, c_offset, stream):
        FakeCublas.calls.append(g)
        flat = c.copy_to_host().ravel()
        _column_major_gemm(g, a.copy_to_host().ravel()[a_offset:], b.copy_to_host().ravel()[b_offset:],
                           flat[c_offset:])
        c.copy_to_device(flat.reshape(c.shape))


@pytest.fixture
def fake_cublas(monkeypatch):
    monkeypatch.setattr(library, "probe", lambda: AVAILABLE)
    monkeypatch.setattr(library, "Cublas", FakeCublas)
    monkeypatch.setattr(FakeCublas, "calls", [])


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_library_route_with_a_generated_epilogue_matches_o0(fake_cublas, level):
    x, w, b = rand(5, 7), rand(7, 3), rand(3)
    exe = check(lambda x, w, b: np.maximum(x @ w + b, 0), x, w, b, level=level, rtol=1e-5, atol=1e-6)
    choice = next(c for c in layouts(exe) if "cuBLAS" in c)
    assert "generated" in choice and "epilogue" in choice


def test_library_route_alone_writes_the_group_output(fake_cublas):
    exe = check(lambda a, b: a @ b, rand(2, 5, 4), rand(4, 3), rtol=1e-5, atol=1e-6)
    record = next(k for k in exe.report.kernels if "cuBLAS" in k.choice)
    assert record.source == "" and "epilogue" not in record.choice


@pytest.mark.parametrize("x_shape,w_shape,attrs", [
    ((2, 3, 6, 5), (4, 3, 3, 3), {}),
    ((3, 4, 7, 7), (6, 2, 3, 2), {"strides": (2, 1), "pads": (1, 0, 2, 1), "dilations": (1, 2), "groups": 2}),
    ((1, 2, 4, 4), (3, 2, 1, 1), {"pads": (1, 1, 1, 1)}),
    # no output column (found by the random convolutions on an H200: a division by zero at compile time)
    ((1, 4, 4, 2), (2, 2, 1, 3), {"strides": (2, 2), "pads": (1, 1, 1, 1), "dilations": (2, 2), "groups": 2}),
])
def test_convolutions_go_through_im2col_and_cublas_and_match_o0(fake_cublas, monkeypatch, x_shape, w_shape, attrs):
    monkeypatch.setattr(library, "COLS_BYTES", 1)       # one sample per im2col fill: the chunks are exercised
    program = conv_program(x_shape, w_shape, **attrs)
    exe = on_cuda(program, [rand(*x_shape), rand(*w_shape), rand(w_shape[0], 1, 1)], rtol=1e-5, atol=1e-5)
    assert any("im2col" in c for c in layouts(exe))


def test_an_empty_inner_dim_zeros_the_product_without_calling_cublas(fake_cublas, monkeypatch):
    zeroed = []
    monkeypatch.setattr(library, "_zero", lambda array, stream: zeroed.append(array.copy_to_device(
        np.zeros(array.shape, array.dtype))))
    check(lambda a, b: a @ b + 1.0, rand(3, 0), rand(0, 4), rtol=0, atol=0)
    assert len(zeroed) == 1 and FakeCublas.calls == []


@pytest.mark.simulator
def test_fallback_runs_the_generated_kernels_and_says_why():
    exe = check(lambda x, w: np.tanh(x @ w), rand(6, 5), rand(5, 4), rtol=1e-5, atol=1e-6)
    choice = next(c for c in layouts(exe) if "matmul" in c)
    assert "tiled matmul" in choice and "not a library" in choice and "simulator" in choice


def test_allow_tf32_is_an_option_of_cuda_only():
    x, w = rand(3, 4), rand(4, 2)
    assert jl.compile(jl.trace(lambda x, w: x @ w, x, w), target="cuda", allow_tf32=True, progress=False)
    with pytest.raises(jl.JitlabError, match="allow_tf32"):
        jl.compile(jl.trace(lambda x, w: x @ w, x, w), target="cpu", allow_tf32=True)

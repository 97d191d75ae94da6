"""O1 (fusion + numba kernels) equals O0 on random programs and edge shapes."""

import numpy as np
import pytest
from hypothesis import given, settings

import jitlab as jl
from tests.budget import compiled_examples
from tests.programs import assert_same, programs

pytestmark = pytest.mark.usefixtures("private_cache")


def o0_and_o1(program, inputs):
    expected = jl.compile(program, level="O0")(*inputs)
    got = jl.compile(program, level="O1", verify_each=True)(*inputs)
    return got, expected


@settings(max_examples=compiled_examples(10))
@given(programs(max_ops=8, special_values=True))
def test_random_programs_match_o0(case):
    got, expected = o0_and_o1(case.program, case.inputs)
    assert_same(got, expected, rtol=2e-5, atol=1e-5)


def check(fn, *args, rtol=2e-5, atol=1e-5, groups=None):
    program = jl.trace(fn, *args)
    got, expected = o0_and_o1(program, args)
    assert_same(got, expected, rtol=rtol, atol=atol)
    exe = jl.compile(program, level="O1")
    if groups is not None:
        assert len(exe.report.groups) == groups, exe.program
    return exe


rng = np.random.default_rng(0)


def test_bench_programs_are_one_group_each():
    x, y = rng.random(1000, dtype=np.float32), rng.random(1000, dtype=np.float32)
    check(lambda x, y: np.maximum((x * y + x - 0.5 * y) ** 2, 0), x, y, groups=1)
    X = rng.standard_normal((64, 128), dtype=np.float32)
    g, b = rng.standard_normal(128, dtype=np.float32), rng.standard_normal(128, dtype=np.float32)

    def softmax(x):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def layernorm(x, g, b):
        m = x.mean(axis=1, keepdims=True)
        v = ((x - m) ** 2).mean(axis=1, keepdims=True)
        return (x - m) / np.sqrt(v + 1e-5) * g + b

    check(softmax, X, groups=1)
    check(layernorm, X, g, b, groups=1, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 5), (), (1,), (1, 1), (7, 1), (5, 3, 2), (1 << 16,)])
def test_edge_shapes(shape):
    x = rng.standard_normal(shape).astype(np.float32)
    check(lambda x: np.tanh(x * 2.0) + np.exp(-x), x)
    if len(shape) >= 1 and shape[-1] > 0:
        check(lambda x: x - x.max(axis=-1, keepdims=True), x)
    check(lambda x: (x * x).sum(axis=-1) if x.ndim else x * x, x)


def test_broadcasting_transposes_and_slices_fold_into_indexing():
    x = rng.standard_normal((6, 8), dtype=np.float32)
    b = rng.standard_normal((8,), dtype=np.float32)
    c = rng.standard_normal((6, 1), dtype=np.float32)
    exe = check(lambda x, b, c: np.exp(x.T[::2, 1:] + 1.0) * c.T[:, 1:] + b[::2, None], x, b, c, groups=1)
    assert "i0" in exe.report.kernels[0].source
    check(lambda x: np.broadcast_to(x[:, :1], (6, 8)) * x, x, groups=1)
    check(lambda x: np.expand_dims(x.sum(axis=1), 1) + x, x, groups=1)


def test_reductions_over_leading_and_several_axes():
    x = rng.standard_normal((4, 5, 6), dtype=np.float64)
    check(lambda x: x.sum(axis=0), x)
    check(lambda x: (x * 2).max(axis=(0, 2), keepdims=True), x)
    check(lambda x: np.exp(x).sum(), x)
    check(lambda x: x.mean(axis=(1, 2)), x)
    check(lambda x: (x > 0).any(axis=1), x)
    check(lambda x: np.prod(x[:, :2], axis=1), x)


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8", "bool"])
def test_integer_and_bool_groups(dtype):
    if dtype == "bool":
        a, b = rng.random((5, 7)) > 0.5, rng.random((5, 7)) > 0.5
        check(lambda a, b: (a & ~b) | (a ^ b), a, b)
        return
    a = rng.integers(-9 if dtype != "uint8" else 0, 9, (5, 7)).astype(dtype)
    b = rng.integers(-4 if dtype != "uint8" else 0, 5, (5, 7)).astype(dtype)
    check(lambda a, b: (a * b + a // np.where(b == 0, 1, b)) % 7, a, b)
    check(lambda a, b: np.maximum(a, b) - np.minimum(a, b) + a.sum(axis=1, keepdims=True), a, b)
    check(lambda a: np.where(a > 2, a, a * 3).astype(np.float32) / 3, a)


def test_casts_saturate_like_o0():
    x = np.array([np.nan, np.inf, -np.inf, 1e20, -1e20, 2.7, -2.7, 0.0], np.float32)
    check(lambda x: x.astype(np.int32) + 1, x)
    check(lambda x: (x * 2).astype(np.uint8), x)
    check(lambda x: (x > 0).astype(np.float32) * x.astype(np.int64), x)


def test_nan_propagates_through_max_and_min():
    x = np.array([[1.0, np.nan, 3.0], [np.nan, -np.inf, 0.0]], np.float32)
    check(lambda x: np.maximum(x, 0.5) + x.max(axis=1, keepdims=True) + np.minimum(x, x.min(axis=0)), x)


def test_matmul_and_conv_take_their_epilogues():
    x = rng.standard_normal((16, 32), dtype=np.float32)
    w = rng.standard_normal((32, 8), dtype=np.float32)
    b = rng.standard_normal(8, dtype=np.float32)
    r = rng.standard_normal((16, 8), dtype=np.float32)
    exe = check(lambda x, w, b, r: np.maximum(x @ w + b, 0) + r, x, w, b, r, rtol=1e-4, groups=1)
    assert "library BLAS matmul with a generated epilogue" in exe.report.kernels[0].choice
    check(lambda x, w: (x @ w, np.tanh(x @ w)), x, w, rtol=1e-4)
    img = rng.standard_normal((2, 4, 9, 9), dtype=np.float32)
    k = rng.standard_normal((6, 4, 3, 3), dtype=np.float32)
    bias = rng.standard_normal((1, 6, 1, 1), dtype=np.float32)


    program = jl.parse("""func @conv(%x: f32[2,4,9,9], %k: f32[6,4,3,3], %b: f32[1,6,1,1]) -> (f32[2,6,5,5]) {
  %0 = np.conv2d(%x, %k) {strides = [2, 2], pads = [1, 1, 1, 1]} : f32[2,6,5,5]
  %1 = np.add(%0, %b) : f32[2,6,5,5]
  %2 = np.relu(%1) : f32[2,6,5,5]
  func.return(%2)
}
""")
    got, expected = o0_and_o1(program, (img, k, bias))
    assert_same(got, expected, rtol=1e-4, atol=1e-4)
    assert len(jl.compile(program, level="O1").report.groups) == 1


def test_symbolic_batch_one_program_many_shapes():
    f = jl.jit(lambda x, w: np.tanh(x * w).sum(axis=1), dynamic={"x": {0: "B"}})
    w = rng.standard_normal(16, dtype=np.float32)
    for n in (1, 3, 40000, 0):
        x = rng.standard_normal((n, 16), dtype=np.float32)
        np.testing.assert_allclose(f(x, w), np.tanh(x * w).sum(axis=1), rtol=1e-5, atol=1e-5)
    assert f.cache_size == 1


def test_results_the_user_holds_are_never_overwritten():
    f = jl.jit(lambda x: x * 2.0)
    a = f(np.ones(4, np.float32))
    b = f(np.full(4, 3.0, np.float32))
    view = b[1:]
    c = f(np.full(4, 5.0, np.float32))
    assert a.tolist() == [2.0] * 4 and b.tolist() == [6.0] * 4 and view.tolist() == [6.0] * 3
    assert c.tolist() == [10.0] * 4


@pytest.mark.parametrize("level", ("O1", "O2"))
def test_row_value_kept_in_scratch_along_a_size_one_dim(level):
    # exp(x) is kept for the loop writing the second result; x's last dim has size 1, so the value
    # does not vary along it and was hoisted, with its scratch store, out of the loop binding i1.
    x = np.array([[0.25], [-0.5], [1.5]], np.float32)
    got = jl.jit(lambda x: (np.exp(x).sum(), np.exp(x) * 2.0), level=level)(x)
    np.testing.assert_allclose(got[0], np.exp(x).sum(), rtol=1e-6)
    np.testing.assert_allclose(got[1], np.exp(x) * 2.0, rtol=1e-6)

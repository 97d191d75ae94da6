"""np.cumprod, isclose, allclose, nan_to_num, the nan reductions, average, kron, meshgrid, polyval,
convolve, correlate and interp (frontend/numpy_more.py) against numpy: dtype and shape exactly, values
bit for bit at O0 where numpy's definition is elementwise (within rounding where it sums), within
float rounding at O1."""

import numpy as np
import pytest

import jitlab as jl

RNG = np.random.default_rng(11)
F32 = RNG.standard_normal((4, 5)).astype(np.float32)
F64 = RNG.standard_normal((3, 4))
I64 = RNG.integers(-4, 5, (3, 4))
I32 = RNG.integers(-4, 5, (3, 4)).astype(np.int32)
U8 = RNG.integers(0, 4, (3, 4)).astype(np.uint8)
B = RNG.random((3, 4)) > 0.5
NAN32 = F32.copy()
NAN32[1, 2] = np.nan
NAN32[3, :] = np.nan                     # an all-NaN row
NAN32[0, 0], NAN32[2, 4] = np.inf, -np.inf
NAN64 = F64.copy()
NAN64[:, 1] = np.nan                     # an all-NaN column
NAN64[0, 0] = np.nan
NEAR = F64 + RNG.choice([0.0, 1e-9, 1e-3], F64.shape)
NEAR[0, 0], NEAR[1, 1], NEAR[2, 2] = np.inf, np.nan, -np.inf
SPECIAL = np.array([np.inf, -np.inf, np.nan, 1.0, np.inf, np.nan, 0.0])
SPECIAL2 = np.array([np.inf, np.inf, np.nan, 1.0 + 1e-9, -np.inf, 2.0, -0.0])
V7 = RNG.standard_normal(7)
V3 = RNG.standard_normal(3).astype(np.float32)
XP = np.array([0.0, 0.5, 1.5, 2.0, 4.0])
FP = np.array([1.0, -1.0, 3.0, np.inf, 2.0])
XQ = np.array([[-1.0, 0.0, 0.25, 0.5, 1.0], [1.5, 1.75, 2.0, 3.0, 4.0], [5.0, np.nan, 3.9, 0.1, 2.0]])

# (function, arguments, exact at O0)
CASES = [
    (np.cumprod, (F32,), True), (lambda x: np.cumprod(x, axis=0), (F64,), True),
    (lambda x: np.cumprod(x, axis=-1), (I32,), True), (np.cumprod, (U8,), True), (np.cumprod, (B,), True),
    (lambda x: np.cumprod(x, axis=1, dtype=np.float32), (I64,), True), (lambda x: x.cumprod(axis=1), (F32,), True),
    (lambda x: x.cumprod(), (I32,), True),
    (np.isclose, (F64, NEAR), True), (np.isclose, (SPECIAL, SPECIAL2), True),
    (lambda a, b: np.isclose(a, b, equal_nan=True), (SPECIAL, SPECIAL2), True),
    (lambda a, b: np.isclose(a, b, rtol=1e-2, atol=0.5), (F32, F32 + np.float32(0.3)), True),
    (lambda a: np.isclose(a, 1), (I64,), True), (lambda a: np.isclose(a, 0.5), (F32,), True),
    (lambda a, b: np.isclose(a, b), (F32[None, 0], F32[:, :1]), True),      # broadcasting
    (lambda a, b: np.isclose(a, b), (B, B[::-1]), True), (lambda a, b: np.isclose(a, b), (I32, I64), True),
    (lambda a, b: np.isclose(a, b), (F32, F64[0, 0]), True), (lambda a: np.isclose(0.5, a), (I64 / 2,), True),
    (lambda a, b: np.isclose(a, b), (V3 + 1j, V3 + 1.000001j), True),
    (np.allclose, (F64, F64 + 1e-12), True), (np.allclose, (F64, NEAR), True),
    (lambda a, b: np.allclose(a, b, equal_nan=True), (SPECIAL, SPECIAL), True),
    (np.nan_to_num, (NAN32,), True), (np.nan_to_num, (SPECIAL,), True),
    (lambda x: np.nan_to_num(x, nan=-1.0, posinf=7, neginf=-7.5), (NAN32,), True),
    (np.nan_to_num, (I32,), True), (np.nan_to_num, (B,), True),
    (np.nansum, (NAN64,), False), (lambda x: np.nansum(x, axis=0), (NAN64,), False),
    (lambda x: np.nansum(x, axis=1, keepdims=True), (NAN32,), False), (np.nansum, (I32,), True),
    (np.nansum, (B,), True), (lambda x: np.nansum(x, axis=0, dtype=np.float64), (NAN32,), False),
    (np.nanprod, (NAN64,), False), (lambda x: np.nanprod(x, axis=1), (NAN32,), False),
    (lambda x: np.nanprod(x, axis=0), (U8,), True),
    (np.nanmean, (NAN64,), False), (lambda x: np.nanmean(x, axis=0), (NAN64,), False),
    (lambda x: np.nanmean(x, axis=1, keepdims=True), (NAN32,), False), (np.nanmean, (I64,), False),
    (lambda x: np.nanmean(x, axis=(0, 1)), (B,), False),
    (np.nanmax, (NAN64,), True), (lambda x: np.nanmax(x, axis=0), (NAN64,), True),
    (lambda x: np.nanmax(x, axis=1, keepdims=True), (NAN32,), True), (lambda x: np.nanmax(x, axis=1), (I32,), True),
    (np.nanmin, (NAN32,), True), (lambda x: np.nanmin(x, axis=0), (NAN32,), True),
    (lambda x: np.nanmin(x, axis=-1), (NAN64,), True), (np.nanmin, (B,), True),
    (np.average, (F32,), False), (lambda x: np.average(x, axis=1), (I64,), False),
    (lambda x: np.average(x, axis=0, keepdims=True), (F64,), False),
    (lambda x, w: np.average(x, weights=w), (F32, np.abs(F32)), False),
    (lambda x, w: np.average(x, axis=1, weights=w), (I32, np.arange(1, 5, dtype=np.int32)), False),
    (lambda x, w: np.average(x, axis=0, weights=w, returned=True), (F64, np.arange(1.0, 4.0)), False),
    (lambda x, w: np.average(x, axis=1, weights=w, returned=True, keepdims=True),
     (F32, np.arange(1, 6, dtype=np.float32)), False),
    (lambda x, w: np.average(x, axis=(1, 0), weights=w), (F64, np.abs(F64.T)), False),
    (lambda x: np.average(x, axis=1, returned=True), (F32,), False),
    (lambda x: np.average(x, returned=True), (I32,), False),
    (np.kron, (F32[:2, :3], I32[:2, :2]), True), (np.kron, (V3, V7), True), (np.kron, (I64, B), True),
    (np.kron, (F64[0], F32), True), (np.kron, (B[:2], B[1]), True), (np.kron, (F64, np.float64(2.5)), True),
    (np.kron, (F64.reshape(2, 3, 2), F32[:2, :2].reshape(1, 2, 2)), True),
    (np.meshgrid, (V7, V3), True), (lambda a, b: np.meshgrid(a, b, indexing="ij"), (V7, V3), True),
    (lambda a, b: np.meshgrid(a, b, sparse=True), (V7, I32[0]), True),
    (lambda a, b, c: np.meshgrid(a, b, c, indexing="ij", sparse=True), (V3, I64[0], B[0]), True),
    (lambda a, b, c: np.meshgrid(a, b, c), (V3, F64, B[0]), True),
    (lambda a: np.meshgrid(a, copy=False), (V7,), True),
    (lambda x: np.polyval([3, -1, 2], x), (F32,), True), (lambda x: np.polyval([0.5, 2.0, -1.0, 4.0], x), (F32,), True),
    (lambda x: np.polyval([2, 1], x), (I64,), True), (lambda p, x: np.polyval(p, x), (V7, F64), True),
    (lambda p: np.polyval(p, 1.5), (V3,), True), (lambda p, x: np.polyval(p, x), (I32[0], I32), True),
    (np.convolve, (V7, V3), False), (np.convolve, (V3, V7), False),
    (lambda a, v: np.convolve(a, v, mode="same"), (V7, V3), False),
    (lambda a, v: np.convolve(a, v, mode="same"), (V3, V7[:6]), False),
    (lambda a, v: np.convolve(a, v, mode="valid"), (V3, V7), False),
    (np.convolve, (I32[0], I64[1]), True), (np.convolve, (B[0], B[1][:3]), True),
    (np.convolve, (np.array([1.0, np.inf, 2.0, -1.0]), np.array([1.0, 2.0])), True),
    (np.convolve, (-np.zeros(3), np.zeros(2)), True),
    (np.correlate, (V7, V3), False), (lambda a, v: np.correlate(a, v, "full"), (V3, V7), False),
    (lambda a, v: np.correlate(a, v, "same"), (V3, V7[:6]), False),
    (lambda a, v: np.correlate(a, v, "same"), (V7, V3), False),
    (lambda a, v: np.correlate(a, v, "full"), (V7 + 1j * V7[::-1], V3 - 2j), False),
    (np.interp, (XQ, XP, FP), True), (lambda x: np.interp(x, XP, FP[::-1], left=-9, right=9.5), (XQ,), True),
    (lambda x: np.interp(x, [1.0], [2.0]), (XQ,), True), (lambda x: np.interp(x, XP, FP), (F32,), True),
    (lambda x, xp, fp: np.interp(x, xp, fp), (XQ[0], XP.astype(np.float32), I64.ravel()[:5]),
     True),
    (lambda x: np.interp(x, [0, 1, 2], [np.inf, np.inf, 1.0]), (np.array([0.5, 1.0, 1.5, 0.0]),), True),
]


def assert_same(got, expected, exact: bool, rtol: float | None = None):
    if isinstance(expected, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(expected)
        for g, e in zip(got, expected):
            assert_same(g, e, exact, rtol)
        return
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.dtype == expected.dtype and got.shape == expected.shape, (got.dtype, got.shape, expected.dtype,
                                                                        expected.shape)
    if exact and rtol is None:
        np.testing.assert_array_equal(got, expected, strict=True)
    else:
        tol = rtol if rtol is not None else (2e-7 if expected.dtype in (np.float32, np.complex64) else 1e-14)
        np.testing.assert_allclose(got, expected, rtol=tol, atol=tol)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("k", range(len(CASES)))
def test_matches_numpy(k):
    fn, args, exact = CASES[k]
    assert_same(jl.jit(fn, level="O0")(*args), fn(*args), exact)


# compiled: every third case in the default run (neighbouring cases trace to the same ops), all under -m slow
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("k", [k if k % 3 == 0 else pytest.param(k, marks=pytest.mark.slow) for k in range(len(CASES))])
def test_compiled_matches_numpy(k):
    fn, args, exact = CASES[k]
    rtol = 1e-6 if any(np.asarray(a).dtype in (np.float32, np.complex64) for a in args) else 1e-12
    assert_same(jl.jit(fn, level="O1")(*args), fn(*args), exact, rtol=rtol)


def test_allclose_gives_a_0d_bool_array():
    got = jl.jit(lambda a, b: np.allclose(a, b))(F64, F64)
    assert isinstance(got, np.ndarray) and got.shape == () and got.dtype == np.bool_ and bool(got)


def test_nan_to_num_copy_false_writes_in_place():
    def fn(x):
        y = x * 1
        z = np.nan_to_num(y, copy=False)
        return y, z

    y, z = jl.jit(fn, level="O0")(NAN32)
    np.testing.assert_array_equal(y, np.nan_to_num(NAN32))
    np.testing.assert_array_equal(z, y)


def test_average_of_zero_weights_divides():
    """numpy raises ZeroDivisionError; the traced version cannot look at the data, so it divides."""
    with pytest.raises(ZeroDivisionError):
        np.average(F64, axis=1, weights=np.zeros(4))
    with np.errstate(all="ignore"):
        got = jl.jit(lambda x, w: np.average(x, axis=1, weights=w), level="O0")(F64, np.zeros(4))
    assert got.shape == (3,) and np.isnan(got).all()


ERRORS = [
    (lambda x: np.nanmean(x, where=x > 0), (F32,), jl.errors.UnsupportedOp, "np.nanmean with where="),
    (lambda x: np.nansum(x, where=x > 0), (F32,), jl.errors.UnsupportedOp, "np.nansum with where="),
    (lambda x: np.nanmax(x, initial=0.0), (F32,), jl.errors.UnsupportedOp, "np.nanmax with initial="),
    (lambda x: np.nanmin(x, axis=1), (np.zeros((2, 0)),), jl.errors.TraceError, "zero-size"),
    (lambda x: np.nan_to_num(x), (F64 + 1j,), jl.errors.UnsupportedOp, "np.nan_to_num of complex"),
    (lambda x: np.nanmean(x), (F64 + 1j,), jl.errors.UnsupportedOp, "np.nanmean of complex"),
    (lambda x: np.nan_to_num(x, nan=x[0, 0]), (F64,), jl.errors.UnsupportedOp, "traced nan="),
    (lambda x, w: np.average(x, weights=w), (F64, np.ones(4)), jl.errors.TraceError, "axis must be specified"),
    (lambda x, w: np.average(x, axis=1, weights=w), (F64, np.ones(3)), jl.errors.TraceError, "consistent"),
    (lambda a, b: np.meshgrid(a, b, indexing="yx"), (V7, V3), jl.errors.TraceError, "indexing"),
    (lambda p, x: np.polyval(p, x), (F64, V3), jl.errors.UnsupportedOp, "np.polyval needs p"),
    (lambda a, v: np.convolve(a, v, mode="wide"), (V7, V3), jl.errors.TraceError, "mode"),
    (lambda a, v: np.convolve(a, v), (F64, V3), jl.errors.TraceError, "1-d"),
    (lambda a, v: np.convolve(a, v), (V7[:0], V3), jl.errors.TraceError, "cannot be empty"),
    (lambda a, v: np.correlate(a, v), (V7, V3[:0]), jl.errors.TraceError, "cannot be empty"),
    (lambda x: np.interp(x, XP, FP, period=2.0), (XQ,), jl.errors.UnsupportedOp, "np.interp with period="),
    (lambda x: np.interp(x, XP, FP[:3]), (XQ,), jl.errors.TraceError, "same length"),
    (lambda x: np.interp(x, XP, FP + 1j), (XQ,), jl.errors.UnsupportedOp, "complex"),
]


@pytest.mark.parametrize("k", range(len(ERRORS)))
def test_refusals_name_the_function(k):
    fn, args, error, text = ERRORS[k]
    with pytest.raises(error, match=text) as info:
        jl.jit(fn, level="O0")(*args)
    assert "test_numpy_more.py" in str(info.value)       # ends with where it was called


@pytest.mark.parametrize("call", [lambda x: np.convolve(x[:, 0], V3), lambda x: np.polyval(x[:, 0], 2.0),
                                  lambda x: np.interp(V3, x[:, 0], x[:, 1])])
def test_a_symbolic_dim_where_a_static_length_is_needed_is_refused(call):
    with pytest.raises(jl.errors.UnsupportedOp, match="along the symbolic dim B"):
        jl.jit(call, level="O0", dynamic={"x": {0: "B"}})(np.ones((4, 3)))


def test_symbolic_dims_flow_through_cumprod_and_the_nan_reductions():
    x = NAN64[:, [0, 2, 3]].T
    fn = lambda x: (np.cumprod(x, axis=0), np.nansum(x, axis=0), np.nanmax(x, axis=1))  # noqa: E731
    got = jl.jit(fn, level="O0", dynamic={"x": {0: "B"}})(x)
    assert_same(got, fn(x), exact=False)

"""Compiled kernels (O1, O2) give numpy's exact answers at the edges of its scalar semantics:
float floor division and remainder at special values, integer division by 0 and -1 in every
int dtype, integer powers with huge exponents, and size-0 broadcasts in every kernel kind."""

import faulthandler
import itertools
import sys
import warnings

import numpy as np
import pytest

import jitlab as jl
from jitlab.backends.numba_cpu.mathcheck import is_x86, vector_width_of
from tests.budget import slow_o2

LEVELS = slow_o2("O1", "O2")
INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
FLOATS = [np.float32, np.float64]


pytestmark = pytest.mark.usefixtures("private_cache")


@pytest.fixture
def hang_guard():
    """A kernel that never returns holds the GIL: only a watchdog thread can end the run (with a traceback)."""
    faulthandler.dump_traceback_later(300, exit=True, file=sys.stderr)
    yield
    faulthandler.cancel_dump_traceback_later()


def numpy_and_compiled(fn, args, level):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # numpy warns at division by zero and overflow
        expected = fn(*args)
        got = jl.compile(jl.trace(fn, *args), level=level)(*args)
    return got, expected if isinstance(expected, tuple) else (expected,)


def assert_identical(got, expected) -> None:
    """Equal values and dtypes, NaN where NaN, and the sign of every zero."""
    assert len(got) == len(expected)
    for i, (g, e) in enumerate(zip(got, expected)):
        e = np.asarray(e)
        assert g.dtype == e.dtype and g.shape == e.shape, f"output {i}: {g.dtype}{g.shape} != {e.dtype}{e.shape}"
        np.testing.assert_array_equal(g, e, err_msg=f"output {i}")
        if g.dtype.kind == "f":
            np.testing.assert_array_equal(np.signbit(g), np.signbit(e), err_msg=f"output {i}: sign")


def _special_pairs(dtype):
    info = np.finfo(dtype)
    values = [0.0, -0.0, 0.1, -0.1, 1e-3, 0.5, -0.5, 1.0, -1.0, 3.0, 7.0, -5.0, 1e30, -1e30,
              float(info.max), float(info.tiny) / 4, np.inf, -np.inf, np.nan]
    a, b = zip(*itertools.product(values, repeat=2))
    return np.array(a, dtype), np.array(b, dtype)


def _float_division(a, b):
    return a // b, a % b, np.remainder(a, b), np.fmod(a, b), np.floor_divide(b, a)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("dtype", FLOATS)
def test_float_floor_division_and_remainder_at_special_values(level, dtype):
    assert_identical(*numpy_and_compiled(_float_division, _special_pairs(dtype), level))


@pytest.mark.parametrize("level", LEVELS)
def test_int_and_bool_floor_divided_by_a_float(level):
    i = np.array([7, -7, 0, 1, -1, 3], np.int32)
    t = np.array([True, False, True, True, False, True])
    f = np.array([0.1, -0.1, 0.0, -np.inf, 3.0, np.nan])
    assert_identical(*numpy_and_compiled(lambda i, t, f: (i // f, t // f, i % f, t % f), (i, t, f), level))


def _int_pairs(dtype):
    info = np.iinfo(dtype)
    values = sorted({0, 1, 2, 3, 7, info.max, info.min, *((-1, -2, -7) if info.min < 0 else ())})
    a, b = zip(*itertools.product(values, repeat=2))
    return np.array(a, dtype), np.array(b, dtype)


def _int_division(*pairs):
    return tuple(r for a, b in zip(pairs[::2], pairs[1::2]) for r in (a // b, a % b, np.fmod(a, b)))


@pytest.mark.parametrize("level", LEVELS)
def test_integer_division_by_zero_and_minus_one_in_every_int_dtype(level):
    # One program over all dtypes: their kernels fuse into one compile.
    args = [x for dtype in INTS for x in _int_pairs(dtype)]
    assert_identical(*numpy_and_compiled(_int_division, args, level))


@pytest.mark.parametrize("level", LEVELS)
def test_integer_power_with_huge_exponents_returns(level, hang_guard):
    args = []
    for dtype in INTS:
        info = np.iinfo(dtype)
        bases = [0, 1, 2, 3, info.max, *((-1, -2, info.min) if info.min < 0 else ())]
        exponents = [0, 1, 2, 5, 63, info.max]
        a, b = zip(*itertools.product(bases, exponents))
        args += [np.array(a, dtype), np.array(b, dtype)]
    assert_identical(*numpy_and_compiled(lambda *p: tuple(a ** b for a, b in zip(p[::2], p[1::2])), args, level))


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


EMPTY_CASES = {
    "int power, flat broadcast": (lambda a, b: a ** b, (np.array([2]), np.zeros((0, 0), np.int64))),
    "float power, flat broadcast": (lambda a, b: a ** b, (np.array([2.0]), np.zeros((3, 0)))),
    "elementwise, row broadcast": (lambda a, b: np.exp(a) + b, (np.ones((0, 1)), np.ones((0, 4)))),
    "elementwise, to size 0": (lambda a, b: a * b - 1, (np.ones((1, 3)), np.ones((0, 1)))),
    "sum over a size-0 axis": (lambda a, b: a.sum(axis=1) + b, (np.ones((3, 0)), np.ones(3))),
    "max over size-0 rows": (lambda a: a.max(axis=1), (np.ones((0, 4)),)),
    "softmax of size-0 rows": (_softmax, (np.ones((0, 5)),)),
    "softmax broadcast to size 0": (lambda a, b: _softmax(a + b), (np.ones((1, 5)), np.ones((0, 1)))),
    "matmul with K = 0": (lambda a, b: a @ b + 1.0, (np.ones((2, 0)), np.ones((0, 3)))),
    "matmul with M = 0": (lambda a, b: np.maximum(a @ b, 0), (np.ones((0, 4)), np.ones((4, 3)))),
    "int reduction to size 0": (lambda a, b: (a ** b).sum(axis=0), (np.array([3]), np.zeros((4, 0), np.int64))),
}


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("case", EMPTY_CASES, ids=list(EMPTY_CASES))
def test_size_zero_broadcasts_in_every_kernel_kind(level, case, hang_guard):
    fn, args = EMPTY_CASES[case]
    assert_identical(*numpy_and_compiled(fn, args, level))


@pytest.mark.parametrize("level", LEVELS)
def test_saturating_activations_reach_their_limits(level):
    # float32 tanh stopped at 0.99999976 (even at inf): the cast to int gave 0 where numpy gives 1.
    x32 = np.array([10.0, 15.0, 88.0, 1e30, np.inf, -np.inf, -12.0, 0.0, -0.0], np.float32)
    x64 = np.array([20.0, 40.0, 1e300, np.inf, -np.inf, -25.0, 0.0, -0.0])

    def fn(x32, x64):
        return (np.tanh(x32).astype(np.int32), np.tanh(x32), np.tanh(x64).astype(np.int64), np.tanh(x64))

    assert_identical(*numpy_and_compiled(fn, (x32, x64), level))


@pytest.mark.parametrize("level", LEVELS)
def test_int64_arithmetic_wraps_as_numpys(level):
    """numba's signed arithmetic is `nsw` (overflow undefined): LLVM folded a + 1 > a to True."""
    info = np.iinfo(np.int64)
    a = np.array([info.max, info.min, info.max - 1, info.min + 1, -1, 0, 5, 3], np.int64)
    for fn in [lambda a: (a + 1) > a, lambda a: (a - 1) < a, lambda a: (a * 2) // 2 == a, lambda a: -a < 0,
               lambda a: np.square(a) >= 0, lambda a: (a + a, a - 7, a * a, -a, np.square(a)),
               lambda a: (a.sum(), a.prod(), (a * 3).sum(keepdims=True) < a.max())]:
        assert_identical(*numpy_and_compiled(fn, (a,), level))


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("dtype", FLOATS)
def test_sign_of_signed_zeros_nan_and_inf(level, dtype):
    x = np.array([-0.0, 0.0, -1.5, 2.0, np.nan, np.inf, -np.inf], dtype)
    assert_identical(*numpy_and_compiled(lambda x: (np.sign(x), 1 / np.sign(x)), (x,), level))


@pytest.mark.parametrize("level", LEVELS)
def test_arithmetic_is_not_rewritten_across_infinities(level):
    # with `reassoc` on a whole kernel LLVM turned x - x * 1.25 into x * -0.25: +inf for -inf
    x = np.array([-np.inf, np.inf, np.nan, -0.0, 3.0], np.float32)
    for fn in (lambda x: x - x * np.float32(1.25), lambda x: (x + x) - x, lambda x: x * 2.0 - x * 1.0,
               lambda x: (x - x).sum(keepdims=True)):
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(jl.jit(fn, level=level)(x), fn(x))


@pytest.mark.skipif(not is_x86(), reason="reads x86 assembly")
def test_a_float_reduction_alone_is_reassociated_and_vectorizes(monkeypatch):
    monkeypatch.setenv("JITLAB_NATIVE", "0")           # the numba dispatcher, to read its assembly
    x = np.random.default_rng(1).standard_normal((64, 256)).astype(np.float32)
    exe = jl.compile(jl.trace(lambda x: (x * 2.0).sum(axis=1), x), level="O1", executable_cache=False)
    np.testing.assert_allclose(exe(x)[0], (x * 2.0).sum(axis=1), rtol=1e-5, atol=1e-4)
    assert vector_width_of(exe._runner.steps[0].kernel.run.seq) in ("xmm", "ymm", "zmm")


@pytest.mark.parametrize("level", ["O0", *LEVELS])
@pytest.mark.parametrize("n", [4, 100_000])          # small: numpy op by op or a kernel; large: threads
def test_an_integer_to_a_negative_power_is_an_input_error_as_numpy_refuses_it(level, n):
    rng = np.random.default_rng(3)
    a, b = rng.integers(-3, 4, n), rng.integers(0, 5, n)
    negative = b.copy()
    negative[n // 2] = -1

    def fns():          # the power alone, inside a long fused chain, and of an exponent computed in the kernel
        yield lambda a, b: a ** b
        yield lambda a, b: (((a + 1) ** b * 3 + a) * 7 - a * 5 + (a * 3) * (a - 2) - 11) % 13
        yield lambda a, b: (a + 1) ** (b - 1) * 2

    for fn in fns():
        f = jl.jit(fn, level=level)
        np.testing.assert_array_equal(f(a, b + 1), fn(a, b + 1))
        with pytest.raises(ValueError):
            fn(a, negative)
        with pytest.raises(jl.InputError, match="np.pow: integers to negative integer powers"):
            f(a, negative)

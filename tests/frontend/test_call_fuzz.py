"""Calling an Executable and a jitted function with every kind of argument a user may
pass: wrong counts and keywords, wrong shapes and dtypes, Python lists and scalars,
non-contiguous, Fortran-order, reversed, read-only and big-endian arrays, the same array
twice, NaN and inf. Every outcome is numpy's answer or a JitlabError, never another
exception, at every level."""

import warnings

import numpy as np
import pytest

import jitlab as jl
from tests.budget import first_fast

LEVELS = ["O0", "O1", "O2"]
rng = np.random.default_rng(0)
X = rng.standard_normal((3, 4)).astype(np.float32)
Y = rng.standard_normal((5, 4)).astype(np.float32)


def f(x, y):
    return np.tanh(x) * 2 + y.sum(axis=0)


def _read_only(a):
    a = a.copy()
    a.setflags(write=False)
    return a


def _special(a):
    a = a.copy()
    a.flat[:3] = [np.nan, np.inf, -np.inf]
    return a


def _matrix(a):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        return np.matrix(a)


CALLS = {  # name: (args, kwargs)
    "exact": ((X, Y), {}),
    "keyword": ((X,), {"y": Y}),
    "all keywords": ((), {"y": Y, "x": X}),
    "too few": ((X,), {}),
    "too many": ((X, Y, Y), {}),
    "unknown keyword": ((X, Y), {"bogus": 1}),
    "keyword twice": ((X, Y), {"y": Y}),
    "float64": ((X.astype(np.float64), Y), {}),
    "int32": ((X.astype(np.int32), Y), {}),
    "bool": ((X > 0, Y), {}),
    "float16": ((X.astype(np.float16), Y), {}),
    "complex": ((X.astype(np.complex64), Y), {}),
    "object": ((X.astype(object), Y), {}),
    "string": (("abc", Y), {}),
    "None": ((None, Y), {}),
    "list": ((X.tolist(), Y), {}),
    "ragged list": (([[1.0], [1.0, 2.0]], Y), {}),
    "python scalar": ((1.5, Y), {}),
    "numpy scalar": ((np.float32(1.5), Y), {}),
    "fewer rows": ((X[:2], Y), {}),
    "lower rank": ((X[0], Y), {}),
    "higher rank": ((X[None], Y), {}),
    "empty": ((np.zeros((0, 4), np.float32), Y), {}),
    "broadcast y": ((X, Y[:1]), {}),
    "strided": ((rng.standard_normal((6, 8)).astype(np.float32)[::2, ::2], Y), {}),
    "reversed": ((X[::-1], Y[:, ::-1]), {}),
    "fortran": ((np.asfortranarray(X), np.asfortranarray(Y)), {}),
    "read-only": ((_read_only(X), _read_only(Y)), {}),
    "big-endian": ((X.astype(">f4"), Y.astype(">f4")), {}),
    "same array twice": ((Y[:3], Y[:3]), {}),
    "same array twice, shapes differ": ((X, X), {}),
    "nan and inf": ((_special(X), _special(Y)), {}),
    "memoryview": ((memoryview(X), Y), {}),
    "matrix": ((_matrix(X), Y), {}),
}
# numpy computes these, jitlab refuses them with a JitlabError saying why
REFUSED_BY_JIT = {"complex", "matrix"}


def numpy_answer(args, kwargs):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            return np.asarray(f(*args, **kwargs))
        except Exception as e:      # noqa: BLE001 (numpy's answer may be any exception)
            return e


def run(call, args, kwargs):
    """call's result (first output), or the JitlabError it raised; any other exception fails the test."""
    snapshot = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]
    try:
        out = call(*args, **kwargs)
    except jl.JitlabError as e:
        return e
    for before, a in zip(snapshot, args):         # no argument is written to
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, before)
    return out[0] if isinstance(out, tuple) else out


def assert_answer(got, expected, name):
    assert not isinstance(got, Exception), f"{name}: {got}"
    assert got.shape == expected.shape and got.dtype == expected.dtype, name
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6, err_msg=name)


def _input_args(args, kwargs):
    """The arguments in input order when they bind to (x, y), else None."""
    if len(args) + len(kwargs) != 2 or set(kwargs) - {"x", "y"}:
        return None
    bound = dict(zip(["x", "y"], args))
    if set(bound) & set(kwargs):
        return None
    bound.update(kwargs)
    return [bound["x"], bound["y"]]


def _matches_program(args, kwargs, symbolic: bool) -> bool:
    """Whether these arguments are arrays of the traced program's input types (f32[3,4], f32[5,4]
    or, with symbolic batch dims, f32[B,4], f32[N,4])."""
    bound = _input_args(args, kwargs)
    if bound is None:
        return False
    try:
        arrays = [np.asarray(a) for a in bound]
    except Exception:      # noqa: BLE001
        return False
    return all(a.dtype.kind == "f" and a.dtype.itemsize == 4 and a.ndim == 2
               and a.shape[1:] == e.shape[1:] and (symbolic or a.shape == e.shape)
               for a, e in zip(arrays, (X, Y)))


@pytest.fixture(scope="module", params=first_fast(*LEVELS, keep=2))     # O2's fast call: test_fast_call
def level(request):
    return request.param


@pytest.fixture(scope="module", params=["static", "symbolic"])
def symbolic(request):
    return request.param == "symbolic"


@pytest.fixture(scope="module")
def exe(level, symbolic):
    inputs = (jl.spec(("B", 4)), jl.spec(("N", 4))) if symbolic else (X, Y)
    return jl.compile(jl.trace(f, *inputs), level=level)


@pytest.fixture(scope="module")
def jitted(level, symbolic):
    return jl.jit(f, level=level, dynamic={"x": {0: "B"}, "y": {0: "N"}} if symbolic else None)


@pytest.mark.parametrize("name", list(CALLS))
def test_executable_call(exe, symbolic, name):
    args, kwargs = CALLS[name]
    got = run(exe, args, kwargs)
    if _matches_program(args, kwargs, symbolic):      # the program computes on the arguments' data as arrays
        assert_answer(got, numpy_answer([np.asarray(a) for a in _input_args(args, kwargs)], {}), name)
    else:
        assert isinstance(got, jl.InputError), f"{name}: {got!r}"


@pytest.mark.parametrize("name", list(CALLS))
def test_jitted_call(jitted, name):
    args, kwargs = CALLS[name]
    expected, got = numpy_answer(args, kwargs), run(jitted, args, kwargs)
    if isinstance(expected, Exception) or name in REFUSED_BY_JIT:
        assert isinstance(got, jl.JitlabError), f"{name}: numpy raised {expected!r}, jitlab gave {got!r}"
    else:
        assert_answer(got, expected, name)


def _same_twice():
    a = Y[:3].copy()
    return a, a


DONATED = {  # fresh arguments per call: a donated array may receive the output
    "exact": lambda: (X.copy(), Y.copy()),
    "same array twice": _same_twice,
    "fortran": lambda: (np.asfortranarray(X), np.asfortranarray(Y)),
    "read-only": lambda: (_read_only(X), _read_only(Y)),
    "strided": lambda: (np.repeat(np.repeat(X, 2, 0), 2, 1)[::2, ::2], Y.copy()),
    "nan and inf": lambda: (_special(X), _special(Y)),
}


def step(x, y):
    return x * 0.5 + f(x, y)


@pytest.mark.parametrize("name", list(DONATED))
def test_donating_jitted_call(level, name):
    with np.errstate(all="ignore"):
        expected = step(*DONATED[name]())
    got = jl.jit(step, level=level, donate_argnums=0)(*DONATED[name]())
    assert_answer(got, expected, name)


@pytest.mark.parametrize("make", [
    lambda f, **o: jl.jit(f, **o),
    lambda f, **o: jl.compile(jl.trace(f, np.ones(3)), **o),
])
def test_an_unknown_compile_option_is_refused_by_name(make):
    with pytest.raises(jl.JitlabError, match=r"unknown option 'bogus'.*memory_limit"):
        make(lambda x: x + 1, bogus=1)
    with pytest.raises(jl.JitlabError, match=r"unknown option 'threads_per_block'"):
        make(lambda x: x + 1, target="cpu", threads_per_block=64)


def test_known_compile_options_are_taken():
    f = jl.jit(lambda x: x + 1, level="O1", progress=False, memory_limit="1 GiB", autotune=False)
    np.testing.assert_array_equal(f(np.ones(3)), np.full(3, 2.0))

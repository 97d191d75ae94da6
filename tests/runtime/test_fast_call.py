"""The fast call (backends/fastcall.py): a static executable's steps written out as one function
after its first calls. It must answer as the general path does (O0 is the oracle), hand out
fresh results, and give every call it cannot take to the general path."""

import numpy as np
import pytest
from hypothesis import given, settings

import jitlab as jl
from jitlab.errors import InputError
from tests.budget import compiled_examples, slow_o2
from tests.programs import programs
from tests.runtime.test_donation_random import assert_matches_reference
from tests.runtime.test_result_ownership import check_owned

LEVELS = slow_o2("O1", "O2")


def _listed(got):
    return list(got) if isinstance(got, tuple) else [got]


def _bitwise_equal(got, expected) -> None:
    assert len(got) == len(expected)
    for a, e in zip(got, expected):
        assert a.dtype == e.dtype and a.shape == e.shape
        np.testing.assert_array_equal(a, e)          # NaN where NaN


@pytest.mark.parametrize("level", LEVELS)
@settings(max_examples=compiled_examples(8), deadline=None)
@given(case=programs(max_ops=8))
def test_fast_calls_answer_as_the_general_path_and_hand_out_fresh_results(level, case):
    # the general path runs the same kernels, so its answers are the fast path's bit for bit; that
    # path against O0 (within float32 rounding, which sin(exp(7.3)) amplifies past any fixed
    # tolerance) is what test_donation_random and the other random-program tests check
    exe = jl.compile(case.program, level=level, target="cpu")
    first = [np.array(a) for a in case.inputs]
    assert_matches_reference(case.program, case.inputs, _listed(exe(*first)),
                             _listed(jl.compile(case.program, level="O0")(*case.inputs)))
    calls = [first] + [[a * k - 0.5 for a in case.inputs] for k in (2, 3, -1)]
    held = []
    for inputs in calls:
        got = _listed(exe(*inputs))
        with exe.general_path():
            _bitwise_equal(got, _listed(exe(*inputs)))
        check_owned(got, [*inputs, *(r for earlier in held for r in earlier)])
        held.append(got)
    # no later call overwrote what an earlier one handed out
    for inputs, got in zip(calls, held):
        with exe.general_path():
            _bitwise_equal(got, _listed(exe(*inputs)))


@pytest.mark.parametrize("level", LEVELS)
def test_a_static_call_takes_the_fast_path_from_its_third_call(level):
    f = jl.jit(lambda x, y: np.tanh(x) * y + 1.0, level=level, target="cpu")
    x, y = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4), np.float32(2) * np.ones((3, 4), np.float32)
    first, second = f(x, y), f(x, y)
    exe = f.last
    assert exe.fast is not None and "def fast(args)" in exe.fast.source
    assert ".get(EMPTY)" not in exe.fast.source           # a small result is a new array (FunctionWriter.outputs)
    third = exe.fast((x, y))
    assert third is not None
    np.testing.assert_allclose(third[0], np.tanh(x) * y + 1.0, rtol=1e-6)
    assert not any(np.may_share_memory(third[0], r) for r in (first, second, x, y))


@pytest.mark.parametrize("level", LEVELS)
def test_arguments_the_fast_path_cannot_take_go_the_general_way(level):
    f = jl.jit(lambda x: x * 2.0 + 1.0, level=level, target="cpu")
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for _ in range(3):
        f(x)
    fast = f.last.fast
    assert fast is not None
    readonly = x.copy()
    readonly.flags.writeable = False
    odd = {"strided": np.arange(24, dtype=np.float32).reshape(3, 8)[:, ::2],
           "read-only": readonly,
           "big-endian": x.astype(">f4"),
           "a subclass": np.ma.masked_array(x),
           "another dtype": x.astype(np.float64)}
    for name, arg in odd.items():
        assert fast((arg,)) is None, name
    for name, arg in odd.items():
        np.testing.assert_allclose(np.asarray(f(np.asarray(arg, dtype=arg.dtype))), np.asarray(arg) * 2 + 1,
                                   err_msg=name)
    assert fast((x, x)) is None


@pytest.mark.parametrize("level", LEVELS)
def test_an_error_inside_a_fast_call_is_reported_by_the_general_path(level):
    f = jl.jit(lambda x, p: x ** p, level=level, target="cpu")
    x, p = np.arange(1, 5, dtype=np.int64), np.arange(4, dtype=np.int64)
    for _ in range(3):
        np.testing.assert_array_equal(f(x, p), x ** p)
    assert f.last.fast is not None
    with pytest.raises(InputError, match="negative"):
        f(x, -p - 1)


@pytest.mark.parametrize("level", LEVELS)
def test_large_results_are_recycled_only_when_the_caller_let_them_go(level):
    f = jl.jit(lambda x: np.exp(x) - 1.0, level=level, target="cpu")
    x = np.linspace(-1, 1, 1 << 15, dtype=np.float32)        # 128 KiB: a kept, recycled buffer
    kept = [f(x) for _ in range(4)]
    assert f.last.fast is not None and ".get(EMPTY)" in f.last.fast.source
    assert all(not np.may_share_memory(a, b) for i, a in enumerate(kept) for b in kept[i + 1:])
    for r in kept:
        np.testing.assert_allclose(r, np.expm1(x), rtol=1e-5, atol=1e-6)


def test_mutating_and_donating_programs_keep_the_general_path():
    def bump(x):
        x += 1.0
        return x * 2.0

    f = jl.jit(bump, level="O1", target="cpu")
    x = np.zeros(4, np.float32)
    for k in range(1, 4):
        np.testing.assert_array_equal(f(x), np.full(4, 2.0 * k, np.float32))
        np.testing.assert_array_equal(x, np.full(4, k, np.float32))
    exe = jl.compile(jl.trace(lambda w, g: w - g, np.ones(4, np.float32), np.ones(4, np.float32)), level="O1",
                     target="cpu", donate=("w",))
    w, g = np.ones(4, np.float32), np.ones(4, np.float32)
    for _ in range(3):
        assert exe(w, g)[0] is w
    assert exe.fast is None


def test_small_temporaries_of_the_pool_become_arrays_of_their_own():
    def standardize(x, y):
        m = x.mean(axis=1, keepdims=True)
        s = np.sqrt(((x - m) ** 2).mean(axis=1, keepdims=True))
        return (x - m) / s @ y

    x, y = np.random.default_rng(0).standard_normal((2, 8, 16)).astype(np.float32)
    y = np.ascontiguousarray(y.T)
    exe = jl.compile(jl.trace(standardize, x, y), level="O1", target="cpu")
    assert exe._runner._pooled
    for k in range(4):
        got = exe(x * k, y)[0]
        np.testing.assert_allclose(got, jl.compile(exe.program, level="O0")(x * k, y)[0], rtol=1e-4, atol=1e-5)
    assert exe.fast is not None

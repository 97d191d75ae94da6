"""Output buffers are recycled across calls exactly when nothing outside holds them."""

import numpy as np
import pytest

import jitlab as jl

LEVELS = ["O1", "O2"]


def fn(x):
    return np.exp(x) + 1.0, (x * 2.0).reshape(10, 100)


@pytest.mark.parametrize("level", LEVELS)
def test_a_dropped_result_gives_its_memory_to_the_next_call(level):
    # Fresh output memory is paid in page faults on every large call: reuse is what makes
    # the memory-bound benchmarks fast.
    f = jl.jit(fn, level=level)
    x = np.zeros(1000, np.float32)
    first = [r.ctypes.data for r in f(x)]
    assert [r.ctypes.data for r in f(x)] == first


@pytest.mark.parametrize("level", LEVELS)
def test_a_held_result_or_a_view_of_one_is_never_written_again(level):
    f = jl.jit(fn, level=level)
    held = f(np.zeros(1000, np.float32))
    view = f(np.ones(1000, np.float32))[1][3:5]
    for _ in range(2):
        f(np.full(1000, 7.0, np.float32))
    np.testing.assert_array_equal(held[0], np.full(1000, 2.0, np.float32))
    np.testing.assert_array_equal(held[1], np.zeros((10, 100), np.float32))
    np.testing.assert_array_equal(view, np.full((2, 100), 2.0, np.float32))


@pytest.mark.parametrize("level", LEVELS)
def test_a_library_op_answering_with_a_view_does_not_alias_reused_bytes(level):
    # np.split returns views of its operand, a planned buffer; once the operand dies its
    # bytes go to the next temporaries (the matmul results), which must not overwrite `hi`.
    def fn(x, w):
        lo, hi = np.split(np.tanh(x) * 3.0, 2, axis=0)
        return np.tanh(lo @ w) @ w + np.tanh(lo @ w.T) @ w + hi

    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((8, 6)).astype(np.float32), rng.standard_normal((6, 6)).astype(np.float32)
    program = jl.trace(fn, x, w)
    expected = jl.compile(program, level="O0")(x, w)[0]
    exe = jl.compile(program, level=level)
    for _ in range(2):
        np.testing.assert_allclose(exe(x, w)[0], expected, rtol=1e-4, atol=1e-5)

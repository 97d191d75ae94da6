"""Indexing by a traced integer scalar: np.dynamic_slice / np.dynamic_update_slice against numpy,
numpy's bounds rules (IndexError-kind InputErrors), inside loops, and their gradients."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jitlab as jl
from jitlab.errors import OutOfBoundsError, UnsupportedOp


def reads(a, i, j):
    return a[i], a[i - 1:i + 2], a[:, j], a[i, j - 1:j + 1], a[1:, j]


def writes(a, i, j):
    a[i] = a[i] * 2
    a[i - 1:i + 1, j] = 7.0
    a[:, j] += 1
    return a


def short_reads(i, j):
    return len(range(5)[i - 1:i + 2]) != 3 or len(range(4)[j - 1:j + 1]) != 2


def short_writes(i, j):
    return len(range(5)[i - 1:i + 1]) != 2


def check(fn, short, a, i, j, exes):
    """The compiled programs against numpy: numpy's IndexError, or a slice numpy would cut short (numpy's
    slices never raise, but the traced extent cannot change), is an OutOfBoundsError."""
    try:
        expected = fn(a.copy(), i, j)
    except IndexError:
        expected = None
    for exe in exes:
        if expected is None or short(i, j):
            with pytest.raises(OutOfBoundsError):
                exe(a.copy(), np.int64(i), np.int64(j))
            continue
        got = exe(a.copy(), np.int64(i), np.int64(j))
        for g, e in zip(got, expected if isinstance(expected, tuple) else (expected,)):
            np.testing.assert_array_equal(g, e)


@pytest.fixture(scope="module")
def compiled():
    a = np.arange(20, dtype=np.float32).reshape(5, 4)
    return {fn.__name__: [jl.compile(jl.trace(fn, a, np.int64(1), np.int64(1)), level=level) for level in ("O0", "O1")]
            for fn in (reads, writes)}


@settings(max_examples=60, deadline=None)
@given(st.integers(-6, 6), st.integers(-5, 5))
def test_reads_and_writes_follow_numpy(compiled, i, j):
    a = np.arange(20, dtype=np.float32).reshape(5, 4)
    check(reads, short_reads, a, i, j, compiled["reads"])
    check(writes, short_writes, a, i, j, compiled["writes"])


def test_the_ops_are_dynamic_slices():
    counts = jl.trace(writes, np.zeros((5, 4), np.float32), np.int64(1), np.int64(1)).op_counts()
    assert counts["np.dynamic_update_slice"] >= 3 and counts.get("np.scatter_nd", 0) == 0


def test_out_of_range_inside_a_loop_names_the_iteration():
    def f(a, n):
        return jl.fori_loop(0, n, lambda i, c: c + a[i], np.float32(0))

    program = jl.trace(f, np.ones(4, np.float32), np.int64(4))
    for level in ("O0", "O1"):
        exe = jl.compile(program, level=level)
        assert exe(np.arange(4, dtype=np.float32), np.int64(4))[0] == 6
        with pytest.raises(IndexError, match="index 4 is out of bounds.*iteration 4 of the scf.for"):
            exe(np.arange(4, dtype=np.float32), np.int64(6))


def test_bounds_computed_the_same_way_twice_have_a_static_extent():
    # `2 * i` traced twice (LeNet's max pooling): still one dynamic slice of 2, no window
    def pool(a, i):
        return a[2 * i:2 * i + 2].max() + a[i // 2 + 1:i // 2 + 3].sum()

    a, i = np.arange(8.0), np.int64(2)
    program = jl.trace(pool, a, i)
    assert program.op_counts()["np.dynamic_slice"] == 2 and "np.where" not in program.op_counts()
    assert jl.jit(pool, level="O0")(a, i) == pool(a, i)
    with pytest.raises(UnsupportedOp, match=r"\.max of a slice between traced bounds"):
        jl.trace(lambda a, i: a[2 * i:i * 2 + 2].max(), a, i)     # i * 2 is not 2 * i as written


def test_a_slice_without_a_static_extent_cannot_be_returned():
    with pytest.raises(UnsupportedOp, match="returned a slice between traced bounds"):
        jl.trace(lambda a, i, j: a[i:j], np.zeros(4), np.int64(0), np.int64(2))


def test_gradients_of_dynamic_slices_against_finite_differences():
    def loss(a, i):
        b = a * 1.0
        b[i] = b[i] * 3.0
        return (b[i - 1:i + 2] ** 2).sum()

    a = np.linspace(-1, 1, 6)
    for i in (1, 3, 4):
        g = jl.grad(loss)(a, np.int64(i))
        eps, numeric = 1e-6, np.zeros_like(a)
        for k in range(a.size):
            d = np.zeros_like(a)
            d[k] = eps
            numeric[k] = (loss(a + d, i) - loss(a - d, i)) / (2 * eps)
        np.testing.assert_allclose(g, numeric, rtol=1e-6, atol=1e-8)


def test_a_traced_scalar_beside_an_index_array_stays_advanced_indexing():
    def f(a, i):
        return a[i, np.array([0, 2])], a[np.array([1, 0]), i]

    a = np.arange(12.0).reshape(3, 4)
    got = jl.compile(jl.trace(f, a, np.int64(1)), level="O0")(a, np.int64(1))
    for g, e in zip(got, f(a, 1)):
        np.testing.assert_array_equal(g, e)

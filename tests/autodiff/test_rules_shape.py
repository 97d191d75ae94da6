"""VJP rules of reductions and shape ops against finite differences (float64), with
hypothesis drawing axes, slice bounds and steps, pads, reps and indices."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import jitlab as jl
from tests.autodiff.checks import check_grads, op_fn

seeds = st.integers(0, 2**31)
shapes = st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple)


def normal(seed, shape):
    return np.random.default_rng(seed).standard_normal(shape)


REDUCTIONS = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod}


@given(name=st.sampled_from(sorted(REDUCTIONS)), shape=shapes, data=st.data(), keepdims=st.booleans(), seed=seeds)
def test_reductions(name, shape, data, keepdims, seed):
    axes = tuple(sorted(data.draw(st.sets(st.integers(0, len(shape) - 1), min_size=1))))
    check_grads(lambda x: REDUCTIONS[name](x, axis=axes, keepdims=keepdims), normal(seed, shape))


def test_reduction_ties_split_evenly():
    x = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])
    np.testing.assert_allclose(jl.grad(lambda v: np.sum(np.max(v, axis=1)))(x), [[0, 0.5, 0.5], [1 / 3] * 3])
    np.testing.assert_allclose(jl.grad(lambda v: np.min(v))(x), [[1, 0, 0], [0, 0, 0]])


def test_prod_with_zeros():
    x = np.array([[0.0, 2.0, 3.0], [0.0, 0.0, 4.0], [1.0, 2.0, 3.0]])
    expected = [[6.0, 0.0, 0.0], [0.0, 0.0, 0.0], [6.0, 3.0, 2.0]]
    np.testing.assert_allclose(jl.grad(lambda v: np.sum(np.prod(v, axis=1)))(x), expected)
    check_grads(lambda v: np.prod(v * np.array([0.0, 1.0, 1.0]), axis=1), x + 1)


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumsum(exclusive, reverse):
    check_grads(op_fn("np.cumsum", axis=1, exclusive=exclusive, reverse=reverse), normal(0, (3, 4)))


@st.composite
def slice_keys(draw, shape):
    key = []
    for n in shape:
        step = draw(st.sampled_from([1, 2, 3, -1, -2]))
        start = draw(st.one_of(st.none(), st.integers(-n, n)))
        stop = draw(st.one_of(st.none(), st.integers(-n - 1, n)))
        key.append(slice(start, stop, step))
    return tuple(key)


@given(shape=shapes, data=st.data(), seed=seeds)
def test_slices_with_steps(shape, data, seed):
    key = data.draw(slice_keys(shape))
    check_grads(lambda x: x[key], normal(seed, shape))


@given(shape=shapes, data=st.data(), seed=seeds)
def test_take_with_repeated_and_negative_indices(shape, data, seed):
    axis = data.draw(st.integers(0, len(shape) - 1))
    n = shape[axis]
    idx = np.array(data.draw(st.lists(st.integers(-n, n - 1), min_size=0, max_size=5)), dtype=np.int64)
    check_grads(lambda x: np.take(x, idx, axis=axis), normal(seed, shape))


@given(shape=shapes, data=st.data(), mode=st.sampled_from(["constant", "edge", "reflect"]), seed=seeds)
def test_pad(shape, data, mode, seed):
    limit = (lambda n: n - 1) if mode == "reflect" else (lambda n: 3)
    widths = [(data.draw(st.integers(0, limit(n))), data.draw(st.integers(0, limit(n)))) for n in shape]
    check_grads(lambda x: np.pad(x, widths, mode=mode), normal(seed, shape))


@given(shape=shapes, data=st.data(), seed=seeds)
def test_tile(shape, data, seed):
    reps = tuple(data.draw(st.integers(1, 3)) for _ in shape)
    check_grads(lambda x: np.tile(x, reps), normal(seed, shape))


@given(shape=shapes, data=st.data(), seed=seeds)
def test_transpose_and_views(shape, data, seed):
    perm = data.draw(st.permutations(range(len(shape))))
    check_grads(lambda x: np.expand_dims(np.transpose(x, perm), 0).reshape(-1)[::-1], normal(seed, shape))


def test_broadcast_to_squeeze_and_expand_dims():
    check_grads(lambda x: np.broadcast_to(x, (2, 3, 4)), normal(0, (3, 1)))
    check_grads(lambda x: np.squeeze(x, axis=(0, 2)) * 2, normal(1, (1, 3, 1)))


def test_concatenate_split_and_stack():
    a, b = normal(0, (2, 3)), normal(1, (2, 1))
    check_grads(lambda x, y: np.concatenate([x, y, x], axis=1), a, b)
    check_grads(lambda x: np.split(x, [1, 3], axis=1)[1] * 2, normal(2, (2, 5)))
    check_grads(lambda x: np.split(x, [1, 3], axis=1)[0] + np.split(x, [1, 3], axis=1)[2], normal(3, (2, 5)))
    check_grads(lambda x, y: np.stack([x, y, x], axis=1), normal(4, (3,)), normal(5, (3,)))


def test_scatter_add():
    idx = np.array([[0, 3], [3, 3]])
    check_grads(lambda x, u: op_fn("np.scatter_add", axis=1)(x, idx, u), normal(0, (2, 4)), normal(1, (2, 2, 2)))


def test_size_zero_tensors():
    g = jl.grad(lambda x, y: np.sum(x * 2) + np.sum(y[1:1] ** 2), argnums=(0, 1))(np.zeros((0, 3)), np.ones(4))
    assert g[0].shape == (0, 3)
    np.testing.assert_array_equal(g[1], np.zeros(4))


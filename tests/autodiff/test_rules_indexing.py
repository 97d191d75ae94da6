"""Gradients of the gather, scatter and sorting ops against finite differences."""

import numpy as np
import pytest

import jitlab as jl
from tests.autodiff.checks import check_grads, op_fn

rng = np.random.default_rng(11)


def first(value):
    return value[0] if isinstance(value, tuple) else value


def test_take_along_axis_adds_repeated_picks():
    x = rng.standard_normal((3, 4))
    idx = np.array([[0, 2, 2], [1, 0, 1], [3, 3, 3]])
    check_grads(lambda x: op_fn("np.take_along_axis", axis=1)(x, idx), x, argnums=(0,))


def test_gather_nd():
    x = rng.standard_normal((3, 4))
    idx = np.array([[1], [0], [1]])
    check_grads(lambda x: op_fn("np.gather_nd")(x, idx), x, argnums=(0,))


@pytest.mark.parametrize("largest", [True, False])
def test_topk_values(largest):
    x = rng.standard_normal((3, 5))
    check_grads(lambda x: first(op_fn("np.topk", k=2, axis=1, largest=largest)(x)), x)


@pytest.mark.parametrize("reduction", ["none", "add"])
def test_scatter_elements_with_repeated_indices(reduction):
    x = rng.standard_normal((3, 4))
    idx = np.array([[0, 2, 0], [1, 1, 3], [2, 0, 2]])        # repeats: the last write wins for "none"
    updates = rng.standard_normal((3, 3))
    check_grads(lambda x, u: op_fn("np.scatter_elements", axis=1, reduction=reduction)(x, idx, u), x, updates,
                argnums=(0, 1))


@pytest.mark.parametrize("reduction", ["none", "add"])
def test_scatter_nd_with_repeated_indices(reduction):
    x = rng.standard_normal((4, 3))
    idx = np.array([[1], [3], [1]])
    updates = rng.standard_normal((3, 3))
    check_grads(lambda x, u: op_fn("np.scatter_nd", reduction=reduction)(x, idx, u), x, updates, argnums=(0, 1))


@pytest.mark.parametrize("fn,message", [
    (lambda x: op_fn("np.cumprod", axis=1)(x), "reverse linear recurrence"),
    (lambda x: op_fn("np.scatter_elements", axis=1, reduction="mul")(x, np.zeros((3, 1), np.int64),
                                                                       np.ones((3, 1))), "reduction='mul'"),
])
def test_unsupported_gradients_say_why(fn, message):
    with pytest.raises(jl.UnsupportedOp, match=message):
        jl.grad(lambda x: fn(x).sum())(rng.standard_normal((3, 4)))


def test_bits_carry_no_gradient():
    x = rng.standard_normal((2, 3))
    g = jl.grad(lambda x: (x * 2 + op_fn("np.bitcast", dtype=np.dtype(np.int64))(x).astype(np.float64) * 0).sum())(x)
    np.testing.assert_allclose(g, np.full_like(x, 2.0))

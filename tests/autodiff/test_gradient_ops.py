"""The ops gradients need (np.scatter_add, np.max_pool2d_grad): reference implementations
against naive loops, shape inference errors, and the IR text round trip."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import jitlab as jl
from jitlab.errors import DTypeError, InputError, ShapeError
from jitlab.ir import get_opdef
from tests.autodiff.checks import op_fn

seeds = st.integers(0, 2**31)


def naive_scatter_add(x, indices, updates, axis):
    out = x.copy()
    n = x.shape[axis]
    for pos in np.ndindex(updates.shape):
        i = indices[pos[axis:axis + indices.ndim]]
        target = pos[:axis] + (i % n,) + pos[axis + indices.ndim:]
        out[target] += updates[pos]
    return out


@given(shape=st.lists(st.integers(1, 3), min_size=1, max_size=3), data=st.data(), seed=seeds)
def test_scatter_add_against_a_loop(shape, data, seed):
    axis = data.draw(st.integers(0, len(shape) - 1))
    n = shape[axis]
    idx_shape = tuple(data.draw(st.lists(st.integers(0, 3), max_size=2)))
    rng = np.random.default_rng(seed)
    idx = rng.integers(-n, n, idx_shape)
    x = rng.standard_normal(shape).astype(np.float32)
    updates = rng.standard_normal(tuple(shape[:axis]) + idx_shape + tuple(shape[axis + 1:])).astype(np.float32)
    got = jl.jit(op_fn("np.scatter_add", axis=axis), level="O0")(x, idx, updates)
    np.testing.assert_allclose(got, naive_scatter_add(x, idx, updates, axis), rtol=1e-6, atol=1e-6)


def test_scatter_add_errors():
    f = op_fn("np.scatter_add", axis=0)
    x, idx = np.zeros((3, 2), np.float32), np.array([0, 2])
    with pytest.raises(ShapeError, match=r"np.scatter_add: updates f32\[3,2\] must have shape \[2,2\]"):
        jl.trace(f, x, idx, np.zeros((3, 2), np.float32))
    with pytest.raises(DTypeError, match="np.scatter_add: the indices must have an integer dtype"):
        jl.trace(f, x, idx.astype(np.float32), np.zeros((2, 2), np.float32))
    with pytest.raises(InputError, match="np.scatter_add: an index is out of range for axis 0 of size 3"):
        jl.jit(f, level="O0")(x, np.array([0, 3]), np.zeros((2, 2), np.float32))


def naive_max_pool_grad(x, g, kernel, strides, pads, dilations):
    out = np.zeros_like(x)
    n, c, oh, ow = g.shape
    for b, ch, i, j in np.ndindex(n, c, oh, ow):
        best, where = -np.inf, None
        for p, q in np.ndindex(*kernel):
            y, z = i * strides[0] + p * dilations[0] - pads[0], j * strides[1] + q * dilations[1] - pads[1]
            if 0 <= y < x.shape[2] and 0 <= z < x.shape[3] and x[b, ch, y, z] > best:
                best, where = x[b, ch, y, z], (y, z)
        if where is not None:
            out[b, ch, where[0], where[1]] += g[b, ch, i, j]
    return out


@given(data=st.data(), seed=seeds)
def test_max_pool2d_grad_against_a_loop(data, seed):
    kernel = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)))
    attrs = {"kernel": kernel, "strides": (data.draw(st.integers(1, 2)), data.draw(st.integers(1, 3))),
             "pads": tuple(data.draw(st.integers(0, kernel[i % 2] // 2)) for i in range(4)),
             "dilations": (1, data.draw(st.integers(1, 2))), "ceil_mode": data.draw(st.booleans())}
    rng = np.random.default_rng(seed)
    # Few distinct values make ties common: the first maximum in the window must win.
    x = rng.integers(0, 3, (2, 2, 5, 6)).astype(np.float32)
    g = rng.standard_normal(np.asarray(op_fn("np.max_pool2d", **attrs)(x)).shape).astype(np.float32)
    got = jl.jit(op_fn("np.max_pool2d_grad", **attrs), level="O0")(x, g)
    expected = naive_max_pool_grad(x, g, kernel, attrs["strides"], attrs["pads"], attrs["dilations"])
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


def test_max_pool2d_grad_checks_the_gradient_shape():
    f = op_fn("np.max_pool2d_grad", kernel=(2, 2), strides=(2, 2))
    with pytest.raises(ShapeError, match=r"dim 3 of the gradient f32\[1,1,2,3\] against the pooled output"):
        jl.trace(f, np.zeros((1, 1, 4, 4), np.float32), np.zeros((1, 1, 2, 3), np.float32))
    assert get_opdef("np.max_pool2d_grad").attrs == get_opdef("np.max_pool2d").attrs


def test_text_round_trip():
    text = ("func @f(%x: f32[4,4], %i: i64[3], %u: f32[4,3], %g: f32[1,1,2,2]) -> (f32[4,4], f32[1,1,4,4]) {\n"
            "  %0 = np.scatter_add(%x, %i, %u) {axis = 1} : f32[4,4]\n"
            "  %1 = np.reshape(%x) {shape = [1, 1, 4, 4]} : f32[1,1,4,4]\n"
            "  %2 = np.max_pool2d_grad(%1, %g) {kernel = [2, 2], strides = [2, 2]} : f32[1,1,4,4]\n"
            "  func.return(%0, %2)\n}\n")
    program = jl.parse(text)
    jl.verify(program)
    assert str(program) == text

"""VJP rules of matmul, conv2d, pooling and composite ops against finite differences
(float64), over numpy's matmul batching and 1-D rules and conv/pool window settings."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import jitlab as jl
from tests.autodiff.checks import check_grads, op_fn

seeds = st.integers(0, 2**31)


def normal(seed, shape):
    return np.random.default_rng(seed).standard_normal(shape)


@st.composite
def matmul_shapes(draw):
    n, k, m = (draw(st.integers(1, 3)) for _ in range(3))
    batch = draw(st.lists(st.integers(1, 3), max_size=2))
    a_batch = [b if draw(st.booleans()) else 1 for b in batch][draw(st.integers(0, len(batch))):]
    b_batch = [b if draw(st.booleans()) else 1 for b in batch][draw(st.integers(0, len(batch))):]
    a = (k,) if draw(st.integers(0, 3)) == 0 else tuple(a_batch) + (n, k)
    b = (k,) if draw(st.integers(0, 3)) == 0 else tuple(b_batch) + (k, m)
    return a, b


@given(shapes=matmul_shapes(), seed=seeds)
def test_matmul_batching_and_vectors(shapes, seed):
    check_grads(np.matmul, normal(seed, shapes[0]), normal(seed + 1, shapes[1]))


@st.composite
def conv_cases(draw):
    groups = draw(st.integers(1, 2))
    c, o = groups * draw(st.integers(1, 2)), groups * draw(st.integers(1, 2))
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    attrs = {"strides": (draw(st.integers(1, 3)), draw(st.integers(1, 3))),
             "dilations": (draw(st.integers(1, 2)), draw(st.integers(1, 2))),
             "pads": tuple(draw(st.integers(0, 2)) for _ in range(4)), "groups": groups}
    size = [draw(st.integers(1, 3)) + (k - 1) * d for k, d in zip(kernel, attrs["dilations"])]
    return (draw(st.integers(1, 2)), c) + tuple(size), (o, c // groups) + kernel, attrs


@given(case=conv_cases(), seed=seeds)
def test_conv2d_strides_pads_dilations_groups(case, seed):
    x_shape, w_shape, attrs = case
    check_grads(op_fn("np.conv2d", **attrs), normal(seed, x_shape), normal(seed + 1, w_shape))


def test_conv2d_with_an_empty_output_or_batch():
    conv = op_fn("np.conv2d")
    for x_shape in [(1, 1, 2, 2), (0, 1, 4, 4)]:
        gx, gw = jl.grad(lambda x, w: np.sum(conv(x, w)), argnums=(0, 1))(np.ones(x_shape), np.ones((2, 1, 3, 3)))
        assert gx.shape == x_shape and not gx.any() and gw.shape == (2, 1, 3, 3) and not gw.any()


@st.composite
def pool_cases(draw):
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dilations = (draw(st.integers(1, 2)), 1)
    # Pads of at most half the kernel keep a real element in every window (PyTorch's rule).
    attrs = {"kernel": kernel, "strides": (draw(st.integers(1, 3)), draw(st.integers(1, 3))),
             "pads": tuple(draw(st.integers(0, kernel[i % 2] // 2)) for i in range(4)),
             "dilations": dilations, "ceil_mode": draw(st.booleans())}
    size = [draw(st.integers(1, 3)) + (k - 1) * d for k, d in zip(kernel, dilations)]
    return (draw(st.integers(1, 2)), draw(st.integers(1, 2))) + tuple(size), attrs


@given(case=pool_cases(), include_pad=st.booleans(), seed=seeds)
def test_avg_pool2d(case, include_pad, seed):
    shape, attrs = case
    check_grads(op_fn("np.avg_pool2d", count_include_pad=include_pad, **attrs), normal(seed, shape))


@given(case=pool_cases(), seed=seeds)
def test_max_pool2d(case, seed):
    shape, attrs = case
    check_grads(op_fn("np.max_pool2d", **attrs), normal(seed, shape))


def test_max_pool2d_ties_go_to_the_first_maximum():
    x = np.array([[[[1.0, 1.0, 0.0], [1.0, 1.0, 2.0], [0.0, 2.0, 2.0]]]])
    g = jl.grad(lambda v: np.sum(op_fn("np.max_pool2d", kernel=(2, 2))(v)))(x)
    np.testing.assert_array_equal(g[0, 0], [[1.0, 0.0, 0.0], [0.0, 0.0, 2.0], [0.0, 1.0, 0.0]])


COMPOSITES = {
    "softmax": (op_fn("np.softmax", axis=1), [(3, 4)]),
    "log_softmax": (op_fn("np.log_softmax", axis=0), [(3, 4)]),
    "layer_norm": (op_fn("np.layer_norm", axis=1), [(3, 4)]),
    "layer_norm_params": (op_fn("np.layer_norm", axis=1, eps=1e-3), [(2, 3, 4), (3, 4), (4,)]),
    "layer_norm_scale": (op_fn("np.layer_norm", axis=2), [(2, 3, 4), (4,)]),
    "batch_norm": (op_fn("np.batch_norm"), [(2, 3, 4, 2), (3,), (3,), (3,), "var"]),
    "gelu": (op_fn("np.gelu"), [(5,)]),
    "gelu_tanh": (op_fn("np.gelu", approximate="tanh"), [(5,)]),
    "sigmoid": (op_fn("np.sigmoid"), [(5,)]),
}


@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_composites(name):
    fn, shapes = COMPOSITES[name]
    args = [np.abs(normal(9, (3,))) + 0.5 if s == "var" else normal(i, s) for i, s in enumerate(shapes)]
    check_grads(fn, *args)

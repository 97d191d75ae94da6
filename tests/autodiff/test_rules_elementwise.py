"""VJP rules of elementwise ops against finite differences (float64), and the tie and
kink conventions: maximum/minimum split ties evenly, abs and relu give 0 at 0, clip
passes the gradient on its closed interval, piecewise-constant ops give zero."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import jitlab as jl
from tests.autodiff.checks import check_grads, op_fn

rng = np.random.default_rng(0)


def normal(*shape):
    return rng.standard_normal(shape)


def positive(*shape):
    return np.abs(rng.standard_normal(shape)) + 0.5


def small(*shape):
    return rng.uniform(-0.8, 0.8, shape)


UNARY = {
    "exp": (np.exp, normal), "expm1": (np.expm1, normal), "exp2": (np.exp2, normal),
    "log": (np.log, positive), "log1p": (np.log1p, positive), "log2": (np.log2, positive),
    "log10": (np.log10, positive), "sqrt": (np.sqrt, positive), "rsqrt": (op_fn("np.rsqrt"), positive),
    "tanh": (np.tanh, normal), "erf": (op_fn("np.erf"), normal), "sin": (np.sin, normal),
    "cos": (np.cos, normal), "tan": (np.tan, small), "arcsin": (np.arcsin, small),
    "arccos": (np.arccos, small), "arctan": (np.arctan, normal), "sinh": (np.sinh, normal),
    "cosh": (np.cosh, normal), "arcsinh": (np.arcsinh, normal), "arccosh": (np.arccosh, lambda *s: positive(*s) + 1),
    "arctanh": (np.arctanh, small), "reciprocal": (np.reciprocal, positive), "sigmoid": (op_fn("np.sigmoid"), normal),
    "square": (np.square, normal), "abs": (np.abs, normal), "negative": (np.negative, normal),
    "relu": (lambda x: np.maximum(x, 0), normal), "relu_op": (op_fn("np.relu"), normal),
    "power_const": (lambda x: x ** 3, normal), "square_by_power": (lambda x: x ** 2, normal),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name):
    fn, make = UNARY[name]
    check_grads(fn, make(3, 4))


# op -> (function, whether x must be positive, whether y must be positive)
BINARY = {
    "add": (np.add, False, False), "subtract": (np.subtract, False, False),
    "multiply": (np.multiply, False, False), "divide": (np.divide, False, True),
    "power": (np.power, True, False), "maximum": (np.maximum, False, False),
    "minimum": (np.minimum, False, False), "arctan2": (np.arctan2, False, True),
    "mod": (np.mod, False, True), "fmod": (np.fmod, False, True),
    "where": (lambda x, y: np.where(x > y, x, y * 2), False, False),
}

shapes = st.lists(st.integers(1, 3), min_size=0, max_size=3).map(tuple)


@st.composite
def broadcast_pair(draw):
    """Two shapes that broadcast together: dims dropped from the front or set to 1."""
    base = draw(shapes)
    other = list(base[draw(st.integers(0, len(base))):])
    for i in range(len(other)):
        if draw(st.booleans()):
            other[i] = 1
    return (base, tuple(other)) if draw(st.booleans()) else (tuple(other), base)


@given(name=st.sampled_from(sorted(BINARY)), shapes=broadcast_pair(), seed=st.integers(0, 2**31))
def test_binary_with_broadcasting(name, shapes, seed):
    fn, *positive_args = BINARY[name]
    r = np.random.default_rng(seed)
    args = [np.abs(r.standard_normal(s)) + 0.5 if pos else r.standard_normal(s) * 2
            for s, pos in zip(shapes, positive_args)]
    check_grads(fn, *args)


def test_clip_with_one_or_two_bounds():
    x = np.array([-2.0, -0.3, 0.1, 0.9, 3.0])
    check_grads(lambda v: np.clip(v, -0.5, 0.7), x)
    check_grads(lambda v: np.clip(v, None, 0.7), x)
    check_grads(lambda v: np.clip(v, -0.5, None), x)


def test_cast_round_trip_passes_the_gradient_through():
    # f32 rounding needs a wide step and a loose tolerance; the rule itself is exact.
    g = check_grads(lambda v: np.sin(v.astype(np.float32)).astype(np.float64) * 3, normal(4), eps=1e-3, rtol=2e-3)
    assert g[0].dtype == np.float64


def test_float32_gradients_stay_float32():
    x, w = normal(3, 4).astype(np.float32), normal(4, 2).astype(np.float32)

    def loss(x, w):
        return np.sum(np.tanh(x @ w) ** 2 / 3 + np.exp(-x).mean())

    program = jl.trace(jl.grad(loss, argnums=(0, 1)), x, w)
    assert {str(r.type.dtype) for op in program.walk() for r in op.results} <= {"float32", "bool"}
    gx, gw = jl.grad(loss, argnums=(0, 1))(x, w)
    expected = jl.grad(loss, argnums=(0, 1))(x.astype(np.float64), w.astype(np.float64))
    np.testing.assert_allclose(gx, expected[0], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(gw, expected[1], rtol=1e-4, atol=1e-6)


def test_ties_of_maximum_and_minimum_split_evenly():
    a = np.array([1.0, 2.0, 3.0])
    b = np.array([1.0, 5.0, 3.0])
    ga, gb = jl.grad(lambda x, y: np.sum(np.maximum(x, y)), argnums=(0, 1))(a, b)
    np.testing.assert_array_equal(ga, [0.5, 0.0, 0.5])
    np.testing.assert_array_equal(gb, [0.5, 1.0, 0.5])
    ga, gb = jl.grad(lambda x, y: np.sum(np.minimum(x, y)), argnums=(0, 1))(a, b)
    np.testing.assert_array_equal(ga, [0.5, 1.0, 0.5])
    np.testing.assert_array_equal(gb, [0.5, 0.0, 0.5])


def test_kinks_take_the_zero_subgradient():
    x = np.array([-1.0, 0.0, 2.0])
    np.testing.assert_array_equal(jl.grad(lambda v: np.sum(np.abs(v)))(x), [-1.0, 0.0, 1.0])
    np.testing.assert_array_equal(jl.grad(lambda v: np.sum(np.maximum(v, 0.0)))(x), [0.0, 0.5, 1.0])
    np.testing.assert_array_equal(jl.grad(lambda v: np.sum(op_fn("np.relu")(v)))(x), [0.0, 0.0, 1.0])
    np.testing.assert_array_equal(jl.grad(lambda v: np.sum(np.clip(v, 0.0, 2.0)))(x), [0.0, 1.0, 1.0])


@pytest.mark.parametrize("fn", [np.floor, np.ceil, np.trunc, np.round, np.sign, lambda v: v // 0.7,
                                lambda v: (v > 0).astype(np.float64), lambda v: np.argmax(v) * 1.0],
                         ids=["floor", "ceil", "trunc", "round", "sign", "floordiv", "compare", "argmax"])
def test_piecewise_constant_ops_give_zero(fn):
    x = normal(5)
    g = jl.grad(lambda v: np.sum(fn(v) * v))(x)
    np.testing.assert_array_equal(g, np.asarray(fn(x) * np.ones_like(x), dtype=np.float64))


def test_power_with_zero_base_or_exponent_stays_finite():
    x, y = np.array([0.0, 2.0, 0.0]), np.array([0.0, 0.0, 2.0])
    gx, gy = jl.grad(lambda a, b: np.sum(np.power(a, b)), argnums=(0, 1))(x, y)
    np.testing.assert_array_equal(gx, [0.0, 0.0, 0.0])
    np.testing.assert_allclose(gy, [0.0, math.log(2.0), 0.0])

"""jl.grad and jl.value_and_grad: eager calls, calls inside a trace (one program for
forward and backward), argnums, pytrees, has_aux, closures, symbolic batch sizes,
second derivatives and the errors a user can cause."""

import numpy as np
import pytest

import jitlab as jl
from jitlab.errors import DTypeError, ShapeError, TraceError
from tests.autodiff.checks import numeric_grad

rng = np.random.default_rng(0)


def loss(params, x):
    h = np.tanh(x @ params["w"] + params["b"])
    return np.mean(h * h)


def make_params():
    return {"w": rng.standard_normal((4, 3)), "b": rng.standard_normal(3)}


def numeric_param_grads(params, x):
    keys = list(params)

    def flat(*values):
        return loss(dict(zip(keys, values)), x)

    return {k: numeric_grad(flat, [params[k] for k in keys], i) for i, k in enumerate(keys)}


def assert_trees_close(actual, expected, rtol=1e-6):
    assert isinstance(actual, np.ndarray) or type(actual) is type(expected)
    if isinstance(expected, dict):
        assert list(actual) == list(expected)
        for k in expected:
            assert_trees_close(actual[k], expected[k], rtol)
    elif isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_trees_close(a, e, rtol)
    else:
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=1e-9)


def test_grad_of_a_params_dict():
    params, x = make_params(), rng.standard_normal((5, 4))
    assert_trees_close(jl.grad(loss)(params, x), numeric_param_grads(params, x), rtol=1e-5)


def test_value_and_grad_with_argnums_tuple():
    params, x = make_params(), rng.standard_normal((5, 4))
    value, (gp, gx) = jl.value_and_grad(loss, argnums=(0, 1))(params, x)
    assert value.shape == () and np.isclose(value, loss(params, x))
    assert_trees_close(gp, numeric_param_grads(params, x), rtol=1e-5)
    np.testing.assert_allclose(gx, numeric_grad(lambda v: loss(params, v), [x], 0), rtol=1e-5)


def test_lists_and_has_aux():
    def f(ws, x):
        y = x @ ws[0] @ ws[1]
        return np.sum(y * y), {"y": y}

    ws, x = [rng.standard_normal((3, 2)), rng.standard_normal((2, 2))], rng.standard_normal((4, 3))
    grads, aux = jl.grad(f, has_aux=True)(ws, x)
    assert isinstance(grads, list) and len(grads) == 2
    np.testing.assert_allclose(aux["y"], x @ ws[0] @ ws[1])
    np.testing.assert_allclose(grads[1], (x @ ws[0]).T @ (2 * aux["y"]), rtol=1e-10)
    (value, aux2), _ = jl.value_and_grad(f, has_aux=True)(ws, x)
    np.testing.assert_allclose(value, np.sum(aux["y"] ** 2))


def test_inside_jit_forward_and_backward_are_one_program():
    params, x = make_params(), rng.standard_normal((5, 4))

    def step(params, x):
        value, g = jl.value_and_grad(loss)(params, x)
        return value, {k: params[k] - 0.1 * g[k] for k in params}

    eager = step(params, x)
    for level in ("O0", "O1", "O2"):
        jitted = jl.jit(step, level=level)
        assert_trees_close(jitted(params, x), eager, rtol=1e-12)
    program = jitted.lower(params, x).source          # the traced program, before fusion
    names = [op.name for op in program.ops]
    assert names.index("np.tanh") < names.index("np.matmul", names.index("np.tanh"))   # backward matmuls follow
    assert len(program.outputs) == 3


def test_closures_over_traced_values_are_constants():
    x, y = rng.standard_normal((5, 4)), rng.standard_normal(5)

    @jl.jit(level="O0")
    def step(w, x, y):
        return jl.grad(lambda v: np.mean((x @ v - y) ** 2))(w)

    w = rng.standard_normal(4)
    np.testing.assert_allclose(step(w, x, y), 2 * x.T @ (x @ w - y) / 5, rtol=1e-10)


def test_same_array_passed_twice_gets_two_gradients():
    x = np.array([1.0, 2.0])
    ga, gb = jl.grad(lambda a, b: np.sum(a * b * b), argnums=(0, 1))(x, x)
    np.testing.assert_allclose(ga, x * x)
    np.testing.assert_allclose(gb, 2 * x * x)


def test_symbolic_batch():
    @jl.jit(level="O0", dynamic={"x": {0: "B"}})
    def grads(w, x):
        return jl.grad(lambda v: np.mean(np.log1p(np.exp(x @ v))))(w)

    w = rng.standard_normal(4)
    for n in (3, 7):
        x = rng.standard_normal((n, 4))
        np.testing.assert_allclose(grads(w, x), x.T @ (1 / (1 + np.exp(-(x @ w)))) / n, rtol=1e-10)
    assert grads.cache_size == 1
    assert "f64[B,4]" in str(grads.lower(w, x).program)


def test_second_derivative():
    x = np.array([0.3, 1.0, -2.0])
    d2 = jl.grad(lambda v: np.sum(jl.grad(lambda u: np.sum(np.sin(u) * u))(v)))(x)
    np.testing.assert_allclose(d2, 2 * np.cos(x) - x * np.sin(x), rtol=1e-12)


def test_python_float_argument():
    np.testing.assert_allclose(jl.grad(lambda t: np.sin(t) * t)(0.5), np.cos(0.5) * 0.5 + np.sin(0.5))


def test_loss_that_does_not_depend_on_the_argument():
    g = jl.grad(lambda a, b: np.sum(b), argnums=0)(np.ones(3), np.ones(2))
    np.testing.assert_array_equal(g, np.zeros(3))


def test_trace_of_grad_is_a_program():
    program = jl.trace(jl.grad(loss), make_params(), rng.standard_normal((5, 4)))
    assert program.name == "grad_loss"
    assert [str(v.type) for v in program.outputs] == ["f64[4,3]", "f64[3]"]
    assert str(jl.parse(str(program))) == str(program)


def test_errors():
    x = rng.standard_normal(3)
    with pytest.raises(ShapeError, match=r"the value <lambda> returns must be a scalar loss .* got f64\[3\]"):
        jl.grad(lambda v: v * 2)(x)
    with pytest.raises(DTypeError, match=r"grad_<lambda>: argument 0 is i64\[3\]; only float arrays"):
        jl.grad(lambda v: np.sum(v * 2.0))(np.arange(3))
    with pytest.raises(DTypeError, match=r"argument 0 is i64\[\]; only float arrays"):
        jl.grad(lambda v: v * 2.0)(3)
    with pytest.raises(TraceError, match=r"argnums 0 select no array to differentiate"):
        jl.grad(lambda v: 2.0)({})
    with pytest.raises(TraceError, match="argnums 2 asks for positional argument 2, but it was called with 1"):
        jl.grad(lambda v: np.sum(v), argnums=2)(x)
    with pytest.raises(TraceError, match="with has_aux=True the function must return"):
        jl.grad(lambda v: np.sum(v), has_aux=True)(x)
    with pytest.raises(DTypeError, match=r"must be a float to be differentiated, got i64\[\]"):
        jl.grad(lambda v: np.argmax(v))(x)
    with pytest.raises(jl.JitlabError, match="unknown level"):
        jl.grad(loss, level="O3")

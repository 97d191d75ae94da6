"""An Executable takes what the traced function took: `exe(params, x)` with the same nested lists
and dicts, checked against the function run by numpy itself, and every wrong argument named by
its path."""

import numpy as np
import pytest

import jitlab as jl

rng = np.random.default_rng(0)


def mlp(params, x, scale=1.0):
    for layer in params:
        x = np.tanh(x @ layer["w"] + layer["b"])
    return x * scale


def make_params(sizes=(4, 5, 3)):
    return [{"w": rng.standard_normal((a, b), dtype=np.float32), "b": rng.standard_normal(b, dtype=np.float32)}
            for a, b in zip(sizes, sizes[1:])]


@pytest.fixture(scope="module")
def compiled():
    params, x = make_params(), rng.standard_normal((2, 4), dtype=np.float32)
    return jl.compile(jl.trace(mlp, params, x), level="O1"), params, x


def test_a_call_with_the_functions_own_arguments_gives_numpys_answer(compiled):
    exe, _, _ = compiled
    params, x = make_params(), rng.standard_normal((2, 4), dtype=np.float32)      # other values, same types
    expected = mlp(params, x)
    np.testing.assert_allclose(exe(params, x)[0], expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(exe(params=params, x=x)[0], expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(exe(params, x=x)[0], expected, rtol=1e-5, atol=1e-6)
    # the program's inputs one by one, as before (the fast path, jl.profile and the README call so)
    leaves = [a for layer in params for a in (layer["w"], layer["b"])] + [x]
    np.testing.assert_allclose(exe(*leaves)[0], expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(exe(**dict(zip(exe.input_names, leaves)))[0], expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("change, message", [
    (lambda p, x: ([p[0], dict(p[1], w=np.ones((5, 4), np.float32))], x), r"input 'params\[1\]\['w'\]': dim 1"),
    (lambda p, x: ([p[0], dict(p[1], b=p[1]["b"].astype(np.float64))], x), r"input 'params\[1\]\['b'\]' must have dtype f32"),
    (lambda p, x: (p[:1], x), r"argument params has 1 item where the function was traced with 2"),
    (lambda p, x: ([p[0], {"w": p[1]["w"]}], x), r"argument params\[1\] has keys \['w'\] where .* \['w', 'b'\]"),
    (lambda p, x: ([p[0], [p[1]["w"], p[1]["b"]]], x), r"argument params\[1\] is a list where .* a dict"),
    (lambda p, x: ([p[0], dict(p[1], b=None)], x), r"argument params\[1\]\['b'\] is None where .* an array"),
    (lambda p, x: (p, x[:, :3]), r"input 'x': dim 1"),
    (lambda p, x: (p,), r"missing a required argument: 'x'"),
])
def test_a_wrong_argument_is_named_by_its_path(compiled, change, message):
    exe, params, x = compiled
    with pytest.raises(jl.InputError, match=message):
        exe(*change(params, x))


def test_a_static_value_must_be_the_traced_one():
    params, x = make_params(), rng.standard_normal((2, 4), dtype=np.float32)
    exe = jl.compile(jl.trace(mlp, params, x, 2.0), level="O1")
    np.testing.assert_allclose(exe(params, x, 2.0)[0], mlp(params, x, 2.0), rtol=1e-5, atol=1e-6)
    with pytest.raises(jl.InputError, match="argument scale is 3.0, not the value it was traced with"):
        exe(params, x, 3.0)


def test_a_program_without_a_function_takes_its_inputs_only():
    x = rng.standard_normal((3, 4), dtype=np.float32)
    exe = jl.compile(jl.parse(str(jl.trace(lambda x: np.exp(x), x))), level="O1")
    np.testing.assert_allclose(exe(x)[0], np.exp(x), rtol=1e-6)
    with pytest.raises(jl.InputError, match="input .x. must be an array, got list"):
        exe([x])

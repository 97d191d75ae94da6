"""Buffers written in place never change an answer: random programs mixing matmuls, transposes,
elementwise epilogues, broadcasts, row reductions and donated inputs, at O1 and O2, against
plain numpy (the O0 reference). A kernel that overwrote an element another index still reads
(an epilogue writing the contraction's result in place while a transpose of it is yielded)
gave answers off by the values' own size."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jitlab as jl
from jitlab.ir import Builder, Dense, Program, TensorType
from tests.budget import compiled_examples, slow_o2
from tests.programs import Case

UNARY = ["tanh", "sigmoid", "neg", "abs", "relu", "sin", "square"]
BINARY = ["add", "sub", "mul", "maximum"]
STEPS = ["dense", "dense", "matmul", "transpose", "transpose", "unary", "binary", "bias", "row-reduce", "scale",
         "reshape"]
TOL = {np.dtype("float32"): 1e-4, np.dtype("float64"): 1e-10}


pytestmark = pytest.mark.usefixtures("private_cache")


@st.composite
def contraction_programs(draw, max_steps: int = 8) -> Case:
    """Square matrices (so every transpose and product composes) with a bias vector beside them."""
    n = draw(st.integers(1, 5))
    dtype = np.dtype(draw(st.sampled_from(["float32", "float64"])))
    shapes = [(n, n), (n, n), (n,)]
    program = Program("mixed", [TensorType(s, dtype) for s in shapes], ["x", "w", "b"])
    b = Builder(program.body, constraints=program.constraints)
    bias = program.inputs[2]
    values = list(program.inputs[:2])
    for _ in range(draw(st.integers(1, max_steps))):
        values.append(_step(draw, b, values, bias, dtype))
    outputs = [values[-1]] + draw(st.lists(st.sampled_from(values[2:]), max_size=2))
    if draw(st.booleans()):     # a transposed copy beside the value itself: h and h.T from one group
        outputs.append(b("np.transpose", draw(st.sampled_from(values[-2:])), perm=(1, 0)))
    program.set_outputs(outputs)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return Case(program, [(rng.standard_normal(s) * 0.7).astype(dtype) for s in shapes])


def _step(draw, b: Builder, values, bias, dtype):
    kind = draw(st.sampled_from(STEPS))
    x, y = draw(st.sampled_from(values)), draw(st.sampled_from(values))
    if kind == "matmul":
        return b("np.matmul", x, y)
    if kind == "dense":         # a product and its elementwise epilogue, read transposed by a later step
        h = b(f"np.{draw(st.sampled_from(UNARY))}", b("np.matmul", x, y))
        return b(f"np.{draw(st.sampled_from(BINARY))}", h, draw(st.sampled_from([x, y, bias])))
    if kind == "transpose":
        return b("np.transpose", x, perm=(1, 0))
    if kind == "unary":
        return b(f"np.{draw(st.sampled_from(UNARY))}", x)
    if kind == "binary":
        return b(f"np.{draw(st.sampled_from(BINARY))}", x, y)
    if kind == "bias":
        return b("np.add", x, bias)
    if kind == "row-reduce":
        axis = draw(st.integers(0, 1))
        return b("np.sub", x, b(f"np.{draw(st.sampled_from(['sum', 'max']))}", x, axes=(axis,), keepdims=True))
    if kind == "scale":
        c = b.create("np.constant", attrs={"value": Dense(np.asarray(0.5, dtype))}).result
        return b("np.mul", x, c)
    flat = b("np.reshape", x, shape=(int(np.prod(x.type.shape)),))
    return b("np.reshape", b("np.tanh", flat), shape=x.type.shape)


def _check(case: Case, level: str, donate: bool) -> None:
    expected = jl.compile(case.program, level="O0")(*case.inputs)
    expected = expected if isinstance(expected, tuple) else (expected,)
    names = tuple(case.program.input_names) if donate else ()
    got = jl.compile(case.program, level=level, donate=names)(*[a.copy() for a in case.inputs])
    got = got if isinstance(got, tuple) else (got,)
    tol = TOL[case.inputs[0].dtype]
    for k, (g, e) in enumerate(zip(got, expected)):
        # A product of sums cancels: the error is relative to the largest value, not to each element.
        scale = max(1.0, float(np.abs(e).max(initial=0.0)))
        assert g.dtype == e.dtype, f"output {k}: {g.dtype} != {e.dtype}"
        np.testing.assert_allclose(g, e, rtol=tol, atol=tol * scale, err_msg=f"output {k}")


# Every example compiles new kernels: a third of the profile's examples (HYPOTHESIS_PROFILE=thorough for more).
@pytest.mark.parametrize("level", slow_o2("O1", "O2"))
@settings(max_examples=compiled_examples(8), deadline=None)
@given(case=contraction_programs(), donate=st.booleans())
def test_mixed_contraction_programs_match_o0(level, case, donate):
    _check(case, level, donate)


def _epilogue_and_its_transpose():
    rng = np.random.default_rng(0)
    x, w = (rng.standard_normal((4, 4)).astype(np.float32) for _ in range(2))

    def f(x, w):
        h = np.tanh(x @ w) + x
        return h @ h.T
    return f, x, w


@pytest.mark.parametrize("level", slow_o2("O1", "O2"))
def test_epilogue_result_is_not_overwritten_while_its_transpose_is_read(level):
    f, x, w = _epilogue_and_its_transpose()
    np.testing.assert_allclose(jl.jit(f, level=level)(x, w), f(x, w), rtol=1e-5, atol=1e-5)


def test_epilogue_with_a_transposed_output_gets_a_buffer_of_its_own():
    f, x, w = _epilogue_and_its_transpose()
    exe = jl.compile(jl.trace(f, x, w), level="O1")
    choices = [k.choice for k in exe.report.kernels]
    assert any("the epilogue reads it at other indices" in c for c in choices), choices


def test_elementwise_epilogue_still_updates_the_product_in_place():
    rng = np.random.default_rng(1)
    x, w, b = rng.standard_normal((8, 8)), rng.standard_normal((8, 8)), rng.standard_normal(8)

    def f(x, w, b):
        return np.tanh(x @ w + b)
    exe = jl.compile(jl.trace(f, x, w, b), level="O1")
    assert "updating the product in place in output 0" in exe.report.kernels[0].choice
    (got,) = exe(x, w, b)
    np.testing.assert_allclose(got, f(x, w, b), rtol=1e-12)

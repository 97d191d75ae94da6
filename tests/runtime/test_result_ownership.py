"""Results belong to the caller: no result shares memory with an input, a weight or another
result, writing into one changes nothing else, and a later call never overwrites it (issue 15,
item 4). Random programs get identities appended (`x * 1.0`, `np.maximum(x, x)`, `-(-x)`, a
reshape, an input returned as is) that canonicalization turns into the value itself."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jitlab as jl
from jitlab.ir import Builder, Dense
from tests.budget import compiled_examples, slow_o2
from tests.programs import assert_same, programs

LEVELS = slow_o2("O0", "O1", "O2")


def _scalar(b, value, dtype):
    return b.create("np.constant", attrs={"value": Dense(np.asarray(value, dtype))}).result


IDENTITIES = {
    "mul 1": lambda b, v: b("np.mul", v, _scalar(b, 1.0, v.type.dtype)),
    "div 1": lambda b, v: b("np.div", v, _scalar(b, 1.0, v.type.dtype)),
    "sub 0": lambda b, v: b("np.sub", v, _scalar(b, 0.0, v.type.dtype)),
    "maximum": lambda b, v: b("np.maximum", v, v),
    "neg neg": lambda b, v: b("np.neg", b("np.neg", v)),
    "flatten": lambda b, v: b("np.reshape", v, shape=(int(np.prod(v.type.shape)),)),
    "itself": lambda b, v: v,
}


@st.composite
def programs_returning_aliases(draw):
    """A random program whose results also hold identities of its inputs and values, and repeats."""
    case = draw(programs(max_ops=6))
    program = case.program
    b = Builder.before_op(program.body.terminator, program.constraints)
    values = [v for v in (*program.inputs, *(r for op in program.body.ops if not op.regions for r in op.results))
              if v.type.dtype.kind == "f"]
    extra = [IDENTITIES[draw(st.sampled_from(sorted(IDENTITIES)))](b, draw(st.sampled_from(values)))
             for _ in range(draw(st.integers(1, 3)))]
    outputs = [*program.body.terminator.operands, *extra]
    program.set_outputs(outputs + draw(st.lists(st.sampled_from(outputs), max_size=2)))
    return case


def _call(exe, inputs):
    got = exe(*inputs)
    return list(got if isinstance(got, tuple) else (got,))


def check_owned(results, inputs):
    """No result shares memory with an input or another result, and each is writable (O0 may answer a
    rank-0 result with a numpy scalar, as numpy does: immutable, nothing to share)."""
    for k, r in enumerate(results):
        if isinstance(r, np.generic):
            continue
        assert r.flags.writeable, f"result {k} is read-only"
        assert not any(np.may_share_memory(r, a) for a in inputs), f"result {k} shares memory with an input"
        assert not any(np.may_share_memory(r, o) for o in results[:k]), f"result {k} shares memory with a result"


@pytest.mark.parametrize("level", LEVELS)
@settings(max_examples=compiled_examples(6), deadline=None)
@given(case=programs_returning_aliases())
def test_results_never_alias_inputs_or_each_other(level, case):
    exe = jl.compile(case.program, level=level, target="cpu")
    inputs = [np.array(a) for a in case.inputs]
    kept = [a.copy() for a in inputs]
    first = _call(exe, inputs)
    check_owned(first, inputs)
    expected = [r.copy() for r in first]
    second = _call(exe, [a * 2 + 1 for a in inputs])        # a later call must not overwrite the first results
    assert_same(first, expected, rtol=0, atol=0)
    check_owned(second, first)
    for r in first:
        if isinstance(r, np.ndarray):
            r[...] = 7                                           # writing a result changes no input
    assert_same(inputs, kept, rtol=0, atol=0)


CASES = {
    "x * 1.0": lambda x: x * 1.0,
    "x / 1.0": lambda x: x / 1.0,
    "x - 0.0": lambda x: x - 0.0,
    "x ** 1": lambda x: x ** 1,
    "astype": lambda x: x.astype(x.dtype),
    "maximum(x, x)": lambda x: np.maximum(x, x),
    "-(-x)": lambda x: np.negative(-x),
    "x": lambda x: x,
    "x.T": lambda x: x.T,
    "x[1:]": lambda x: x[1:],
    "reshape": lambda x: x.reshape(-1),
    "x, x * 1.0": lambda x: (x, x * 1.0),
    "x * 2, x * 2": lambda x: (x * 2, x * 2),
}


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_identities_from_the_issue_return_fresh_arrays(level, name):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    f = jl.jit(level=level, target="cpu")(CASES[name])
    got = f(x)
    got = list(got) if isinstance(got, tuple) else [got]
    check_owned(got, [x])
    got[0] += 100
    np.testing.assert_array_equal(x, np.arange(6, dtype=np.float32).reshape(2, 3))


@pytest.mark.parametrize("level", LEVELS)
def test_weights_and_constants_returned_are_copies(level):
    w = np.random.default_rng(0).standard_normal((40, 40)).astype(np.float32)   # large: traced as a weight
    c = np.ones(3, np.float32)                                                  # small: a constant
    exe = jl.compile(jl.trace(lambda x: (x + 1, w, w.reshape(-1), c, c), np.zeros(3, np.float32)), level=level,
                     target="cpu")
    got = exe(np.zeros(3, np.float32))
    check_owned(list(got), [*exe.program.weights.values()])
    got[1][...] = 0
    got[3][...] = 0
    again = exe(np.zeros(3, np.float32))
    np.testing.assert_array_equal(again[1], w)
    np.testing.assert_array_equal(again[3], c)


@pytest.mark.parametrize("level", slow_o2("O1", "O2"))
def test_a_donated_input_written_in_place_is_the_result_and_other_results_are_copies(level):
    exe = jl.compile(jl.trace(lambda w, g: (w - 0.1 * g, g), np.ones(4, np.float32), np.ones(4, np.float32)),
                     level=level, target="cpu", donate=("w",))
    w, g = np.ones(4, np.float32), np.full(4, 2, np.float32)
    new_w, same_g = exe(w, g)
    assert new_w is w
    np.testing.assert_allclose(w, 0.8)
    assert not np.may_share_memory(same_g, g)

"""Programs with random loops and branches (tests/loop_programs.py) at O0, O1 and O2 against the
oracle (the body program run in a Python loop by the reference interpreter); each region compiles
once, and the passes leave the region ops out of fusion groups."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import jitlab as jl
from tests.budget import compiled_examples
from tests.loop_programs import loop_programs
from tests.programs import assert_same


@settings(max_examples=compiled_examples(4), deadline=None)
@given(loop_programs(max_ops=6))
def test_random_loop_programs_at_every_level(case):
    for level in ("O0", "O1", "O2"):
        exe = jl.compile(case.program, level=level, verify_each=True)
        assert_same(exe(*case.inputs), case.expected, rtol=2e-5, atol=1e-5)


def test_a_loop_is_one_step_of_the_schedule_and_its_body_compiles_once():
    text = """func @f(%x: f32[64], %n: i64[]) -> (f32[64]) {
  %lo = np.constant() {value = dense<i64[] 0>} : i64[]
  %one = np.constant() {value = dense<i64[] 1>} : i64[]
  %y = np.exp(%x) : f32[64]
  %r = scf.for(%lo, %n, %one, %x, %y) : f32[64] {
  ^bb(%i: i64[], %c: f32[64], %w: f32[64]):
    %a = np.mul(%c, %w) : f32[64]
    %b = np.tanh(%a) : f32[64]
    %k = np.add(%b, %w) : f32[64]
    %u = np.add(%b, %w) : f32[64]
    %d = np.sub(%k, %u) : f32[64]
    %dead = np.exp(%d) : f32[64]
    scf.yield(%k)
  }
  %z = np.neg(%r) : f32[64]
  func.return(%z)
}
"""
    program = jl.parse(text)
    x = np.linspace(-1, 1, 64).astype(np.float32)
    expected = x
    for _ in range(9):
        expected = np.tanh(expected * np.exp(x)) + np.exp(x)
    for level in ("O1", "O2"):
        exe = jl.compile(program, level=level)
        np.testing.assert_allclose(exe(x, np.int64(9))[0], -expected, rtol=1e-5)
        loop = next(op for op in exe.program.body.ops if op.name == "scf.for")
        # cse and dce reached into the body: one add left, the dead exp and sub gone
        assert [op.name for op in loop.body.ops] == ["np.mul", "np.tanh", "np.add", "scf.yield"]
        assert any(r.name == "scf.for" and "control flow" in r.reason for r in exe.report.rejected)
        assert exe.report.stats["region_programs"] == 1
        assert exe.report.stats["region_groups"] >= 1
        assert not any(op.name == "scf.for" for g in exe.program.walk() if g.name == "jit.group" for op in g.walk())


COMBINE = {"add": np.add, "mul": lambda x, y: x * np.tanh(y), "max": np.maximum, "sub": np.subtract}


@st.composite
def stencil_loops(draw):
    """A random recurrence over the rows of an array: a loop whose body reads rows at the induction
    variable plus random offsets, maybe branches on the values, and writes its row in place."""
    n = draw(st.integers(3, 7))
    offsets = draw(st.lists(st.integers(-2, 2), min_size=1, max_size=3))
    ops = [draw(st.sampled_from(sorted(COMBINE))) for _ in offsets]
    branch = draw(st.booleans())
    lo, hi = max(0, -min(offsets)), n - max(0, max(offsets))

    def fn(a, b):
        def body(i, carry):
            a, total = carry
            v = b[i]
            for off, name in zip(offsets, ops):
                v = COMBINE[name](v, a[i + off])
            if branch:
                v = jl.cond(v.sum() > 0, lambda t: t * 0.5, lambda t: t - 1.0, v)
            a[i] = v
            return a, total + a[i].sum()
        return jl.fori_loop(lo, hi, body, (a, np.float64(0)))

    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return fn, rng.standard_normal((n, 3)), rng.standard_normal((n, 3))


@settings(max_examples=compiled_examples(3), deadline=None)
@given(stencil_loops())
def test_random_loops_with_dynamic_indices_and_branches_against_numpy(case):
    fn, a, b = case
    expected = fn(a.copy(), b)        # outside a trace jl.fori_loop and jl.cond run on numpy
    program = jl.trace(fn, a, b)
    assert program.op_counts()["scf.for"] == 1
    for level in ("O0", "O1", "O2"):
        got = jl.compile(program, level=level)(a.copy(), b)
        assert_same(got, list(expected), rtol=1e-9, atol=1e-12)

"""Programs with random loops and branches (tests/loop_programs.py) at O0, O1 and O2 against the
oracle (the body program run in a Python loop by the reference interpreter); each region compiles
once, and the passes leave the region ops out of fusion groups."""

import numpy as np
from hypothesis import given, settings

import jitlab as jl
from tests.loop_programs import loop_programs
from tests.programs import assert_same


@settings(max_examples=12, deadline=None)
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
        assert exe.report.stats["region_kernels"] >= 1
        assert not any(op.name == "scf.for" for g in exe.program.walk() if g.name == "jit.group" for op in g.walk())

"""The scf dialect: text round trips, the verifier's rules, and the O0 interpreter against numpy."""

import numpy as np
import pytest
from hypothesis import given, settings

import jitlab as jl
from jitlab.dialects.reference import run_reference
from jitlab.errors import InputError, OutOfBoundsError, VerifyError
from tests.loop_programs import loop_programs
from tests.programs import assert_same

FOR = """func @f(%x: f32[B,4], %n: i64[]) -> (f32[B,4], i64[]) {
  %lo = np.constant() {value = dense<i64[] 0>} : i64[]
  %one = np.constant() {value = dense<i64[] 1>} : i64[]
  %r, %k = scf.for(%lo, %n, %one, %x, %lo, %x) : f32[B,4], i64[] {
  ^bb(%i: i64[], %c: f32[B,4], %s: i64[], %w: f32[B,4]):
    %a = np.add(%c, %w) : f32[B,4]
    %t = np.add(%s, %i) : i64[]
    scf.yield(%a, %t)
  }
  func.return(%r, %k)
}
"""

WHILE = """func @f(%x: f32[3]) -> (f32[3]) {
  %r = scf.while(%x) {max_iterations = 50} : f32[3] {
  ^bb(%c: f32[3]):
    %s = np.sum(%c) {axes = [0]} : f32[]
    %lim = np.constant() {value = dense<f32[] 100.0>} : f32[]
    %p = np.less(%s, %lim) : bool[]
    scf.condition(%p)
  } {
  ^bb(%d: f32[3]):
    %e = np.add(%d, %d) : f32[3]
    scf.yield(%e)
  }
  func.return(%r)
}
"""

IF = """func @f(%x: f32[3], %p: bool[]) -> (f32[3]) {
  %r = scf.if(%p, %x) : f32[3] {
  ^bb(%a: f32[3]):
    %b = np.neg(%a) : f32[3]
    scf.yield(%b)
  } {
  ^bb(%c: f32[3]):
    scf.yield(%c)
  }
  func.return(%r)
}
"""

NESTED = """func @f(%x: f32[2], %n: i64[]) -> (f32[2]) {
  %lo = np.constant() {value = dense<i64[] 0>} : i64[]
  %one = np.constant() {value = dense<i64[] 1>} : i64[]
  %r = scf.for(%lo, %n, %one, %x, %lo, %one) : f32[2] {
  ^bb(%i: i64[], %c: f32[2], %lo2: i64[], %one2: i64[]):
    %inner = scf.for(%lo2, %i, %one2, %c) : f32[2] {
    ^bb(%j: i64[], %d: f32[2]):
      %e = np.add(%d, %d) : f32[2]
      scf.yield(%e)
    }
    scf.yield(%inner)
  }
  func.return(%r)
}
"""


@pytest.mark.parametrize("text", [FOR, WHILE, IF, NESTED])
def test_round_trip(text):
    assert str(jl.parse(text)) == text


def test_for_interprets_as_a_python_loop_with_symbolic_shapes():
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    r, k = run_reference(jl.parse(FOR), [x, np.int64(5)], {"B": 2})
    np.testing.assert_array_equal(r, x * 6)
    assert k == sum(range(5))


def test_while_and_if_and_nested_interpret():
    x = np.array([1, 2, 3], np.float32)
    (r,) = run_reference(jl.parse(WHILE), [x])
    expected = x.copy()
    while expected.sum() < 100:
        expected = expected + expected
    np.testing.assert_array_equal(r, expected)
    for p in (True, False):
        np.testing.assert_array_equal(run_reference(jl.parse(IF), [x, np.bool_(p)])[0], -x if p else x)
    y = np.ones(2, np.float32)
    np.testing.assert_array_equal(run_reference(jl.parse(NESTED), [y, np.int64(4)])[0], y * 2 ** (0 + 1 + 2 + 3))


def test_while_max_iterations_is_an_input_error():
    text = WHILE.replace("max_iterations = 50", "max_iterations = 2")
    with pytest.raises(InputError, match="max_iterations=2"):
        run_reference(jl.parse(text), [np.ones(3, np.float32)])


def test_an_error_in_a_body_names_the_iteration_and_the_loop():
    text = """func @f(%x: f32[3], %n: i64[]) -> (f32[1]) {
  %lo = np.constant() {value = dense<i64[] 0>} : i64[]
  %one = np.constant() {value = dense<i64[] 1>} : i64[]
  %z = np.constant() {value = dense<f32[1] [0.0]>} : f32[1]
  %r = scf.for(%lo, %n, %one, %z, %x) : f32[1] {
  ^bb(%i: i64[], %c: f32[1], %w: f32[3]):
    %e = np.dynamic_slice(%w, %i) {axes = [0], sizes = [1], index_axes = [0]} : f32[1]
    scf.yield(%e)
  }
  func.return(%r)
}
"""
    program = jl.parse(text)
    np.testing.assert_array_equal(run_reference(program, [np.arange(3, dtype=np.float32), np.int64(3)])[0], [2])
    with pytest.raises(OutOfBoundsError, match=r"index 3 is out of bounds.*iteration 3 of the scf.for") as e:
        run_reference(program, [np.arange(3, dtype=np.float32), np.int64(5)])
    assert isinstance(e.value, IndexError)


@pytest.mark.parametrize("old, new, message", [
    ("scf.yield(%a, %t)", "scf.yield(%t, %a)", "scf.for: the body's scf.yield gives"),
    ("%r, %k = scf.for(%lo, %n, %one, %x, %lo, %x)", "%r, %k = scf.for(%lo, %n, %one, %lo, %lo, %x)",
     "scf.for: initial values"),
    ("%r, %k = scf.for(%lo, %n, %one, %x, %lo, %x)", "%r, %k = scf.for(%lo, %n, %one, %x, %lo, %n)",
     "scf.for: the body's arguments"),
])
def test_verifier_rules_for(old, new, message):
    with pytest.raises(VerifyError, match=message):
        jl.parse(FOR.replace(old, new))


def test_verifier_rules_bounds_condition_and_branches():
    with pytest.raises(VerifyError, match="scf.for: the upper bound must be an i64"):
        jl.parse(FOR.replace("%n: i64[]", "%n: i32[]"))
    with pytest.raises(VerifyError, match="scf.while: the condition must be a bool"):
        jl.parse(WHILE.replace("scf.condition(%p)", "scf.condition(%s)"))
    with pytest.raises(VerifyError, match="scf.if: the else region's scf.yield gives"):
        jl.parse(IF.replace("scf.yield(%c)", "%q = np.sum(%c) {axes = [0]} : f32[]\n    scf.yield(%q)"))
    with pytest.raises(VerifyError, match="scf.if: the predicate must be a bool"):
        jl.parse(IF.replace("%p: bool[]", "%p: f32[]"))


def test_regions_are_isolated():
    text = IF.replace("%b = np.neg(%a)", "%b = np.neg(%x)")
    with pytest.raises(VerifyError, match="does not dominate"):
        jl.parse(text)


@settings(max_examples=40, deadline=None)
@given(loop_programs())
def test_random_loop_programs_round_trip_and_interpret(case):
    text = str(case.program)
    assert str(jl.parse(text)) == text
    assert_same(run_reference(jl.parse(text), case.inputs), case.expected)

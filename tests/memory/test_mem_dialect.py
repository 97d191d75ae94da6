"""The `mem` dialect: text round trip, the verifier's rules (SSA dominance kept by naming,
nothing kept freed, no use after free), and O0 running programs that carry mem ops."""

import numpy as np
import pytest

import jitlab as jl
from jitlab.errors import VerifyError

PROGRAM = """func @f(%x: f32[B,4]) -> (f32[B,4], f32[4,B]) {
  mem.alloc() {value = "e", bytes = 16*B}
  %e = np.exp(%x) : f32[B,4]
  mem.reuse(%e) {value = "n"}
  %n = np.neg(%e) : f32[B,4]
  mem.alloc() {value = "t", bytes = 16*B, kind = "output"}
  %t = np.tanh(%n) : f32[B,4]
  mem.alloc() {value = "s", bytes = 16*B, kind = "output"}
  %s = np.transpose(%n) {perm = [1, 0]} : f32[4,B]
  mem.free(%e)
  func.return(%t, %s)
}
"""


def test_round_trip_and_o0_runs_it():
    program = jl.parse(PROGRAM)
    assert str(program) == PROGRAM
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    t, s = jl.compile(program, level="O0")(x)
    np.testing.assert_array_equal(t, np.tanh(-np.exp(x)))
    np.testing.assert_array_equal(s, (-np.exp(x)).T)


def _edited(old: str, new: str) -> str:
    assert old in PROGRAM
    return PROGRAM.replace(old, new)


@pytest.mark.parametrize("old, new, message", [
    ('mem.alloc() {value = "e", bytes = 16*B}', 'mem.alloc() {value = "n", bytes = 16*B}',
     r"names %n, but the next op \(np.exp\) does not define it"),
    ("  mem.free(%e)\n", "  mem.free(%e)\n  mem.free(%x)\n", r"%x is a program input: compiled code never frees it"),
    ("  mem.free(%e)\n", "  mem.free(%e)\n  mem.free(%t)\n", r"%t is a program output"),
    ("  mem.free(%e)\n  func", "  func", None),
    ('mem.reuse(%e) {value = "n"}\n  %n = np.neg(%e) : f32[B,4]',
     'mem.reuse(%x) {value = "n"}\n  %n = np.neg(%e) : f32[B,4]', r"%x is a program input: its buffer cannot be reused"),
])
def test_verifier_rules(old, new, message):
    text = _edited(old, new)
    if message is None:
        jl.parse(text)          # a buffer never freed is a leak, not invalid IR
        return
    with pytest.raises(VerifyError, match=message):
        jl.parse(text)


def test_use_after_free_names_the_value_and_its_user():
    text = _edited("  mem.free(%e)\n", "").replace(
        '  mem.alloc() {value = "t"', '  mem.free(%e)\n  mem.alloc() {value = "t"')
    with pytest.raises(VerifyError, match=r"%n \(in the buffer of %e\) is used by np.tanh after it is freed"):
        jl.parse(text)


def test_free_of_a_view_or_of_a_buffer_an_output_views_is_refused():
    text = """func @g(%x: f32[4]) -> (f32[2,2]) {
  mem.alloc() {value = "a", bytes = 16}
  %a = np.exp(%x) : f32[4]
  %v = np.reshape(%a) {shape = [2, 2]} : f32[2,2]
  mem.free(%FREED)
  func.return(%v)
}
"""
    with pytest.raises(VerifyError, match=r"%v is a view: free the value whose buffer it views"):
        jl.parse(text.replace("FREED", "v"))
    with pytest.raises(VerifyError, match=r"%a \(its buffer holds %v\) is a program output"):
        jl.parse(text.replace("FREED", "a"))


def test_reuse_needs_equal_types():
    text = """func @h(%x: f32[4]) -> (f32[4]) {
  mem.alloc() {value = "a", bytes = 16}
  %a = np.exp(%x) : f32[4]
  mem.reuse(%a) {value = "b"}
  %b = np.less(%a, %x) : bool[4]
  %c = np.where(%b, %a, %x) : f32[4]
  func.return(%c)
}
"""
    with pytest.raises(VerifyError, match=r"%b \(bool\[4\]\) cannot be written in place into %a \(f32\[4\]\)"):
        jl.parse(text)


def test_bad_attributes_are_verify_errors():
    with pytest.raises(jl.JitlabError, match="bytes"):
        jl.parse(_edited("bytes = 16*B}\n  %e", "bytes = -3}\n  %e"))
    with pytest.raises(jl.JitlabError, match="kind"):
        jl.parse(_edited('kind = "output"}\n  %t', 'kind = "scratch"}\n  %t'))

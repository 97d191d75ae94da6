"""plan-memory and alias-views on IR text: the mem ops the dynamic plan writes, views as aliases,
and the pass's options."""

import pytest

import jitlab as jl
from tests.passes.filecheck import check_rewrite

CHAIN = """func @f(%x: f32[8]) -> (f32[8]) {
  %0 = np.exp(%x) : f32[8]
  %1 = np.add(%0, %x) : f32[8]
  %2 = np.tanh(%1) : f32[8]
  %3 = np.sum(%x) {axes = [0]} : f32[]
  %4 = np.mul(%2, %3) : f32[8]
  func.return(%4)
}
"""


def test_the_dynamic_plan_writes_in_place_and_frees_right_after_the_last_use():
    # The output's buffer is the exp's, taken over in place by each elementwise op after it; the
    # sum's scalar is freed right after the mul reads it, the input never.
    check_rewrite(CHAIN, "plan-memory{mode=dynamic}", """
        func @f(%x: f32[8]) -> (f32[8]) {
          mem.alloc() {value = "0", bytes = 32, kind = "output"}
          %0 = np.exp(%x) : f32[8]
          mem.reuse(%0) {value = "1"}
          %1 = np.add(%0, %x) : f32[8]
          mem.reuse(%1) {value = "2"}
          %2 = np.tanh(%1) : f32[8]
          mem.alloc() {value = "3", bytes = 4}
          %3 = np.sum(%x) {axes = [0]} : f32[]
          mem.reuse(%2) {value = "4"}
          %4 = np.mul(%2, %3) : f32[8]
          mem.free(%3)
          func.return(%4)
        }
        """)


def test_plan_memory_rejects_bad_options_and_replans_idempotently():
    program = jl.parse(CHAIN)
    with pytest.raises(jl.PassError, match="mode must be one of static, dynamic"):
        jl.opt(program, "plan-memory{mode=somas}")
    with pytest.raises(jl.PassError, match="alignment must be a power of two"):
        jl.opt(program, "plan-memory{alignment=48}")
    once = jl.opt(program, "plan-memory{mode=dynamic}")
    assert str(jl.opt(once, "plan-memory{mode=dynamic}")) == str(once)
    assert "mem." not in str(jl.opt(once, "plan-memory{mode=static}"))


def test_a_reshape_becomes_an_alias_of_its_input():
    check_rewrite("""func @f(%x: f32[2,3]) -> (f32[3,2]) {
          %0 = np.exp(%x) : f32[2,3]
          %1 = np.reshape(%0) {shape = [3, 2]} : f32[3,2]
          %2 = np.tanh(%1) : f32[3,2]
          func.return(%2)
        }
        """, "alias-views", """
        CHECK: %0 = np.exp(%x)
        CHECK-NEXT: %1 = jit.view(%0) {shape = [3, 2]} : f32[3,2]
        CHECK-NEXT: %2 = np.tanh(%1)
        """)

"""mark-subgraphs and fuse on IR text: what is grouped, what is left out and why."""

import pytest

from jitlab.passes.fusion import why_not_fused
from tests.passes.filecheck import check_rewrite

FUSE = "mark-subgraphs,fuse"

LEFTOVER = """func @f(%x: f32[2,3]) -> (f32[2,3]) {
  %0 = np.exp(%x) : f32[2,3]
  %1 = np.cumsum(%0) {axis = 1} : f32[2,3]
  %2 = np.constant() {value = dense<f32[] 2.0>} : f32[]
  %3 = np.mul(%1, %2) : f32[2,3]
  func.return(%3)
}
"""


def test_a_leftover_op_stays_outside_with_its_reason_and_a_splat_goes_inside():
    _, report = check_rewrite(LEFTOVER, FUSE, """
        CHECK: %0 = jit.group(%x) {id = 0
        CHECK-NEXT: ^bb
        CHECK-NEXT: np.exp
        CHECK: %1 = np.cumsum(%0)
        CHECK: %2 = np.constant()
        CHECK-NEXT: %3 = jit.group(%1) {id = 1
        CHECK-NEXT: ^bb
        CHECK-NEXT: np.constant()
        CHECK-NEXT: np.mul
        """)
    reasons = {r.name: r.reason for r in report.rejected}
    assert "no generated kernel" in reasons["np.cumsum"]
    assert [g.op_names for g in report.groups] == [["np.exp"], ["np.mul"]]
    assert "np.cumsum was left out of every group" in why_not_fused(report, "0", "1")


def test_ops_excluded_by_name_stay_outside():
    _, report = check_rewrite(LEFTOVER.replace("np.cumsum(%0) {axis = 1}", "np.tanh(%0)"),
                              "mark-subgraphs{exclude=np.exp},fuse", """
        CHECK: %0 = np.exp(%x)
        CHECK: %3 = jit.group(%0) {id = 0
        CHECK: np.tanh
        CHECK-NEXT: np.mul
        """)
    assert any(r.name == "np.exp" and "excluded by the user" in r.reason for r in report.rejected)


def test_a_merge_closing_a_cycle_through_a_leftover_op_is_refused_and_explained():
    # exp feeds the add directly and through cumsum, which no group takes: fusing exp with the add
    # would leave the group to cumsum and come back in.
    _, report = check_rewrite("""func @f(%x: f32[2,3]) -> (f32[2,3]) {
          %0 = np.exp(%x) : f32[2,3]
          %1 = np.cumsum(%0) {axis = 1} : f32[2,3]
          %2 = np.add(%1, %0) : f32[2,3]
          func.return(%2)
        }
        """, FUSE, """
        CHECK: %0 = jit.group(%x) {id = 0
        CHECK: %1 = np.cumsum(%0)
        CHECK-NEXT: %2 = jit.group(%1, %0) {id = 1
        """)
    assert len(report.groups) == 2
    assert "would create a cycle" in why_not_fused(report, "0", "2")
    assert "they were fused" not in why_not_fused(report, "0", "2")


def test_a_view_between_groups_becomes_an_alias():
    _, report = check_rewrite(LEFTOVER.replace("f32[2,3]) {\n", "f32[3,2]) {\n", 1).replace(
        "np.cumsum(%0) {axis = 1} : f32[2,3]", "np.reshape(%0) {shape = [3, 2]} : f32[3,2]").replace(
        "%3 = np.mul(%1, %2) : f32[2,3]", "%3 = np.mul(%1, %2) : f32[3,2]"), f"{FUSE},alias-views", """
        CHECK: %0 = jit.group(%x) {id = 0
        CHECK: %1 = jit.view(%0) {shape = [3, 2]}
        CHECK: %3 = jit.group(%1) {id = 1
        """)
    assert [r.name for r in report.rejected] == ["np.reshape"]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")      # the random inputs hold inf and NaN
def test_a_contraction_takes_its_elementwise_epilogue_but_not_its_inputs():
    _, report = check_rewrite("""func @f(%x: f32[4,8], %w: f32[8,3], %b: f32[3]) -> (f32[4,3]) {
          %0 = np.exp(%x) : f32[4,8]
          %1 = np.matmul(%0, %w) : f32[4,3]
          %2 = np.add(%1, %b) : f32[4,3]
          %3 = np.relu(%2) : f32[4,3]
          func.return(%3)
        }
        """, FUSE, """
        CHECK: %0 = jit.group(%x) {id = 0
        CHECK: %3 = jit.group(%0, %w, %b) {id = 1
        CHECK-NEXT: ^bb
        CHECK-NEXT: np.matmul
        CHECK-NEXT: np.add
        CHECK-NEXT: np.relu
        """)
    assert [g.kind for g in report.groups] == ["elementwise", "contraction"]
    assert "inputs of a contraction are materialized" in why_not_fused(report, "0", "1")

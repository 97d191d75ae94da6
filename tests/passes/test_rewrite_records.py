"""Fusion and scheduling change the IR through the Rewriter, so their pass records list
each change: the group each cluster became, and every op the orders moved."""

from hypothesis import given, settings

from tests.passes.filecheck import check_rewrite
from tests.passes.test_schedule import BRANCHES
from tests.programs import programs

# tanh stays out of the group but reads %a, which the group makes after it: fuse moves one of them.
SPLIT = """func @f(%x: f32[8]) -> (f32[8], f32[8]) {
  %a = np.exp(%x) : f32[8]
  %t = np.tanh(%a) : f32[8]
  %b = np.neg(%a) : f32[8]
  %c = np.mul(%b, %b) : f32[8]
  func.return(%c, %t)
}
"""


def _record(report, name):
    return next(p for p in report.passes if p.name == name)


def _kept_in_order(before: list[int], after: list[int], moved: set[int]) -> bool:
    return [u for u in before if u not in moved] == [u for u in after if u not in moved]


def test_fuse_records_the_group_it_built_and_the_op_it_moved():
    result, report = check_rewrite(SPLIT, "mark-subgraphs{exclude=np.tanh},fuse", """
        CHECK: %a, %c = jit.group(%x)
        CHECK: np.exp
        CHECK: np.neg
        CHECK: np.mul
        CHECK: jit.yield
        CHECK: %t = np.tanh(%a)
        """)
    record = _record(report, "fuse")
    build, sort = record.rewrites
    (group,) = report.groups
    group_op, tanh, ret = result.ops
    assert (build.rule, build.root_name, build.moved) == ("fuse-cluster", "np.mul", group.ops)
    assert group_op.uid in build.created and group_op.body.last_op.uid in build.created
    assert sorted(build.modified) == sorted([tanh.uid, ret.uid])       # they read the group's results now
    assert sort.rule == "topological-sort" and len(sort.moved) == 1 and sort.created == sort.erased == []
    assert sort.moved[0] in (group_op.uid, tanh.uid)


def test_schedule_records_each_op_it_moves_and_no_other():
    result, report = check_rewrite(BRANCHES, "schedule{order=dfs}", """
        CHECK: %a = np.exp
        CHECK-NEXT: %sa = np.sum(%a)
        CHECK-NEXT: %b = np.tanh
        """)
    rewrites = _record(report, "schedule").rewrites
    assert [r.rule for r in rewrites] == ["dfs-order"]         # moving %sa up (or %b down) is enough
    assert rewrites[0].moved == [rewrites[0].root] and rewrites[0].root_name in ("np.sum", "np.tanh")
    assert _kept_in_order(report.schedule.orders["program"], report.schedule.order, set(rewrites[0].moved))


@settings(max_examples=25, deadline=None)
@given(programs(max_ops=12))
def test_every_scheduled_move_is_recorded_and_the_rest_keep_their_order(case):
    for order in ("bfs", "dfs", "memory"):
        _, report = check_rewrite(str(case.program), f"schedule{{order={order}}}", "CHECK: func @")
        moved = [u for r in _record(report, "schedule").rewrites for u in r.moved]
        assert len(moved) == len(set(moved))
        program_order, after = report.schedule.orders["program"], report.schedule.order
        assert _kept_in_order(program_order, after, set(moved))
        assert len(moved) == len(after) - _longest_kept(program_order, after)


def _longest_kept(before: list[int], after: list[int]) -> int:
    """The most ops an order change can leave in place: a longest common subsequence (by quadratic DP)."""
    position = {u: i for i, u in enumerate(before)}
    seq = [position[u] for u in after]
    best = [1] * len(seq)
    for i in range(len(seq)):
        best[i] = 1 + max((best[j] for j in range(i) if seq[j] < seq[i]), default=0)
    return max(best, default=0)


"""The schedule pass: BFS, DFS and memory-aware orders are legal, keep results, and have
the peaks a hand count gives; the report records them."""

import numpy as np
import pytest
from hypothesis import given

import jitlab as jl
from jitlab.passes.liveness import StepGraph
from jitlab.passes.schedule import Dependences, compute_order, memory_order
from tests.programs import programs

# Two branches, each a big temporary reduced to a scalar: BFS makes both big ones before
# reducing either, DFS finishes one branch first (MindSpore's 5 GB vs 4 GB example in small).
BRANCHES = """func @branches(%x: f32[1024]) -> (f32[]) {
  %a = np.exp(%x) : f32[1024]
  %b = np.tanh(%x) : f32[1024]
  %sa = np.sum(%a) {axes = [0]} : f32[]
  %sb = np.sum(%b) {axes = [0]} : f32[]
  %out = np.add(%sa, %sb) : f32[]
  func.return(%out)
}
"""


def test_bfs_and_dfs_peaks_on_two_branches_by_hand():
    x, big, scalar = 4096, 4096, 4
    bfs = x + 2 * big + scalar          # while %sa is computed: x, a, b and sa
    dfs = x + big + 2 * scalar          # while %b is computed: x, b, and sa; or x, sb, sa, b
    exe = jl.compile(jl.parse(BRANCHES), level="O1", passes="schedule{order=dfs}")
    record = exe.report.schedule
    assert record.peaks["bfs"] == record.peaks["program"] == bfs
    assert record.peaks["dfs"] == record.peaks["memory"] == dfs
    assert record.strategy == "dfs" and record.order == [op.uid for op in exe.program.ops[:-1]]
    names = [op.results[0].name for op in exe.program.ops[:-1]]
    assert names == ["a", "sa", "b", "sb", "out"]
    assert {k: max(v) for k, v in record.timelines.items()} == record.peaks
    x_in = np.linspace(-1, 1, 1024, dtype=np.float32)
    np.testing.assert_allclose(exe(x_in)[0], np.exp(x_in).sum() + np.tanh(x_in).sum(), rtol=1e-5)


def test_the_memory_order_is_chosen_by_default_and_is_in_the_ir():
    exe = jl.compile(jl.parse(BRANCHES), level="O2")
    record = exe.report.schedule
    assert record.strategy == "memory" and record.source
    assert record.orders["memory"] == record.order == [op.uid for op in exe.program.ops[:-1]]
    assert exe.report.memory.order == record.order
    assert exe.report.memory.lower_bound_bytes == record.peaks["memory"]


def _is_topological(program) -> bool:
    seen = set(program.inputs)
    for op in program.ops:
        if not all(v in seen for v in op.operands):
            return False
        seen.update(op.results)
    return True


@given(programs(max_ops=12))
def test_every_order_is_legal_keeps_results_and_memory_is_best(case):
    expected = jl.compile(case.program, level="O0")(*case.inputs)
    for order in ("bfs", "dfs", "memory"):
        exe = jl.compile(case.program, level="O1", passes=f"schedule{{order={order}}}", verify_each=True)
        assert _is_topological(exe.program)
        for got, want in zip(exe(*case.inputs), expected):
            np.testing.assert_array_equal(got, want)
    peaks = exe.report.schedule.peaks
    assert peaks["memory"] <= min(peaks["bfs"], peaks["dfs"])


@given(programs(max_ops=12))
def test_each_candidate_order_is_a_permutation_respecting_dependences(case):
    g = StepGraph(case.program)
    deps = Dependences.of(g)
    for name in ("bfs", "dfs", "greedy", "greedy-lookahead"):
        order = compute_order(g, name, deps)
        assert sorted(order) == list(range(g.num_steps))
        pos = {n: i for i, n in enumerate(order)}
        assert all(pos[p] < pos[n] for n, preds in enumerate(deps.preds) for p in preds)
    order, source, peaks = memory_order(g, deps)
    assert g.analyze(order).lower_bound() == min(peaks.values()) == peaks[source]


def test_weights_and_constants_go_right_before_their_first_user():
    w = np.arange(64, dtype=np.float32)
    program = jl.trace(lambda x: np.tanh(x) * w + 1.0, np.ones(64, np.float32))
    names = [op.name for op in jl.opt(program, "schedule{order=bfs}").ops]
    assert names == ["np.tanh", "np.weight", "np.mul", "np.constant", "np.add", "func.return"]


def test_a_group_is_one_step_and_its_insides_are_its_own():
    text = """func @g(%x: f32[4]) -> (f32[4]) {
  %0 = jit.group(%x) {id = 0} : f32[4] {
  ^bb(%a: f32[4]):
    %1 = np.exp(%a) : f32[4]
    %2 = np.neg(%1) : f32[4]
    jit.yield(%2)
  }
  %3 = np.tanh(%0) : f32[4]
  func.return(%3)
}
"""
    unfused = "verify,infer-shapes,schedule,plan-memory{mode=%s}"    # keep the hand-made group as it is
    exe = jl.compile(jl.parse(text), level="O2", passes=unfused % "static")
    assert [b.name for b in exe.report.memory.buffers] == ["x", "0", "3"]
    assert len(exe.report.schedule.order) == 2
    exe1 = jl.compile(jl.parse(text), level="O1", passes=unfused % "dynamic")
    assert "mem.reuse(%0) {value = \"3\"}" in str(exe1.program)
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_allclose(exe1(x)[0], np.tanh(-np.exp(x)), rtol=1e-6)


def test_bad_uses_of_the_pass():
    program = jl.parse(BRANCHES)
    with pytest.raises(jl.PassError, match="order must be one of bfs, dfs, memory"):
        jl.opt(program, "schedule{order=random}")
    with pytest.raises(jl.PassError, match="schedule must run before plan-memory"):
        jl.opt(program, "plan-memory{mode=dynamic},schedule")


def test_symbolic_programs_are_compared_at_assumed_sizes():
    program = jl.trace(lambda x: np.exp(x).sum(axis=1), jl.spec(("B", 8)))
    record = jl.compile(program, level="O1").report.schedule
    assert record.bindings == {"B": 64}
    assert record.peaks["memory"] == 64 * 8 * 4 + 64 * 4          # exp and sum are one group: in and out
    record = jl.compile(program, level="O1", bindings={"B": 2}).report.schedule
    assert record.bindings == {"B": 2} and record.peaks["memory"] == 2 * 8 * 4 + 2 * 4


def test_assumed_sizes_that_make_a_dim_negative_count_as_empty():
    program = jl.trace(lambda x: np.exp(x[100:]), jl.spec(("S",)))
    exe = jl.compile(program, level="O2")                       # compared at S=64: S-100 < 0
    assert exe.report.schedule.peaks["memory"] == 64 * 4
    assert exe.dry_run({"x": (164,)}).lower_bound_bytes == 164 * 4 + 64 * 4     # exp in place

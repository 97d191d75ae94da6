"""Liveness and memory plans: planner invariants, plans executed for real (the arena, the
pool) against O0, the observed timeline against the plan, and the targets on the models."""

import numpy as np
import pytest
from hypothesis import given, settings

import jitlab as jl
from jitlab.bench import models
from jitlab.passes import pipeline_for
from jitlab.passes.liveness import StepGraph
from jitlab.runtime.memexec import run_with_arena, run_with_pool
from jitlab.runtime.pool import MemoryPool
from tests.budget import compiled_examples
from tests.memory.oracles import check_plan, observed_live_bytes, planned
from tests.programs import programs

O1 = pipeline_for("O1").split(",")
UP_TO_FOLDING = ",".join(O1[:O1.index("fold-weights") + 1])


def assert_identical(actual, expected):
    """Same reference kernels run on the same data: results equal bit for bit (NaN where NaN)."""
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.shape == e.shape and a.dtype == e.dtype
        np.testing.assert_array_equal(a, e)


def check_levels(program, inputs):
    """Both plans hold their invariants, and running under them gives exactly O0's results,
    with the pool's observed timeline equal to the dynamic plan's replay."""
    # fold-weights folds batch norm into the conv before it (float rounding reordered): the oracle
    # is O0 on the program as the passes up to that one leave it
    expected = jl.compile(jl.opt(program, UP_TO_FOLDING), level="O0")(*inputs)
    static = planned(program, "O2")        # the arena and pool interpreters below run what it plans
    check_plan(static.report.memory)
    assert_identical(run_with_arena(static.program, static.report.memory, inputs), expected)
    dynamic = planned(program, "O1")
    plan = dynamic.report.memory
    check_plan(plan)
    outputs, timeline = run_with_pool(dynamic.program, inputs, MemoryPool(reserve=plan.first_chunk_bytes))
    assert_identical(outputs, expected)
    assert timeline == plan.pool
    assert [t["requested"] + plan.fixed_bytes for t in timeline] == plan.live_bytes
    assert plan.peak_bytes == plan.fixed_bytes + max((t["reserved"] for t in timeline), default=0)
    return static, dynamic


@settings(max_examples=compiled_examples(8), deadline=None)
@given(programs(max_ops=12))
def test_random_programs_run_correctly_under_both_plans(case):
    check_levels(case.program, case.inputs)


def test_size_0_tensors():
    def f(x, y):
        a = np.exp(x)
        b = a.reshape(0, 4) * 2.0
        return b.sum(axis=0), np.tanh(y) + a.sum()
    check_levels(jl.trace(f, np.ones((2, 0, 2), np.float32), np.ones(3, np.float32)),
                 [np.ones((2, 0, 2), np.float32), np.ones(3, np.float32)])


@settings(max_examples=compiled_examples(10), deadline=None)
@given(programs(max_ops=12))
def test_live_bytes_match_numpy_views_measured_while_running(case):
    """Without in-place reuse, the planner's live set per step is what numpy really keeps alive."""
    program = jl.compile(case.program, level="O1").program
    planned = StepGraph(program).analyze(in_place=False).live_bytes()
    assert observed_live_bytes(program, case.inputs) == planned


@pytest.mark.parametrize("name", list(models.MODELS))
def test_models_quick_sizes(name):
    fn, args = models.build(name, quick=True)
    static, dynamic = check_levels(jl.trace(fn, *args), args)
    for exe in (static, dynamic):
        peaks = exe.report.schedule.peaks
        assert peaks["memory"] <= min(peaks["bfs"], peaks["dfs"])


@pytest.mark.parametrize("name", models.BENCH + ("transformer",))
def test_static_plan_is_within_5_percent_of_the_lower_bound_at_bench_sizes(name):
    fn, args = models.build(name)
    plan = planned(jl.trace(fn, *args), "O2").report.memory
    check_plan(plan)
    assert plan.peak_bytes <= 1.05 * plan.lower_bound_bytes
    assert plan.lower_bound_bytes <= plan.naive_bytes


@pytest.mark.parametrize("batch, size", [(1, 224), (8, 64)])
def test_static_plan_on_resnet_shaped_graphs(batch, size):
    fn, _ = models.resnet50(batch=batch, size=size, width=16)
    program = jl.trace(fn, jl.spec((batch, 3, size, size)))
    exe = planned(program, "O2")
    plan, schedule = exe.report.memory, exe.report.schedule
    check_plan(plan)
    assert plan.peak_bytes <= 1.05 * plan.lower_bound_bytes
    assert schedule.peaks["memory"] <= min(schedule.peaks["bfs"], schedule.peaks["dfs"])
    assert len(program.ops) > 400


def test_views_share_and_extend_their_source_and_in_place_is_recorded():
    def f(x):
        a = np.exp(x)               # temp
        v = a.reshape(2, 8)         # a view of a: a lives as long as v
        b = np.tanh(a)              # a is still needed by v's users: no in place here
        c = v.sum(axis=1)
        d = b * 2.0                 # b dies here: d is written in place into b
        return d + 1.0, c           # d dies at the add; the add writes the output in place
    program = jl.trace(f, np.ones(16, np.float32))
    plan = jl.compile(program, level="O2", passes="plan-memory").report.memory   # in traced order
    check_plan(plan)
    by_producer = {b.producer_name: b for b in plan.buffers if b.producer_name.startswith("np.")}
    a, v = by_producer["np.exp"], by_producer["np.reshape"]
    assert v.kind == "view" and v.alias_of == a.name and a.last >= v.last
    mul, add = by_producer["np.mul"], by_producer["np.add"]
    assert (mul.kind, mul.alias_of) == ("inplace", by_producer["np.tanh"].name)
    assert (add.kind, add.alias_of) == ("inplace", by_producer["np.tanh"].name)
    assert next(b for b in plan.buffers if b.name == by_producer["np.tanh"].name).kind == "output"
    assert a.kind == "temp" and a.offset is not None


def test_dynamic_mode_ir_frees_right_after_the_last_use():
    program = jl.trace(lambda x: np.tanh(np.exp(x) + x) * x.sum(), np.ones(8, np.float32))
    text = str(jl.compile(program, level="O1").program)
    lines = [line.strip() for line in text.splitlines()]
    frees = [i for i, line in enumerate(lines) if line.startswith("mem.free")]
    for i in frees:
        freed = lines[i][len("mem.free(%"):-1]
        users = [j for j, line in enumerate(lines) if f"%{freed})" in line or f"%{freed}," in line]
        assert max(j for j in users if j != i) == i - 1 or lines[i - 1].startswith("mem.free")
    assert text.count("mem.alloc") >= 1 and "func.return" in lines[-2]
    assert str(jl.parse(text)) == text


def test_inputs_weights_and_outputs_are_never_freed():
    fn, args = models.build("layernorm", quick=True)
    unfused = "verify,infer-shapes,dce,schedule,plan-memory{mode=dynamic}"   # many temporaries to free
    program = jl.compile(jl.trace(fn, *args), level="O1", passes=unfused).program
    freed = {op.operands[0] for op in program.body.ops if op.name == "mem.free"}
    assert freed and not freed & set(program.inputs) and not freed & set(program.outputs)
    assert all(v.op.name != "np.weight" for v in freed)


def test_outputs_that_are_inputs_views_weights_or_repeated():
    w = np.arange(32, dtype=np.float32)

    def f(x):
        t = np.exp(x)
        return x, x.reshape(4, 8), t, t.reshape(8, 4), t, w * 1.0, w
    x = np.linspace(0, 1, 32, dtype=np.float32)
    static, dynamic = check_levels(jl.trace(f, x), [x])
    kinds = {b.name: b.kind for b in static.report.memory.buffers}
    assert kinds["x"] == "input" and kinds["w"] == "weight"
    exp_buffers = [b for b in static.report.memory.buffers if b.producer_name in ("np.exp", "jit.group")]
    assert exp_buffers and {b.kind for b in exp_buffers} == {"output"}
    assert "mem.free" not in str(dynamic.program)


def test_reports_round_trip_through_json():
    import json

    # O2's arena plan on an mlp: a transformer's O2 segments took 10 s to compile for the same check
    for name, level in (("transformer", "O1"), ("mlp", "O2")):
        fn, args = models.build(name, quick=True)
        report = jl.compile(jl.trace(fn, *args), level=level).report
        again = jl.CompileReport.from_dict(json.loads(report.to_json()))
        assert again.memory == report.memory and again.schedule == report.schedule

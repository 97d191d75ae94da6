"""assign-streams: independent groups on separate streams, events where they meet."""

import numpy as np

import jitlab as jl
from jitlab.passes import PassContext, PassManager
from jitlab.report import StreamEvent
from tests.cuda.helpers import on_cuda, rand


def softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def two_branches(x, y, w):
    """softmax(x) and y @ w are independent; their product needs both."""
    return softmax(x) @ np.tanh(y @ w)


def args():
    return rand(4, 5), rand(5, 3), rand(3, 6)


def plan_of(program, pipeline="mark-subgraphs,fuse,alias-views,assign-streams", **options):
    ctx = PassContext(target="cuda", **options)
    PassManager.parse(pipeline).run(program.clone(), ctx)
    return ctx.report


def test_independent_groups_get_their_own_stream_and_the_join_waits():
    report = plan_of(jl.trace(two_branches, *args()))
    plan = report.streams
    groups = {g.id: g for g in report.groups}
    assert plan.streams == 2 and len(groups) == 3
    assert plan.stream_of == [0, 1, 0]
    join = plan.ops[2]
    assert plan.events == [StreamEvent(producer=plan.ops[1], consumer=join, from_stream=1, to_stream=0)]


def test_a_chain_stays_on_one_stream_without_events():
    report = plan_of(jl.trace(lambda x, w: np.tanh(softmax(x) @ w).sum(axis=1), rand(3, 4), rand(4, 5)))
    assert report.streams.streams == 1 and report.streams.events == []


def test_stream_count_is_capped_and_reused():
    def fan(x):
        parts = [np.exp(x[:, :k]).sum(axis=1) for k in range(1, 6)]    # five shapes: five groups
        return sum(parts[1:], parts[0])

    report = plan_of(jl.trace(fan, rand(3, 6)), "mark-subgraphs,fuse,assign-streams{max_streams=2}")
    assert report.streams.streams == 2
    assert set(report.streams.stream_of) == {0, 1}
    one = plan_of(jl.trace(fan, rand(3, 6)), streams=1)
    assert one.streams.streams == 1 and one.streams.events == []


def test_results_with_cross_stream_dependencies_match_o0():
    exe = on_cuda(jl.trace(two_branches, *args()), list(args()), rtol=1e-4, atol=1e-5)
    assert exe.report.streams.streams == 2
    assert len(exe._runner.streams) == 2
    [consumer] = [s for s in exe._runner.steps if s.waits]
    [producer] = [s for s in exe._runner.steps if s.records]
    assert consumer.stream == 0 and producer.stream == 1


def test_views_do_not_need_events():
    def f(x, y):
        a = np.exp(x).sum(axis=1)
        b = np.tanh(y).max(axis=1)
        return a.reshape(2, 2) + b.reshape(2, 2)

    exe = on_cuda(jl.trace(f, rand(4, 3), rand(4, 5)), [rand(4, 3), rand(4, 5)])
    plan = exe.report.streams
    assert all(e.producer in plan.ops for e in plan.events)


def test_pass_is_recorded_with_a_note():
    report = plan_of(jl.trace(two_branches, *args()))
    record = report.passes[-1]
    assert record.name == "assign-streams" and not record.changed
    assert record.notes == ["3 op(s) on 2 stream(s), 1 event(s)"]


def test_explorer_data_shows_each_stream_and_its_events():
    # The streams part alone: what this test checks, without building the rest of the explorer's data.
    from jitlab.explore.memview import streams_data

    report = plan_of(jl.trace(two_branches, *args()))
    data = streams_data(report)
    plan = report.streams
    assert data["lanes"] == [[plan.ops[0], plan.ops[2]], [plan.ops[1]]]
    assert data["events"] == [{"producer": plan.ops[1], "consumer": plan.ops[2], "from": 1, "to": 0}]


def test_stream_plan_survives_the_report_round_trip():
    import json

    from jitlab.report import CompileReport

    report = plan_of(jl.trace(two_branches, *args()))
    again = CompileReport.from_dict(json.loads(report.to_json()))
    assert again.streams == report.streams
    assert again.streams.stream(report.streams.ops[1]) == 1

"""The data the views read for timing and kernels: each group's kernel record and time, the call's
time split, and per-scope time sums, checked against the report's own records."""

import functools

import pytest

import jitlab as jl
from jitlab.explore import from_object
from tests.browser.transformer import example
from tests.budget import slow_o2

pytestmark = pytest.mark.xdist_group("view-data")     # each level's profiled compile is made once, in one worker


@functools.cache
def profiled(level: str):
    """A traced 2-layer transformer compiled at `level` (its layers share kernels), profiled."""
    fn, x = example(layers=2)
    exe = jl.compile(jl.trace(fn, x), level=level)
    exe(x)
    jl.profile(exe, x, repeats=2)
    return exe, from_object(exe).build()


@pytest.mark.parametrize("level", slow_o2("O1", "O2"))
def test_every_group_names_the_kernel_record_that_runs_it(level):
    exe, data = profiled(level)
    records = {k.key: k for k in exe.report.kernels}
    shared = 0
    for g in data["groups"]:
        k = records[g["kernel"]]
        assert g["id"] == k.group or g["id"] in k.reused_by or g["id"] in k.group_lines
        shared += g["id"] != k.group
    assert shared > 0      # the layers' groups run kernels another group compiled


@pytest.mark.parametrize("level", slow_o2("O1", "O2"))
def test_group_times_are_their_steps_and_scopes_sum_to_the_profile(level):
    exe, data = profiled(level)
    steps = exe.report.profile["steps"]
    for g in data["groups"]:
        ran = [s["median"] for s in steps if s["group"] == g["id"]]
        assert g["seconds"] == (pytest.approx(sum(ran)) if ran else None)
    assert all(g["seconds"] is not None for g in data["groups"])
    scopes = data["scopes"]
    assert scopes[""]["seconds"] == pytest.approx(sum(s["median"] for s in steps))
    for path, node in scopes.items():      # a scope's time is its children's and its own ops' time
        own = sum(data["ops"][str(u)]["seconds"] or 0.0 for u in node["ops"])
        below = sum(scopes[c]["seconds"] or 0.0 for c in node["children"])
        assert (node["seconds"] or 0.0) == pytest.approx(own + below), path


def test_call_time_splits_the_whole_call_into_steps_and_the_rest():
    exe, data = profiled("O1")
    total, steps = exe.report.profile["total"]["median"], exe.report.profile["steps"]
    ct = data["call_time"]
    assert ct["call_seconds"] == total and ct["steps"] == len(steps)
    assert ct["steps_seconds"] == pytest.approx(sum(s["median"] for s in steps))
    assert ct["gap_seconds"] == pytest.approx(total - ct["steps_seconds"])


def test_unprofiled_data_has_no_times():
    fn, x = example(layers=1)
    exe = jl.compile(jl.trace(fn, x), level="O1")
    data = from_object(exe).build()
    assert data["call_time"] is None and all(g["seconds"] is None for g in data["groups"])
    assert all(g["kernel"] for g in data["groups"])


def test_compare_counts_ops_as_the_views_do_and_names_the_cache_that_served_a_compile():
    import dataclasses

    from jitlab.explore.compare import figures
    from jitlab.report import ExecutableCacheRecord

    exe, data = profiled("O1")
    report = exe.report
    assert figures(report)["ops"] == data["scopes"][""]["op_count"]
    hits = [k.cache_hit for k in report.kernels]
    assert figures(report)["compile_cache"] == ("kernel" if all(hits) else "")
    missed = dataclasses.replace(report, kernels=[dataclasses.replace(report.kernels[0], cache_hit=False), *report.kernels[1:]])
    assert figures(missed)["compile_cache"] == ""
    loaded = dataclasses.replace(missed, executable_cache=ExecutableCacheRecord(hit=True, path="x"))
    assert figures(loaded)["compile_cache"] == "executable"


def test_a_dry_run_plan_gives_each_buffer_its_bytes_at_that_size():
    from jitlab.explore.session import Session

    fn, x = example(layers=1)
    exe = jl.compile(jl.trace(fn, x), level="O1")
    data = Session(exe.report, exe, exe.source).build()
    plans = data["dry_run"]["plans"]
    assert len(plans) > 1
    for plan in plans[:3]:
        again = exe.dry_run({k: tuple(v) for k, v in plan["shapes"].items()})
        assert plan["buffer_bytes"] == {b.name: b.bytes for b in again.buffers if b.alias_of is None}
    compiled = {b["name"]: b["bytes"] for b in data["memory"]["buffers"] if not b["alias_of"]}
    doubled = next(p for p in plans if p["scale"] == 2)
    inputs = {b["name"] for b in data["memory"]["buffers"] if b["kind"] == "input"}
    assert all(doubled["buffer_bytes"][n] == 2 * compiled[n] for n in inputs)

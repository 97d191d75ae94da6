"""The example plugin examples/jitlab-numexpr, installed: discovered by entry point, its
engine groups in the report and the explorer, results equal to O0."""

from __future__ import annotations

from importlib import metadata

import numpy as np
import pytest
from hypothesis import given, settings

import jitlab as jl
from jitlab.backends import base
from jitlab.bench import models
from jitlab.explore.session import from_object
from tests.programs import assert_same, programs

pytest.importorskip("jitlab_numexpr", reason="examples/jitlab-numexpr is not installed (scripts/bootstrap installs it)")


def _chain():
    x = np.linspace(-3, 3, 48, dtype=np.float32).reshape(6, 8)
    y = np.linspace(1, 2, 8, dtype=np.float32)

    def f(x, y):
        h = np.maximum(np.tanh(x * y + 1.0) - y, 0.0)
        return h / np.sum(h, axis=1, keepdims=True) + np.exp(-x)
    return jl.trace(f, x, y), (x, y)


def test_the_plugin_is_found_through_its_entry_point():
    names = {ep.name: ep.value for ep in metadata.entry_points(group=base.ENTRY_POINT_GROUP)}
    assert names.get("numexpr") == "jitlab_numexpr.backend:NumexprBackend"
    assert type(base.get_backend("numexpr")).__module__ == "jitlab_numexpr.backend"
    assert "numexpr" in base.available_targets()


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_engine_groups_are_marked_recorded_and_equal_to_o0(level):
    program, args = _chain()
    exe = jl.compile(program, level=level, target="numexpr")
    assert_same(exe(*args), jl.compile(program, level="O0")(*args))
    report = exe.report
    assert [p.name for p in report.passes].count("numexpr-claim") == 1
    assert report.groups and {g.backend for g in report.groups} == {"numexpr"}
    assert all(not name.startswith(("np.sum", "np.max")) for g in report.groups for name in g.op_names)
    assert any(r.name == "np.sum" and "numexpr" in r.reason for r in report.rejected)
    assert {k.backend for k in report.kernels} == {"numexpr"}
    stats = report.stats
    assert stats["engine_ops_claimed"] == sum(len(g.ops) for g in report.groups)
    assert stats["engine_ops_after"] == stats["engine_ops_before"] - stats["engine_ops_claimed"] + stats["engine_groups"]


def test_the_explorer_group_view_lists_the_engine_groups():
    program, args = _chain()
    exe = jl.compile(program, level="O1", target="numexpr")
    state = from_object(exe).build("numexpr")
    groups = state["groups"]
    assert groups and [g["backend"] for g in groups] == ["numexpr"] * len(exe.report.groups)
    assert [g["ops"] for g in groups] == [g.ops for g in exe.report.groups]


def test_engine_passes_choose_and_order_the_translate_passes(monkeypatch):
    program, args = _chain()
    expected = jl.compile(program, level="O0")(*args)
    mixed = jl.compile(program, level="O1", target="cpu", engine_passes="numexpr-claim,mark-subgraphs,fuse")
    assert_same(mixed(*args), expected)
    backends = [g.backend for g in mixed.report.groups]
    assert "numexpr" in backends and "numba_cpu" in backends
    assert len({g.id for g in mixed.report.groups}) == len(backends)
    monkeypatch.setenv("JITLAB_ENGINE_PASSES", "")
    none = jl.compile(program, level="O1", target="numexpr")
    assert none.report.groups == [] and "numexpr-claim" not in [p.name for p in none.report.passes]
    assert_same(none(*args), expected)


@settings(deadline=None)
@given(programs(max_ops=8))
def test_random_programs_equal_o0(case):
    expected = jl.compile(case.program, level="O0")(*case.inputs)
    exe = jl.compile(case.program, level="O1", target="numexpr")
    assert_same(exe(*case.inputs), expected)


@pytest.mark.parametrize("name", models.BENCH)
def test_bench_programs_equal_o0(name):
    fn, args = models.build(name, quick=True)
    program = jl.trace(fn, *args)
    exe = jl.compile(program, level="O1", target="numexpr")
    assert_same(exe(*args), jl.compile(program, level="O0")(*args), rtol=1e-4, atol=1e-5)

"""The explorer's data: read from the report, joined by uid, nothing recomputed."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import jitlab as jl
from jitlab.explore import from_object, layout, passview
from jitlab.report import snapshot
from tests.explore.fixtures import compiled
from tests.explore.resnet import example


def mlp(x, w):
    a = np.exp(x @ w)
    b = np.exp(x @ w)          # a duplicate for cse to remove
    return a + b


def test_o0_compilation_degrades_to_empty_sections():
    x, w = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    exe = jl.compile(jl.trace(mlp, x, w), level="O0")
    data = from_object(exe).build()
    assert data["groups"] == [] and data["schedule"] is None and data["memory"] is None and data["kernels"] == []
    assert data["fusion"] == {"decisions": [], "rejected": []}
    assert [p["name"] for p in data["passes"]] == [r.name for r in exe.report.passes]
    assert {int(u) for u in data["ops"]} >= {n.uid for n in exe.report.graph.nodes}
    assert data["graph"]["nodes"] == len(data["graph"]["view"]["nodes"]) > 0


def test_pass_records_become_diffs_matched_by_uid():
    x, w = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    exe = jl.compile(jl.trace(mlp, x, w), level="O0", passes="cse,dce")
    record = exe.report.passes[0]
    entry = from_object(exe).build()["passes"][0]
    before = {n.uid for n in record.graph_before.nodes}
    after = {n.uid for n in record.graph_after.nodes}
    assert record.changed and entry["changed"]
    assert set(entry["graph_diff"]["removed"]) == before - after
    assert set(entry["graph_diff"]["added"]) == after - before
    assert {r["t"] for r in entry["diff"]} & {"del", "chg"}
    # The graph diff to draw: the graph after with the removed ops, each op marked by what the pass did to it.
    marked = {n[0]: n[4][-1] for n in entry["view"]["nodes"] if n[4] and n[4][-1] in ("added", "removed", "changed")}
    assert marked == {f"op_{u}": kind for kind in ("added", "removed", "changed") for u in entry["graph_diff"][kind]}
    assert {f"op_{n.uid}" for n in record.graph_before.nodes if n.name not in layout.FOLDED} <= {n[0] for n in entry["view"]["nodes"]}
    assert entry["rewrites"] == [{"rule": r.rule, "root": r.root, "root_name": r.root_name, "created": r.created,
                                  "erased": r.erased, "modified": r.modified, "moved": r.moved, "source": r.source,
                                  "before": r.before, "after": r.after}
                                 for r in record.rewrites]
    assert entry["rewrites"][0]["source"].startswith("jitlab/passes/basic.py:")


def test_ops_know_the_pass_and_rule_that_made_them():
    exe, _ = compiled()
    report = exe.report
    from jitlab.report import RewriteRecord

    target = report.graph.nodes[0].uid
    report.passes[-1].rewrites.append(RewriteRecord(rule="fold-thing", root=target, root_name="np.matmul",
                                                       created=[target]))
    ops = from_object(exe).build()["ops"]
    assert ops[str(target)]["origin"] == {"pass": report.passes[-1].name, "rule": "fold-thing", "root": "np.matmul"}
    assert all(ops[str(n.uid)]["origin"]["pass"] == "trace" for n in report.graph.nodes[1:])


def test_every_view_uses_the_same_colour_per_group():
    exe, _ = compiled()
    data = from_object(exe).build()
    colors = data["colors"]
    assert len(set(colors.values())) == len(exe.report.groups) == 2
    assert all(g["color"] == colors[str(g["id"])] for g in data["groups"])
    for b in data["memory"]["buffers"]:
        producer = data["ops"].get(str(b["producer"]))
        assert b["group"] == (producer["group"] if producer else None)
    svg = layout.draw(layout.view_graph(exe.report.graph), {int(k): v for k, v in colors.items()})     # a repr's drawing
    for color in colors.values():
        assert color.lower() in svg.lower()


def test_memory_and_schedule_read_as_recorded():
    exe, _ = compiled()
    data = from_object(exe).build()
    plan, sched = exe.report.memory, exe.report.schedule
    assert data["memory"]["peak_step"] == int(np.argmax(plan.live_bytes))
    assert data["memory"]["live_at_peak"] == [b.name for b in plan.largest_live_at_peak(8)]
    assert data["memory"]["pool"] == {"reserved": [p["reserved"] for p in plan.pool]}
    assert [data["schedule"]["step_of"][str(u)] for u in sched.order] == list(range(len(sched.order)))
    assert data["kernels"][0]["per_call_seconds"] == 0.001 and data["kernels"][1]["per_call_seconds"] == 0.0005
    assert "def " in data["kernels"][1]["source"] and "html" not in data["kernels"][1]      # the browser highlights it


def test_layout_collapses_groups_and_links_through_their_boundaries():
    exe, _ = compiled()
    graph = exe.report.graph
    vg = layout.from_snapshot(graph)
    inner = {n.results[0]: n.uid for n in graph.nodes}
    assert ("in_b1", f"op_{inner['a']}") in vg.edges                 # block argument -> outer input
    assert (f"op_{inner['e']}", f"op_{inner['c']}") in vg.edges       # group result -> its yielded value
    assert f"op_{inner['z']}" not in vg.nodes                         # constants are folded into users
    assert layout.draw(vg, {}).count('class="cluster group"') == 2
    view = from_object(exe).build()["graph"]["view"]
    assert sorted(map(tuple, view["edges"])) == sorted(vg.edges) and {n[0] for n in view["nodes"]} == set(vg.nodes)


def test_rejected_ops_carry_their_reason_in_the_drawing():
    exe, _ = compiled()
    svg = layout.draw(layout.view_graph(exe.report.graph, {r.op: r.reason for r in exe.report.rejected}), {})
    uid = exe.report.rejected[0].op
    assert f'id="op_{uid}" class="node op rejected' in svg and "scan ops are not fusible" in svg


def test_resnet_sized_graph_lays_out():
    f, x = example()
    program = jl.trace(f, x)
    graph = snapshot(program)
    vg = layout.from_snapshot(graph)
    assert len(graph.nodes) >= 400
    svg = layout.draw(vg, {})
    assert svg.count('class="node op') == len([n for n in vg.nodes.values() if n.kind == "op"])


@given(st.lists(st.sampled_from("abcdef"), max_size=30), st.lists(st.sampled_from("abcdef"), max_size=30))
def test_ir_diff_accounts_for_every_line(a, b):
    rows = passview.ir_diff("\n".join(a), "\n".join(b))
    left = [r for r in rows if r["t"] != "skip" and r["l"] is not None]
    right = [r for r in rows if r["t"] != "skip" and r["r"] is not None]
    # An unchanged line's text is stored once, in `a`.
    assert all(a[r["l"] - 1] == r["a"] for r in left) and all(b[r["r"] - 1] == r.get("b", r["a"]) for r in right)
    skipped = sum(r["n"] for r in rows if r["t"] == "skip")
    assert len(left) + skipped == len(a) and len(right) + skipped == len(b)
    assert all("b" not in r for r in rows if r["t"] == "same")


def test_memory_data_lists_outputs_written_into_donated_inputs():
    w, g = np.ones((8, 4), np.float32), np.full((8, 4), 0.5, np.float32)
    step = jl.jit(lambda w, g: (w - 0.1 * g, (g * g).sum()), level="O2", donate_argnums=0)
    step(w, g)
    donated = from_object(step.last).build()["memory"]["donated"]
    assert [(d["input"], d["bytes"]) for d in donated] == [("w", w.nbytes)]
    assert [d.mode for d in step.last.report.donations] == ["in place"]

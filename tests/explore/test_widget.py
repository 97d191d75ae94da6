"""The widget's Python side (traits, browser requests), static HTML, repros and Compare."""

import re

import numpy as np
import pytest

import jitlab as jl
from jitlab.explore.compare import bytes_moved, figures
from jitlab.explore.html import read_state
from jitlab.explore.repro import group_inputs, group_program, group_repro
from jitlab.explore.session import Session
from tests.explore.fixtures import DryRunExecutable, compiled


def test_explore_takes_a_jitted_function_an_executable_or_a_program():
    f = jl.jit(lambda x: np.exp(x) + 1, level="O0")
    with pytest.raises(jl.JitlabError, match="not been called"):
        jl.explore(f)
    x = np.ones(4, np.float32)
    f(x)
    assert jl.explore(f).data["level"] == "O0"
    assert jl.explore(f.last).session.exe is f.last
    program = jl.trace(lambda x: np.exp(x), x)
    widget = jl.explore(program)
    assert widget.data["passes"] == [] and len(widget.data["ops"]) == 1
    with pytest.raises(jl.JitlabError, match="takes a jitted function"):
        jl.explore(42)


@pytest.mark.parametrize("view", ["graph", "passes", "fusion", "schedule", "memory", "kernels"])
def test_each_view_alone(view):
    exe, _ = compiled()
    assert getattr(jl.explore, view)(exe).view == view


def test_unknown_view_is_an_error():
    exe, _ = compiled()
    with pytest.raises(jl.JitlabError, match="unknown explorer view"):
        jl.explore(exe, view="nope")


def test_browser_requests_are_answered_from_the_compiler_objects():
    exe, _ = compiled()
    widget = jl.explore(exe)
    sent = []
    widget.send = sent.append
    widget._on_message(widget, {"type": "repro", "group": 99}, [])
    assert "no jit.group with id 99" in sent[-1]["error"]
    widget._on_message(widget, {"type": "dry_run", "values": {"B": 8}}, [])
    assert sent[-1]["memory"]["peak_bytes"] == exe.dry_run({"x": (8, 8)}).peak_bytes


def test_dry_run_redraws_the_plan_for_other_dims():
    exe, xs = compiled(batch=3)
    stub = DryRunExecutable(exe)
    session = Session(exe.report, stub, exe.source)
    data = session.build()
    assert data["dry_run_dims"] == {"B": [1, 3, 64]}
    # the page carries plans for a range of B (the slider offline); a request asks for one more
    assert [p["values"]["B"] for p in data["dry_run"]["plans"]] == [1, 3, 6, 12, 24, 48, 96, 192, 384]
    stub.calls.clear()
    reply = session.handle({"type": "dry_run", "values": {"B": 12}})
    assert stub.calls == [{"x": (12, 8), "w1": (8, 16), "b1": (16,), "w2": (16, 4), "b2": (4,)}]
    assert reply["memory"]["peak_bytes"] == 4 * exe.report.memory.peak_bytes


def test_selection_is_synced_back_to_python():
    exe, _ = compiled()
    widget = jl.explore(exe)
    uid = exe.report.groups[0].ops[0]
    widget.set_state({"selection": {"kind": "op", "uids": [uid]}})
    assert widget.selection["uids"] == [uid]


def test_saved_html_is_one_offline_file_with_the_drawable_graph(tmp_path):
    exe, _ = compiled()
    path = jl.explore(exe).save(tmp_path / "report.html")
    text = path.read_text()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", text)
    state = read_state(text)
    data = state["data"]
    view = data["graph"]["view"]
    assert data["static"] and set(data["graph"]) == {"folded", "nodes", "view"}    # the page lays the graph out itself
    assert len(view["nodes"]) == data["graph"]["nodes"] and all(len(e) == 2 for e in view["edges"])
    assert [p["changed"] for p in data["passes"]] == [r.changed for r in exe.report.passes]
    assert "explorerWidget.render" in text and "export default" not in text


def test_pass_input_repro_replays(tmp_path):
    x, w = np.ones((2, 3), np.float32), np.full((3, 4), 0.5, np.float32)
    f = lambda x, w: np.exp(x @ w) + np.exp(x @ w)
    exe = jl.compile(jl.trace(f, x, w), level="O0", passes="cse,dce")
    widget = jl.explore(exe)
    path = widget.repro(tmp_path / "pass1.npz", (x, w), pass_index=1)
    program, inputs = jl.explore.load_repro(path)
    assert str(program) == exe.report.passes[1].before
    np.testing.assert_allclose(jl.compile(program, level="O0")(*inputs)[0], f(x, w), rtol=1e-6)


def test_group_repro_replays_the_group_alone(tmp_path):
    exe, xs = compiled()
    path = jl.explore(exe).repro(tmp_path / "g0.npz", xs, group=0)
    program, inputs = jl.explore.load_repro(path)
    x, w1, b1 = xs[:3]
    np.testing.assert_allclose(inputs[0], x @ w1, rtol=1e-6)
    (out,) = jl.compile(program, level="O0")(*inputs)
    np.testing.assert_allclose(out, np.maximum(x @ w1 + b1, 0), rtol=1e-6)


def test_compare_counts_launches_and_bytes():
    exe, xs = compiled(batch=3)
    column = figures(exe.report)
    assert column["launches"] == 2 + 3          # two groups, two matmuls, one cumsum (the reshape is a view)
    x = np.ones(4, np.float32)
    simple = jl.compile(jl.trace(lambda a, b: a + b, x, x), level="O0")
    assert bytes_moved(simple.report.graph, {}) == 3 * 16
    widget = jl.explore.compare(simple, jl.compile(jl.trace(lambda a, b: a + b, x, x), level="O1"), args=(x, x))
    cmp = widget.data["compare"]
    assert widget.view == "compare" and cmp["labels"] == ["O0 cpu", "O1 cpu"]
    assert all(c["run_seconds"] > 0 for c in cmp["columns"]) and len(cmp["views"]) == 2


def test_rich_reprs_show_ir_and_graph():
    x = np.ones((2, 3), np.float32)
    program = jl.trace(lambda x: np.maximum(x, 0) * 2, x)
    html = program._repr_html_()
    assert "np.maximum(%x, %" in html.replace("&#x27;", "'") and "<svg" in html
    exe = jl.compile(program, level="O0")
    assert "O0 on cpu" in exe._repr_html_() and "<svg" in exe._repr_html_()


def test_repro_request_writes_the_group_with_inputs_of_its_shapes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exe, xs = compiled(batch=3)
    widget = jl.explore(exe)
    gid = exe.report.groups[0].id
    entry = widget.data["repros"][str(gid)]
    assert entry["ir"].startswith(f"func @{exe.program.name}_group{gid}(")
    assert [x["shape"] for x in entry["inputs"]] == [list(a.shape) for a in
                                                      group_inputs(exe.program, gid, xs, {"B": 3})]
    sent = []
    widget.send = sent.append
    widget._on_message(widget, {"type": "repro", "group": gid}, [])
    assert "error" not in sent[-1] and sent[-1]["group"] == gid
    program, inputs = jl.explore.load_repro(sent[-1]["path"])
    assert [x.shape for x in inputs] == [tuple(x["shape"]) for x in entry["inputs"]]
    expected = jl.compile(program, level="O0")(*inputs)
    np.testing.assert_allclose(jl.compile(program, level="O1")(*inputs)[0], expected[0], rtol=1e-5, atol=1e-5)


def test_compare_lists_regrouped_ops_per_scope_and_pairs_the_passes():
    from jitlab.explore.compare import pass_pairs, regrouped
    from jitlab.explore.passview import ir_diff
    from tests.explore.test_o2_lines import model

    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((8, 16), (16, 32), (32, 4))]
    program = jl.trace(model, *args)
    o0, o1, o2 = (jl.compile(program, level=level) for level in ("O0", "O1", "O2"))
    # O0 groups nothing: exactly the ops O1 puts in a group with another op both kept are regrouped.
    kept = {n.uid for n in o0.report.graph.nodes} & {n.uid for n in o1.report.graph.nodes if n.name != "jit.group"}
    members = {}
    for n in o1.report.graph.nodes:
        if n.uid in kept and n.group is not None:
            members.setdefault(n.group, []).append(n.uid)
    expected = {u: [g, None] for g, us in members.items() if len(us) > 1 for u in us}
    diff = regrouped(o1.report, o0.report)
    assert {int(u): g for u, g in diff["ops"].items()} == expected and diff["scopes"][""]["count"] == len(expected)
    same = regrouped(o1.report, o2.report)        # the same groups at O2, ops made by passes matched too
    computing = [n for n in o1.report.graph.nodes
                 if n.name not in ("np.weight", "np.constant", "jit.group") and not n.view and not n.name.startswith("mem.")]
    assert same["ops"] == {} and same["shared"] == len(computing)
    assert {n.uid for n in o1.report.graph.nodes} != {n.uid for n in o2.report.graph.nodes}     # which renumbered them
    pairs = pass_pairs(o1.report, o2.report)
    names = [r.name for r in o1.report.passes]
    assert [r["name"] for r in pairs["rows"]] == names and [r["a"] for r in pairs["rows"]] == list(range(len(names)))
    first = pairs["first_difference"]
    assert all(r["same"] for r in pairs["rows"][:first]) and names[first] == "plan-memory"
    assert pairs["rows"][first]["diff"] == ir_diff(o1.report.passes[first].after, o2.report.passes[first].after)
    # O0's pipeline is the start of O1's: paired run for run, then O1's alone.
    n = len(o0.report.passes)
    assert [r.name for r in o0.report.passes] == names[:n]
    assert [r["b"] for r in pass_pairs(o1.report, o0.report)["rows"]] == list(range(n)) + [None] * (len(names) - n)


def test_a_group_with_unbound_dims_has_no_page_repro():
    exe, _ = compiled(batch=3)
    gid = exe.report.groups[0].id
    assert any(str(v.type).count("B") for v in group_program(exe.program, gid).inputs)
    assert group_repro(exe.program, gid, {}) is None
    assert group_repro(exe.program, gid, {"B": 5})["inputs"][0]["shape"][0] == 5

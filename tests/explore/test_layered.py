"""Without Graphviz's `dot`: the notebook reprs are laid out by jitlab's own layered layout, drawn with the
ids and classes Graphviz's SVG has, and say it is the fallback; the explorer needs neither (the browser lays out)."""

import json
import pathlib
import re
import shutil
import sys
from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import jitlab as jl
from jitlab import cli
from jitlab.explore import from_object, layered, layout
from jitlab.explore.html import read_state
from tests.explore.fixtures import compiled

CHAIN = pathlib.Path(__file__).resolve().parents[2] / "examples/ir/chain.jir"
FALLBACK = 'data-layout="fallback"'
ELEMENT = re.compile(r'<g id="([^"]+)" class="(node [^"]*|cluster [^"]*)"')


@pytest.fixture
def no_dot(monkeypatch, tmp_path):
    """A PATH on which Graphviz's `dot` cannot be found, and no layout cached from before."""
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(layout, "_CACHE", OrderedDict())
    assert layout.render("digraph { a -> b }") is None


def elements(svg: str) -> dict[str, str]:
    """Node and cluster ids of an SVG with their classes."""
    return dict(ELEMENT.findall(svg))


def edge_ids(svg: str) -> set[str]:
    return set(re.findall(r'<g id="(e_[^"]+)" class="edge', svg))


def test_every_explorer_view_works_without_dot(no_dot, tmp_path):
    exe, _ = compiled()
    widget = jl.explore(exe)
    # The explorer draws nothing with Graphviz: the browser lays out the graph and every pass's graph diff.
    assert "view" in widget.data["graph"] and any(p["view"] for p in widget.data["passes"])
    page = read_state(jl.explore(exe).save(tmp_path / "report.html").read_text())
    assert "<svg" not in json.dumps(page)
    x = np.ones((2, 3), np.float32)
    program = jl.trace(lambda x: np.exp(x) + 1, x)
    assert FALLBACK in program._repr_html_() and FALLBACK in jl.compile(program, level="O0")._repr_html_()
    assert "apt-get install graphviz" in program._repr_html_()


def test_cli_explore_works_without_dot(no_dot, tmp_path):
    out = tmp_path / "chain.html"
    assert cli.main(["explore", str(CHAIN), "-o", str(out)]) == 0
    assert read_state(out.read_text())["data"]["graph"]["view"]["nodes"]


def test_without_the_graphviz_package_too(monkeypatch):
    monkeypatch.setitem(sys.modules, "graphviz", None)       # `import graphviz` raises ImportError
    monkeypatch.setattr(layout, "_CACHE", OrderedDict())
    exe, _ = compiled()
    assert FALLBACK in exe._repr_html_()


@pytest.mark.skipif(shutil.which("dot") is None, reason="compares with Graphviz's drawing")
def test_fallback_draws_what_graphviz_draws():
    exe, _ = compiled()
    colors = {int(k): v for k, v in from_object(exe).build()["colors"].items()}
    vg = layout.view_graph(exe.report.graph, {r.op: r.reason for r in exe.report.rejected})
    d = layout.drawing(vg, colors)
    by_dot, by_us = layout.render(layout.to_dot(d)), layered.svg(d)
    assert FALLBACK not in by_dot and FALLBACK in by_us
    assert elements(by_us) == elements(by_dot) and edge_ids(by_us) == edge_ids(by_dot)
    assert by_us.count("<text") == by_dot.count("<text") + 1                # every label line, and the note


def overlap(a, b) -> bool:
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


def inside(a, b) -> bool:
    return b[0] <= a[0] and a[0] + a[2] <= b[0] + b[2] and b[1] <= a[1] and a[1] + a[3] <= b[1] + b[3]


def _reaches(succ: dict, src, dst) -> bool:
    stack, seen = [src], set()
    while stack:
        v = stack.pop()
        if v == dst:
            return True
        if v not in seen:
            seen.add(v)
            stack += succ.get(v, ())
    return False


def _convex_edges(pairs, group_of: dict[int, int | None]) -> set[tuple[int, int]]:
    """The pairs kept in order, leaving out any that would let a path leave a group and come back
    into it: mark-subgraphs never makes such a group (it would be a cycle once the group is one op)."""
    node = lambda i: ("g", group_of[i]) if group_of[i] is not None else ("op", i)  # noqa: E731
    succ: dict = {}
    kept = set()
    for a, b in pairs:
        qa, qb = node(a), node(b)
        if qa != qb and _reaches(succ, qb, qa):
            continue
        kept.add((a, b))
        if qa != qb:
            succ.setdefault(qa, []).append(qb)
    return kept


@st.composite
def view_graphs(draw):
    """Random DAGs of ops (edges from lower to higher index), some in groups as fusion makes them,
    with inputs and outputs."""
    n = draw(st.integers(1, 14))
    vg = layout.ViewGraph()
    group_of = {}
    for i in range(n):
        group_of[i] = draw(st.one_of(st.none(), st.integers(0, 2)))
        vg.nodes[f"op_{i}"] = layout.Node(f"op_{i}", "x" * draw(st.integers(1, 30)), "op", group_of[i])
    vg.nodes["in_a"] = layout.Node("in_a", "a\nf32[4]", "input")
    vg.nodes["out_0"] = layout.Node("out_0", "result 0", "output")
    pairs = st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)).filter(lambda p: p[0] < p[1])
    edges = _convex_edges(draw(st.lists(pairs, max_size=3 * n)), group_of)
    vg.edges = {(f"op_{a}", f"op_{b}") for a, b in edges}
    vg.edges |= {("in_a", "op_0"), (f"op_{n - 1}", "out_0")}
    # Fusion never makes a group a path leaves and re-enters (its cycle check), and the layout relies on it.
    assume(all(convex(vg, g) for g in range(3)))
    return vg


def convex(vg, group: int) -> bool:
    """No path from a member of `group` to another one passes outside it."""
    members = {i for i, n in vg.nodes.items() if n.group == group}

    def reach(start, step):
        seen, todo = set(), list(start)
        while todo:
            for nxt in step(todo.pop()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    below = reach(members, lambda i: [b for a, b in vg.edges if a == i])
    above = reach(members, lambda i: [a for a, b in vg.edges if b == i])
    return not (below & above) - members


@given(view_graphs())
def test_layout_never_overlaps_and_edges_point_down(vg):
    d = layout.drawing(vg, {})
    at = layered.arrange(d)
    boxes = list(at.items.items())
    for k, (a, box_a) in enumerate(boxes):
        assert all(not overlap(box_a, box_b) for _, box_b in boxes[k + 1:]), a
    for g, (_, members) in d.clusters.items():
        ids = {m.id for m in members}
        assert all(inside(at.items[i], at.clusters[g]) for i in ids)
        assert all(not overlap(box, at.clusters[g]) for i, box in at.items.items() if i not in ids)
    for a, b in d.edges:                      # acyclic with each group as one item: every edge goes down
        assert at.items[a][1] + at.items[a][3] <= at.items[b][1]
    svg = layered.svg(d)
    assert set(elements(svg)) == set(at.items) | {f"grp_{g}" for g in d.clusters}
    assert len(edge_ids(svg)) == len(d.edges)


def test_a_cycle_in_a_pass_diff_still_lays_out():
    vg = layout.ViewGraph({i: layout.Node(i, i, "op") for i in ("op_1", "op_2", "op_3")},
                          {("op_1", "op_2"), ("op_2", "op_3"), ("op_3", "op_1")})
    svg = layered.svg(layout.drawing(vg, {}))
    assert set(elements(svg)) == {"op_1", "op_2", "op_3"} and len(edge_ids(svg)) == 3


def test_a_group_a_path_leaves_and_reenters_still_lays_out():
    """Not made by mark-subgraphs (a cycle once the group is one op); drawn all the same, without overlaps."""
    nodes = {i: layout.Node(i, i, "op", 0 if i in ("op_1", "op_3") else None) for i in ("op_1", "op_2", "op_3")}
    vg = layout.ViewGraph(nodes, {("op_1", "op_2"), ("op_2", "op_3")})
    d = layout.drawing(vg, {})
    at = layered.arrange(d)
    assert not overlap(at.items["op_2"], at.clusters[0])
    assert set(elements(layered.svg(d))) == {"op_1", "op_2", "op_3", "grp_0"}

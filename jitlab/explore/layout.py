"""A snapshot as a small graph of drawable nodes: sent to the browser, which lays the
explorer's graph and pass graph diffs out itself (widgets/layout.js), and drawn here, every
group as a cluster, for the notebook reprs: SVG laid out by Graphviz's `dot` (cached by the
DOT text) or, where `dot` is not installed, by jitlab's own layered layout (`layered`),
which says so in the SVG.

Node ids are what the browser side links by: `op_<uid>` for an op, `grp_<id>` for a
group's cluster, `in_<name>` and `out_<i>` for the program's inputs and results.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from ..report import GraphSnapshot, OpNode
from . import layered, regions

FOLDED = ("np.weight", "np.constant")
_CACHE: OrderedDict[str, str] = OrderedDict()
_CACHE_SIZE = 64


@dataclass
class Node:
    """One drawable node: an op, an input or an output."""

    id: str
    label: str
    kind: str                     # op, input, output
    group: int | None = None
    classes: list[str] = field(default_factory=list)
    region: str | None = None     # the region box holding it (`regions.box_id`), None at the top


@dataclass
class ViewGraph:
    """Drawable nodes and edges between their ids, with each group's member ids."""

    nodes: dict[str, Node] = field(default_factory=dict)
    edges: set[tuple[str, str]] = field(default_factory=set)
    folded: dict[str, list[str]] = field(default_factory=dict)   # op id -> folded weights/constants
    regions: dict[str, dict[str, Any]] = field(default_factory=dict)   # region box id -> what it is (regions.py)

    def groups(self) -> dict[int, list[str]]:
        out: dict[int, list[str]] = {}
        for node in self.nodes.values():
            if node.group is not None:
                out.setdefault(node.group, []).append(node.id)
        return out


def short_type(t: str) -> str:
    return t if len(t) <= 28 else t[:26] + "…"


def op_label(n: OpNode) -> str:
    name = n.name.split(".", 1)[-1]
    return name + ("\n" + short_type(n.types[0]) if n.types else "")


class _Resolver:
    """Maps printed value names to the drawable nodes producing them, through group boundaries; a
    region's block arguments come from its op's header node, a control-flow op's results from the
    ends of its regions (`regions.exits`)."""

    def __init__(self, graph: GraphSnapshot):
        self.producer: dict[str, list[str]] = {f"{name}": [f"in_{name}"] for name in graph.inputs}
        self.alias: dict[str, str] = {}
        for n in graph.nodes:
            for arg, outer in zip(n.block_args, n.operands):
                self.alias[arg] = outer
            for region in n.regions:
                for arg in region.args:
                    self.producer[arg] = [f"op_{n.uid}"]
            for res, inner in zip(n.results, n.yields or [None] * len(n.results)):
                if inner is not None:
                    self.alias[res] = inner
                elif n.name in FOLDED:
                    self.producer[res] = [f"folded:{n.uid}"]
                else:
                    self.producer[res] = regions.exits(n) or [f"op_{n.uid}"]

    def sources(self, name: str) -> list[str]:
        seen = 0
        while name in self.alias and seen < 64:
            name, seen = self.alias[name], seen + 1
        return self.producer.get(name, [])


def from_snapshot(graph: GraphSnapshot) -> ViewGraph:
    """The drawable graph of a snapshot: weights and constants folded into their users; a control-flow
    op as a header node with its regions' ops (drawn once) and each region's end in a box of its own."""
    vg, res = ViewGraph(), _Resolver(graph)
    by_uid = {n.uid: n for n in graph.nodes}
    by_name = {r: n for n in graph.nodes for r in n.results}
    vg.regions = regions.boxes(graph)
    for name, t in zip(graph.inputs, graph.input_types):
        vg.nodes[f"in_{name}"] = Node(f"in_{name}", f"{name}\n{short_type(t)}", "input")
    for n in graph.nodes:
        if n.name in FOLDED or n.block_args or n.yields:
            continue
        node_id = f"op_{n.uid}"
        box = regions.box_of(n, by_uid)
        if n.regions:
            vg.nodes[node_id] = Node(node_id, regions.header_label(n, by_name), "op", n.group, ["region"],
                                     regions.op_box(n))
            _region_ends(vg, res, n, by_uid)
        else:
            vg.nodes[node_id] = Node(node_id, op_label(n), "op", n.group, ["view"] if n.view else [], box)
        _wire(vg, res, by_uid, node_id, n.operands)
    for i, name in enumerate(graph.outputs):
        vg.nodes[f"out_{i}"] = Node(f"out_{i}", f"result {i}", "output")
        _wire(vg, res, by_uid, f"out_{i}", [name], fold=False)
    return vg


def _wire(vg: ViewGraph, res: _Resolver, by_uid: dict[int, OpNode], node_id: str, names: list[str],
          fold: bool = True) -> None:
    """Edges into `node_id` from what produces each of `names`; weights and constants listed on it instead."""
    for name in names:
        for src in res.sources(name):
            if not src.startswith("folded:"):
                vg.edges.add((src, node_id))
            elif fold:
                folded = by_uid[int(src[7:])]
                vg.folded.setdefault(node_id, []).append(folded.attrs.get("name", folded.name))


def _region_ends(vg: ViewGraph, res: _Resolver, n: OpNode, by_uid: dict[int, OpNode]) -> None:
    """Each region's end (what it yields, or its condition) as a node inside the region's box."""
    for r, region in enumerate(n.regions):
        end_id = regions.end_id(n, r)
        vg.nodes[end_id] = Node(end_id, regions.end_label(n, r), "end", n.group, [],
                                regions.box_id(n, r))
        _wire(vg, res, by_uid, end_id, region.yields, fold=False)


def view_graph(graph: GraphSnapshot, rejected: dict[int, str] | None = None) -> ViewGraph:
    """`from_snapshot` with ops left out of every group marked, their reason in the label."""
    vg = from_snapshot(graph)
    for uid, reason in (rejected or {}).items():
        node = vg.nodes.get(f"op_{uid}")
        # a loop or branch is never fused (its regions compile as programs of their own): its box says so
        if node is not None and "region" not in node.classes:
            node.classes.append("rejected")
            node.label += "\n✕ " + (reason if len(reason) <= 32 else reason[:31] + "…")
    return vg


def merge(after: ViewGraph, before: ViewGraph) -> ViewGraph:
    """`after` plus the nodes and edges only `before` had (for a pass's graph diff)."""
    out = ViewGraph(dict(after.nodes), set(after.edges), dict(after.folded), {**before.regions, **after.regions})
    for node_id, node in before.nodes.items():
        out.nodes.setdefault(node_id, node)
    out.edges |= {e for e in before.edges if e[0] in out.nodes and e[1] in out.nodes}
    return out


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


@dataclass
class Item:
    """One node as drawn, whoever lays it out: its id, label, classes, outline and fill."""

    id: str
    label: str
    classes: str
    shape: str = "box"            # box (rounded), ellipse, oval
    fill: str | None = None


@dataclass
class Drawing:
    """What one layout draws: groups as clusters of items, the other items, edges."""

    clusters: dict[int, tuple[str, list[Item]]] = field(default_factory=dict)   # group id -> (colour, items)
    items: list[Item] = field(default_factory=list)
    edges: list[tuple[str, str]] = field(default_factory=list)


def _item(node: Node, color: str | None) -> Item:
    classes = " ".join([node.kind] + node.classes + (["filled"] if color else []))
    shape = {"input": "ellipse", "output": "oval"}.get(node.kind, "box")
    return Item(node.id, node.label, classes, shape, color)


def drawing(vg: ViewGraph, colors: dict[int, str]) -> Drawing:
    """What to draw: each group as a cluster, the other nodes as they are."""
    out = Drawing()
    for g, ids in sorted(vg.groups().items()):
        color = colors.get(g, "#dddddd")
        out.clusters[g] = (color, [_item(vg.nodes[i], color) for i in ids])
    out.items += [_item(n, None) for n in vg.nodes.values() if n.group is None]
    out.edges = sorted(set(vg.edges) - {(a, a) for a in vg.nodes})
    return out


def _dot_node(item: Item) -> str:
    attrs = {"id": item.id, "class": item.classes, "label": item.label}
    if item.shape != "box":
        attrs["shape"] = item.shape
    if item.fill:
        attrs["fillcolor"] = item.fill
    return f"{_quote(item.id)} [" + " ".join(f"{k}={_quote(v)}" for k, v in attrs.items()) + "];"


HEADER = ('digraph G {\n  graph [rankdir=TB nodesep=0.22 ranksep=0.32 fontname="Helvetica" fontsize=10 '
          'bgcolor="transparent"];\n  node [shape=box style="rounded,filled" fillcolor="white" fontname="Helvetica" '
          'fontsize=10 height=0.3 margin="0.08,0.03"];\n  edge [arrowsize=0.6];\n')


def to_dot(d: Drawing) -> str:
    """The drawing as DOT text for Graphviz."""
    lines = [HEADER]
    for g, (color, items) in d.clusters.items():
        lines.append(f'  subgraph "cluster_{g}" {{ id="grp_{g}"; class="group"; label="group {g}"; '
                     f'style="rounded,filled"; fillcolor="{color}40"; color="{color}";')
        lines += ["    " + _dot_node(i) for i in items]
        lines.append("  }")
    lines += ["  " + _dot_node(i) for i in d.items]
    lines += [f'  "{a}" -> "{b}" [id="e_{a}__{b}" class="edge"];' for a, b in d.edges]
    lines.append("}")
    return "\n".join(lines)


def render(dot: str) -> str | None:
    """SVG for DOT text laid out by Graphviz (cached), or None when Graphviz is not installed."""
    key = hashlib.sha1(dot.encode()).hexdigest()
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    try:
        import graphviz
    except ImportError:
        return None
    try:
        svg = graphviz.Source(dot).pipe(format="svg", encoding="utf-8")
    except graphviz.ExecutableNotFound:      # the Python package is there, Graphviz's `dot` is not
        return None
    svg = svg[svg.index("<svg"):]
    _CACHE[key] = svg
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return svg


def draw(vg: ViewGraph, colors: dict[int, str]) -> str:
    """SVG of a view graph: laid out by Graphviz's `dot`, or by jitlab's own layered layout without it."""
    d = drawing(vg, colors)
    svg = render(to_dot(d))
    return svg if svg is not None else layered.svg(d)


def graph_data(graph: GraphSnapshot, rejected: dict[int, str] | None = None) -> dict[str, Any]:
    """The drawable graph the browser lays out (any mix of expanded and collapsed parts), with the folded weights."""
    vg = view_graph(graph, rejected)
    nodes = [[n.id, n.label, n.kind, n.group, n.classes, n.region] for n in vg.nodes.values()]
    return {"folded": vg.folded, "nodes": len(vg.nodes),
            "view": {"nodes": nodes, "edges": sorted(vg.edges), "regions": vg.regions}}

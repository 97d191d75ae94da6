"""Control-flow ops (scf.for, scf.while, scf.if) for the explorer: each is a box holding its header
node and its regions' ops, drawn once; a loop's trip count is read off its bounds when they are
constants, else named by the traced value that holds it.

Box ids: `lp_<uid>` for the op's own box (a `for` loop's body ops sit in it directly), `rg_<uid>_<r>`
for each region of a while loop or a branch (condition and body; then and else); a region's end
(what it yields or its condition) is the node `end_<uid>_<r>`.
"""

from __future__ import annotations

import re
from typing import Any

from ..report import CompileReport, GraphSnapshot, LoopRecord, OpNode
from .compare import type_bytes

LOOPS = ("scf.for", "scf.while")
REGION_NAMES = {"scf.for": ("body",), "scf.while": ("condition", "body"), "scf.if": ("then", "else")}
SKIP = ("np.constant", "np.weight", "mem.alloc", "mem.free", "mem.reuse")
_SCALAR = re.compile(r"^dense<\w+\[\] (-?\d+)>$")


def op_box(n: OpNode) -> str:
    return f"lp_{n.uid}"


def box_id(n: OpNode, r: int) -> str:
    """The box holding the ops of region `r` of control-flow op `n`."""
    return op_box(n) if n.name == "scf.for" else f"rg_{n.uid}_{r}"


def box_of(n: OpNode, by_uid: dict[int, OpNode]) -> str | None:
    """The box an op is drawn in: the region holding it, or None for the program's top level."""
    return None if n.parent is None or n.parent not in by_uid else box_id(by_uid[n.parent], n.region)


def end_id(n: OpNode, r: int) -> str:
    return f"end_{n.uid}_{r}"


def exits(n: OpNode) -> list[str]:
    """The nodes a control-flow op's results come from: a loop's last yield or condition, each branch's yield."""
    if n.name == "scf.if":
        return [end_id(n, r) for r in range(len(n.regions))]
    return [end_id(n, 0 if n.name == "scf.while" else len(n.regions) - 1)] if n.regions else []


def end_label(n: OpNode, r: int) -> str:
    if n.name == "scf.while" and r == 0:
        return "condition\n→ stop or run the body"
    return "yield\n→ next iteration" if n.name in LOOPS else f"yield ({_region_name(n, r)})"


def _region_name(n: OpNode, r: int) -> str:
    names = REGION_NAMES.get(n.name, ())
    return names[r] if r < len(names) else f"region {r}"


def _scalar(name: str, by_name: dict[str, OpNode]) -> int | None:
    node = by_name.get(name)
    if node is None or node.name != "np.constant":
        return None
    m = _SCALAR.match(node.attrs.get("value", ""))
    return int(m.group(1)) if m else None


def trips(n: OpNode, by_name: dict[str, OpNode]) -> int | str | None:
    """A for loop's trip count: a number when its bounds are constants, else how it is computed from the
    traced values (`%n`, `range(%a, %b, 2)`); None for other ops."""
    if n.name != "scf.for" or len(n.operands) < 3:
        return None
    names = n.operands[:3]
    values = [_scalar(v, by_name) for v in names]
    if None not in values and values[2] != 0:
        return len(range(*values))
    shown = [str(v) if v is not None else f"%{name}" for v, name in zip(values, names)]
    return shown[1] if shown[0] == "0" and shown[2] == "1" else f"range({', '.join(shown)})"


def header_label(n: OpNode, by_name: dict[str, OpNode]) -> str:
    """The header node's label: the op and its trip count or predicate."""
    if n.name == "scf.for":
        return f"for × {trips(n, by_name)}"
    if n.name == "scf.if":
        return f"if %{n.operands[0]}" if n.operands else "if"
    return n.name.split(".", 1)[-1]


def boxes(graph: GraphSnapshot) -> dict[str, dict[str, Any]]:
    """Every region box: its op, its kind (loop, branch or region), its label, the box it sits in and,
    for a loop, its trip count."""
    by_uid = {n.uid: n for n in graph.nodes}
    by_name = {r: n for n in graph.nodes for r in n.results}
    out: dict[str, dict[str, Any]] = {}
    for n in graph.nodes:
        if not n.regions:
            continue
        count = trips(n, by_name)
        out[op_box(n)] = {"uid": n.uid, "op": n.name, "kind": "loop" if n.name in LOOPS else "branch",
                          "label": header_label(n, by_name), "parent": box_of(n, by_uid),
                          "trips": count}
        if n.name != "scf.for":
            for r in range(len(n.regions)):
                out[box_id(n, r)] = {"uid": n.uid, "op": n.name, "kind": "region", "label": _region_name(n, r),
                                     "parent": op_box(n), "trips": None}
    return out


def _region_ops(graph: GraphSnapshot, n: OpNode) -> list[list[OpNode]]:
    """The ops each region of `n` runs per iteration (or per branch taken), in order: no constants or bookkeeping."""
    out: list[list[OpNode]] = [[] for _ in n.regions]
    for m in graph.nodes:
        if m.parent == n.uid and m.name not in SKIP and not m.view and m.name != "jit.group":
            out[m.region].append(m)
    return out


def loops_data(report: CompileReport, seconds: dict[int, float]) -> dict[str, dict[str, Any]]:
    """Each control-flow op of the final graph by uid: its trip count, the sub-steps each region runs, the
    bytes of the values one iteration makes (the body's own memory plan is not in the report: an upper
    bound on one iteration's live set) and, when profiled, its time and time per iteration."""
    graph = report.graph
    if graph is None:
        return {}
    bindings = dict(report.memory.bindings) if report.memory is not None else {}
    by_name = {r: n for n in graph.nodes for r in n.results}
    runs = {r.uid: r for r in report.loops}
    out: dict[str, dict[str, Any]] = {}
    for n in (m for m in graph.nodes if m.regions):
        count, regions = trips(n, by_name), _region_ops(graph, n)
        sizes = [type_bytes(t, bindings) for ops in regions for m in ops for t in m.types]
        spent = seconds.get(n.uid)
        out[str(n.uid)] = {
            "op": n.name, "label": header_label(n, by_name), "trips": count, "parent": n.parent,
            "regions": [{"name": _region_name(n, r), "steps": [m.uid for m in ops]} for r, ops in enumerate(regions)],
            "iteration_values": len(sizes), "iteration_bytes": None if None in sizes else sum(sizes),
            **_how_it_runs(runs.get(n.uid)),
            "seconds": spent,
            "seconds_per_iteration": spent / count if spent is not None and isinstance(count, int) and count else None}
    return out


def _how_it_runs(record: LoopRecord | None) -> dict[str, Any]:
    """The backend's record of a loop: "native" or why it runs from the host, and a native loop's own
    buffers (allocated once, reused every iteration: one iteration's live set)."""
    native = record is not None and record.native
    return {"runs": None if record is None else "native" if native else record.reason,
            "buffer_bytes": record.iteration_bytes if native else None,
            "buffer_count": len(record.buffers) if native else None}

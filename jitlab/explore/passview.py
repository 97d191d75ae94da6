"""The Passes view's data: per pass run its cost, op-count change, a side-by-side IR
diff and a graph diff by op uid (the drawable graph after the pass with the ops it removed,
which the browser lays out), plus the rules that fired and the ones that missed."""

from __future__ import annotations

import difflib
from typing import Any

from ..report import CompileReport, GraphSnapshot, OpNode, PassRecord
from . import layout

CONTEXT = 3


def _skip(rows: list[dict], lines: list[tuple[int, int, str]]) -> None:
    """Unchanged lines, with long runs cut to a few lines of context around the changes."""
    if len(lines) <= 2 * CONTEXT + 2:
        rows += [{"t": "same", "l": i + 1, "a": text, "r": j + 1} for i, j, text in lines]
        return
    head, tail = lines[:CONTEXT] if rows else [], lines[-CONTEXT:]
    rows += [{"t": "same", "l": i + 1, "a": t, "r": j + 1} for i, j, t in head]
    rows.append({"t": "skip", "n": len(lines) - len(head) - len(tail)})
    rows += [{"t": "same", "l": i + 1, "a": t, "r": j + 1} for i, j, t in tail]


def ir_diff(before: str, after: str) -> list[dict[str, Any]]:
    """Rows of a side-by-side diff: same (its text once, in `a`), add, del, chg (a line changed in place) and skip."""
    a, b = before.splitlines(), after.splitlines()
    rows: list[dict[str, Any]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            _skip(rows, [(i1 + k, j1 + k, a[i1 + k]) for k in range(i2 - i1)])
            continue
        left, right = list(range(i1, i2)), list(range(j1, j2))
        for k in range(max(len(left), len(right))):
            i = left[k] if k < len(left) else None
            j = right[k] if k < len(right) else None
            kind = "chg" if i is not None and j is not None else ("del" if j is None else "add")
            rows.append({"t": kind, "l": None if i is None else i + 1, "a": "" if i is None else a[i],
                         "r": None if j is None else j + 1, "b": "" if j is None else b[j]})
    if rows and rows[-1]["t"] == "skip":
        rows.pop()
    return rows


def _signature(n: OpNode) -> tuple:
    return (n.name, tuple(n.operands), tuple(sorted(n.attrs.items())), tuple(n.types), n.group)


def graph_diff(before: GraphSnapshot | None, after: GraphSnapshot | None) -> dict[str, list[int]]:
    """Ops added, removed and changed by a pass, matched by uid."""
    if before is None or after is None:
        return {"added": [], "removed": [], "changed": []}
    old = {n.uid: n for n in before.nodes}
    new = {n.uid: n for n in after.nodes}
    return {"added": [u for u in new if u not in old], "removed": [u for u in old if u not in new],
            "changed": [u for u in new if u in old and _signature(new[u]) != _signature(old[u])]}


def pass_entry(index: int, record: PassRecord) -> dict[str, Any]:
    """One row of the pass list with its diffs and rule records."""
    n_before, n_after = sum(record.ops_before.values()), sum(record.ops_after.values())
    return {"index": index, "name": record.name, "options": record.options, "seconds": record.seconds,
            "changed": record.changed, "ops_before": n_before, "ops_after": n_after,
            "counts_before": record.ops_before, "counts_after": record.ops_after,
            "diff": ir_diff(record.before, record.after) if record.changed else [],
            "graph_diff": graph_diff(record.graph_before, record.graph_after),
            "rewrites": [{"rule": r.rule, "root": r.root, "root_name": r.root_name, "created": r.created,
                          "erased": r.erased, "modified": r.modified, "moved": r.moved, "source": r.source,
                          "before": r.before, "after": r.after} for r in record.rewrites],
            "misses": [{"rule": m.rule, "op": m.op, "op_name": m.op_name, "reason": m.reason} for m in record.misses],
            "notes": list(record.notes), "view": pass_view(record) if record.changed else None}


def passes_data(report: CompileReport) -> list[dict[str, Any]]:
    """Every pass run."""
    return [pass_entry(i, r) for i, r in enumerate(report.passes)]


def pass_view(record: PassRecord) -> dict[str, Any] | None:
    """The drawable graph after a pass with the ops it removed, each op marked `added`, `removed` or
    `changed` among its classes: `{"nodes", "edges"}` as `graph.view`."""
    if record.graph_before is None or record.graph_after is None:
        return None
    diff = graph_diff(record.graph_before, record.graph_after)
    marks = {f"op_{u}": kind for kind in ("added", "removed", "changed") for u in diff[kind]}
    vg = layout.merge(layout.from_snapshot(record.graph_after), layout.from_snapshot(record.graph_before))
    nodes = [[n.id, n.label, n.kind, n.group, n.classes + ([marks[n.id]] if n.id in marks else []), n.region]
             for n in vg.nodes.values()]
    return {"nodes": nodes, "edges": sorted(vg.edges), "regions": vg.regions}

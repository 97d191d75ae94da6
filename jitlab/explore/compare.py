"""The Compare view's figures: what two (or more) compilations did, side by side.

Counts come from the recorded final graph, groups, kernels and memory plan; the run
time is the profile's (jl.explore.compare profiles each side when given inputs).
"""

from __future__ import annotations

import re
from typing import Any

from ..ir.dtypes import as_dtype
from ..report import CompileReport, GraphSnapshot, OpNode
from .scopes import is_counted

_TYPE = re.compile(r"^(\w+)\[(.*)\]$")
NO_LAUNCH = ("np.weight", "np.constant", "jit.group")


def type_bytes(text: str, bindings: dict[str, int]) -> int | None:
    """Bytes of a printed tensor type (`f32[B,4]`), or None when a dim is not known."""
    m = _TYPE.match(text.strip())
    if m is None:
        return None
    size = as_dtype(m.group(1)).itemsize
    for dim in filter(None, (d.strip() for d in m.group(2).split(","))):
        value = int(dim) if dim.isdigit() else bindings.get(dim)
        if value is None:
            return None
        size *= value
    return size


def launches(graph: GraphSnapshot) -> list[list[OpNode]]:
    """What runs as one dispatch: each group's ops together, each other op that does work alone."""
    groups: dict[int, list[OpNode]] = {}
    alone = []
    for n in graph.nodes:
        if n.group is not None:
            groups.setdefault(n.group, []).append(n)
        elif n.name not in NO_LAUNCH and not n.view:
            alone.append([n])
    return list(groups.values()) + alone


def bytes_moved(graph: GraphSnapshot, bindings: dict[str, int]) -> int | None:
    """Bytes each dispatch reads from outside it and writes (every result counted once), summed."""
    types = dict(zip(graph.inputs, graph.input_types))
    for n in graph.nodes:
        types.update(zip(n.results, n.types))
    total = 0
    for members in launches(graph):
        made = {r for n in members for r in n.results}
        read = {v for n in members for v in n.operands if v not in made}
        for name in read | made:
            size = type_bytes(types.get(name, ""), bindings)
            if size is None:
                return None
            total += size
    return total


def figures(report: CompileReport) -> dict[str, Any]:
    """One column of the Compare view."""
    graph = report.graph or GraphSnapshot(inputs=[], input_types=[], outputs=[], nodes=[])
    bindings = report.memory.bindings if report.memory else {}
    # ops as every view counts them (the header, the scopes): work, not bookkeeping, weights or group ops
    work = [n for n in graph.nodes if is_counted(n)]
    return {"level": report.level, "target": report.target, "ops": len(work), "groups": len(report.groups),
            "kernels": len(report.kernels), "launches": len(launches(graph)),
            "bytes_moved": bytes_moved(graph, bindings),
            "peak_bytes": report.memory.peak_bytes if report.memory else None,
            "compile_seconds": sum(report.seconds.values()) if report.seconds else None,
            "compile_cache": compile_cache(report),
            "run_seconds": profiled_seconds(report)}


def compile_cache(report: CompileReport) -> str:
    """Which cache served the compile ("executable": the passes' result and its kernels; "kernel": every
    kernel), "" when it compiled: a cache's seconds are a load, not a faster compiler."""
    if report.executable_cache is not None and report.executable_cache.hit:
        return "executable"
    return "kernel" if report.kernels and all(k.cache_hit for k in report.kernels) else ""


def profiled_seconds(report: CompileReport) -> float | None:
    """The median whole-call time `jl.profile` recorded, if it ran."""
    return ((report.profile or {}).get("total") or {}).get("median")


def scope_figures(scopes: dict[str, dict[str, Any]], depth: int = 2) -> dict[str, dict[str, Any]]:
    """Per source scope down to `depth`: ops, groups under it, bytes made, bytes at the peak, measured time."""
    groups: dict[str, int] = {}
    for path, node in scopes.items():
        if node["kind"] == "group":
            parts = path.split("/")[:-1]
            for k in range(min(len(parts), depth) + 1):
                key = "/".join(parts[:k])
                groups[key] = groups.get(key, 0) + 1
    return {path: {"op_count": node["op_count"], "groups": groups.get(path, 0), "bytes": node["bytes"],
                   "peak_bytes": node["peak_bytes"], "seconds": node["seconds"]}
            for path, node in scopes.items() if node["kind"] == "scope" and node["depth"] <= depth}


def _mates(report: CompileReport) -> dict[tuple, tuple[int, int | None, frozenset[tuple]]]:
    """Each op that computes (no bookkeeping), by a key two compilations of one program share (its name, types, scope,
    source line and attributes, then which occurrence of those it is: passes renumber the ops they make):
    its uid, its group (None: alone) and the keys of the ops it shares that group with."""
    graph = report.graph or GraphSnapshot(inputs=[], input_types=[], outputs=[], nodes=[])
    seen: dict[tuple, int] = {}
    keys: dict[int, tuple] = {}
    for n in graph.nodes:
        if n.name in NO_LAUNCH or n.view or n.name.startswith("mem."):
            continue
        base = (n.name, tuple(n.types), tuple(n.scope), n.loc, tuple(sorted(n.attrs.items())))
        seen[base] = seen.get(base, -1) + 1
        keys[n.uid] = base + (seen[base],)
    members: dict[int, set[tuple]] = {}
    for n in graph.nodes:
        if n.uid in keys and n.group is not None:
            members.setdefault(n.group, set()).add(keys[n.uid])
    mates = lambda n: frozenset(members[n.group]) if n.group is not None else frozenset({keys[n.uid]})  # noqa: E731
    return {keys[n.uid]: (n.uid, n.group, mates(n)) for n in graph.nodes if n.uid in keys}


def regrouped(a: CompileReport, b: CompileReport, depth: int = 2, listed: int = 40) -> dict[str, Any]:
    """Ops of `a` that `b` also has (matched as `_mates` keys them) and groups with other ops than `a`
    does, by source scope down to `depth`: `{"ops": {uid in a: [group in a, group in b]}, "scopes":
    {path: {"count", "uids" (the first `listed`)}}, "shared": ops matched}`."""
    left, right = _mates(a), _mates(b)
    scope_of = {n.uid: list(n.scope) for n in (a.graph.nodes if a.graph else [])}
    shared = left.keys() & right.keys()
    ops: dict[int, list[int | None]] = {}
    scopes: dict[str, dict[str, Any]] = {}
    for key in sorted(shared, key=lambda k: left[k][0]):
        uid, group, mates = left[key]
        if mates & shared == right[key][2] & shared:
            continue
        ops[uid] = [group, right[key][1]]
        scope = scope_of.get(uid, [])
        for k in range(min(len(scope), depth) + 1):
            entry = scopes.setdefault("/".join(scope[:k]), {"count": 0, "uids": []})
            entry["count"] += 1
            if len(entry["uids"]) < listed:
                entry["uids"].append(uid)
    return {"ops": {str(u): g for u, g in ops.items()}, "scopes": scopes, "shared": len(shared)}


def _align(a: list[str], b: list[str]) -> list[tuple[int | None, int | None]]:
    """Pass runs of two pipelines paired by name, in order (difflib on the names)."""
    import difflib

    pairs: list[tuple[int | None, int | None]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            pairs += [(i1 + k, j1 + k) for k in range(i2 - i1)]
            continue
        n = max(i2 - i1, j2 - j1)
        pairs += [(i1 + k if i1 + k < i2 else None, j1 + k if j1 + k < j2 else None) for k in range(n)]
    return pairs


def pass_pairs(a: CompileReport, b: CompileReport) -> dict[str, Any]:
    """Two pipelines pass by pass: each pass run of `a` beside `b`'s of the same name, with op counts and
    times, and the IR diff of the two programs after the first pair where they differ."""
    from .passview import ir_diff

    rows, first = [], None
    for i, j in _align([p.name for p in a.passes], [p.name for p in b.passes]):
        pa, pb = (a.passes[i] if i is not None else None), (b.passes[j] if j is not None else None)
        same = pa is not None and pb is not None and pa.after == pb.after
        row = {"a": i, "b": j, "name": (pa or pb).name, "same": same,
               "sides": [None if p is None else {"options": p.options, "seconds": p.seconds, "changed": p.changed,
                                                  "ops_after": sum(p.ops_after.values())} for p in (pa, pb)]}
        if first is None and pa is not None and pb is not None and not same:
            first = len(rows)
            row["diff"] = ir_diff(pa.after, pb.after)
        rows.append(row)
    return {"rows": rows, "first_difference": first}

"""Reads a CompileReport into the plain data the explorer views draw.

Nothing here decides anything about the program: it joins what the compiler recorded
(snapshots, passes, groups, schedule, memory, kernels) by op uid and names colours; the
browser lays the graph out. Every section may be missing; each view then says so.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..report import CompileReport, GraphSnapshot, OpNode
from . import layout, regions
from .memview import memory_data, schedule_data, streams_data
from .passview import passes_data
from .roofline import roofline_data
from .scopes import SEP, is_bookkeeping, onnx_node, scope_tree

# Fills chosen to stay distinct from each other and readable under dark text in both themes.
PALETTE = ["#8cb4e8", "#f2a86f", "#8fd18f", "#e88f8f", "#c3a5e0", "#d8b48c", "#f0a8d8", "#b8b8b8",
           "#d9d96a", "#7fd4d9", "#a7c7a0", "#e0c080"]

def group_colors(report: CompileReport, graph: GraphSnapshot | None) -> dict[int, str]:
    """One colour per group id, the same in every view."""
    found = {n.group for n in (graph.nodes if graph else []) if n.group is not None}
    ids = sorted({g.id for g in report.groups} | found)
    return {gid: PALETTE[i % len(PALETTE)] for i, gid in enumerate(ids)}


def producing_pass(report: CompileReport) -> dict[int, dict[str, str]]:
    """For each op uid: the pass (and rule, when one is recorded) that created it."""
    origin: dict[int, dict[str, str]] = {}
    for record in report.passes:
        for rw in record.rewrites:
            for uid in rw.created:
                origin[uid] = {"pass": record.name, "rule": rw.rule, "root": rw.root_name}
        if record.graph_before is None or record.graph_after is None:
            continue
        before = {n.uid for n in record.graph_before.nodes}
        for n in record.graph_after.nodes:
            if n.uid not in before:
                origin.setdefault(n.uid, {"pass": record.name})
    return origin


def op_entry(node: OpNode, origin: dict[str, str] | None, rejected: str | None) -> dict[str, Any]:
    """What a view shows about one op on hover and selection."""
    # A jit.group op stands for its group: the schedule and the memory plan name it, the graph draws the group.
    group = int(node.attrs["id"]) if node.name == "jit.group" else node.group
    return {"uid": node.uid, "name": node.name, "results": node.results, "types": node.types,
            "operands": node.operands, "attrs": node.attrs, "group": group, "loc": node.loc,
            "view": node.view, "origin": origin or {"pass": "trace"}, "rejected": rejected,
            "scope": list(node.scope), "path": SEP.join(node.scope), "bookkeeping": is_bookkeeping(node),
            "onnx": onnx_node(node), "seconds": None}


def ops_data(report: CompileReport, graph: GraphSnapshot) -> dict[str, dict[str, Any]]:
    """Every op of the final graph and of every pass snapshot, by uid (as a string: JSON keys)."""
    origin = producing_pass(report)
    rejected = {r.op: r.reason for r in report.rejected}
    snapshots = [graph] + [g for p in report.passes for g in (p.graph_before, p.graph_after) if g is not None]
    ops: dict[str, dict[str, Any]] = {}
    for snap in snapshots:
        for node in snap.nodes:
            ops.setdefault(str(node.uid), op_entry(node, origin.get(node.uid), rejected.get(node.uid)))
    return ops


def groups_data(report: CompileReport, graph: GraphSnapshot, colors: dict[int, str]) -> list[dict[str, Any]]:
    """Groups as recorded, or as found in the final graph when no GroupRecord was written, each with
    the kernel record that runs it and its measured time per call."""
    kernels, seconds = group_kernels(report), group_seconds(report.profile)
    extra = lambda gid: {"kernel": kernels.get(gid), "seconds": seconds.get(gid)}  # noqa: E731
    if report.groups:
        return [{"id": g.id, "ops": g.ops, "op_names": g.op_names, "backend": g.backend, "key": g.key,
                 "kind": g.kind, "color": colors.get(g.id, PALETTE[0]), **extra(g.id)} for g in report.groups]
    found: dict[int, list[OpNode]] = {}
    for n in graph.nodes:
        if n.group is not None and n.name != "jit.group":
            found.setdefault(n.group, []).append(n)
    return [{"id": gid, "ops": [n.uid for n in nodes], "op_names": [n.name for n in nodes], "backend": "",
             "key": "", "kind": "", "color": colors[gid], **extra(gid)} for gid, nodes in sorted(found.items())]


def group_kernels(report: CompileReport) -> dict[int, str]:
    """The key of the kernel record each group runs: its own, the one it reuses (a group of the same
    structure compiled it), or O2's program-wide source holding its lines."""
    out: dict[int, str] = {}
    for k in report.kernels:
        for gid in [k.group, *k.reused_by, *k.group_lines]:
            if gid is not None:
                out.setdefault(int(gid), k.key)
    return out


def group_seconds(profile: dict[str, Any]) -> dict[int, float]:
    """Median seconds per call of each profiled group: the steps that ran it, summed."""
    out: dict[int, float] = {}
    for step in (profile or {}).get("steps", []):
        if step.get("group") is not None:
            out[step["group"]] = out.get(step["group"], 0.0) + float(step["median"])
    return out


def call_time_data(profile: dict[str, Any]) -> dict[str, Any] | None:
    """The whole call's measured time, the sum of its steps' times and the rest (host work between
    steps; negative where timing each step cost more than it measured)."""
    total = (profile or {}).get("total") or {}
    steps = (profile or {}).get("steps") or []
    if "median" not in total:
        return None
    summed = sum(float(s["median"]) for s in steps) if steps else None
    return {"call_seconds": float(total["median"]), "steps_seconds": summed, "steps": len(steps),
            "gap_seconds": None if summed is None else float(total["median"]) - summed,
            "mode": profile.get("mode", "")}


def fusion_data(report: CompileReport) -> dict[str, Any]:
    """Fusion decisions (pairs) and rejected ops, as recorded."""
    return {"decisions": [{"producer": d.producer, "consumer": d.consumer, "fused": d.fused, "reason": d.reason}
                          for d in report.fusion],
            "rejected": [{"op": r.op, "name": r.name, "reason": r.reason} for r in report.rejected]}


def kernels_data(report: CompileReport) -> list[dict[str, Any]]:
    """Kernels with their source (the browser highlights it) and, when profiled, their per-call time and the
    groups it ran for."""
    per_call = kernel_times(report.profile)
    measured = (report.profile or {}).get("kernels", {})
    return [{"key": k.key, "backend": k.backend, "source": k.source,
             "compile_seconds": k.compile_seconds, "cache_hit": k.cache_hit, "miss_reason": k.miss_reason,
             "group": k.group, "choice": k.choice, "per_call_seconds": per_call.get(k.key),
             "reused_by": list(k.reused_by), "profile": measured.get(k.key),
             "group_lines": {str(g): [list(span) for span in spans] for g, spans in k.group_lines.items()},
             "timing": dataclasses.asdict(k.timing), "worker": k.worker,
             "shares_code_with": k.shares_code_with(report.kernels)}
            for k in report.kernels]


def compile_time_data(report: CompileReport) -> dict[str, Any] | None:
    """Where the compile went: the stages (disjoint parts of `total`, the rest as "other"), every
    pass, and the kernels' parts summed; None for a report without timing."""
    t = report.timing
    if t is None:
        return None
    stages = {"trace": t.trace, "setup": t.setup, "passes": t.passes, "kernels": t.kernels}
    stages["other"] = max(t.total - sum(stages.values()), 0.0)
    return {"total": t.total, "stages": stages, "shape_inference": t.shape_inference,
            "executable_cache": t.executable_cache,
            # on an executable cache hit the passes did not run: their seconds are the compile that stored them
            "passes_cached": report.executable_cache is not None and report.executable_cache.hit,
            "passes": [{"name": p.name, "seconds": p.seconds} for p in report.passes],
            # kernels loaded at once from the executable cache: one load's seconds split evenly, not measured each
            "kernels_loaded": report.stats.get("kernels_from_executable_cache", 0),
            "kernel_parts": dataclasses.asdict(t.kernel_parts)}


def step_seconds(profile: dict[str, Any]) -> dict[int, float]:
    """Median seconds per call of each profiled step, by op uid."""
    out: dict[int, float] = {}
    for step in (profile or {}).get("steps", []):
        if step.get("uid") is not None:
            out[step["uid"]] = out.get(step["uid"], 0.0) + float(step["median"])
    return out


def scopes_data(report: CompileReport, graph: GraphSnapshot, ops: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The scope tree, with each op's path and measured time written into its entry."""
    seconds = step_seconds(report.profile)
    tree, paths = scope_tree(graph, report.memory, seconds)
    for uid, path in paths.items():
        entry = ops.get(str(uid))
        if entry is not None:
            entry["path"], entry["seconds"] = path, seconds.get(uid)
    return tree


def kernel_times(profile: dict[str, Any]) -> dict[str, float]:
    """Mean seconds per call by kernel key from `profile["kernels"]` ({key: seconds} or {key: {calls, seconds}})."""
    out = {}
    for key, value in (profile or {}).get("kernels", {}).items():
        if isinstance(value, (int, float)):
            out[key] = float(value)
        elif isinstance(value, dict) and value.get("calls"):
            out[key] = float(value.get("seconds", 0.0)) / value["calls"]
        elif isinstance(value, dict) and "mean" in value:
            out[key] = float(value["mean"])
    return out


def build(report: CompileReport, title: str = "", dims: dict[str, list[int]] | None = None) -> dict[str, Any]:
    """The whole explorer's data for one compilation."""
    graph = report.graph or GraphSnapshot(inputs=[], input_types=[], outputs=[], nodes=[])
    colors = group_colors(report, graph)
    groups = groups_data(report, graph, colors)
    ops = ops_data(report, graph)
    scopes = scopes_data(report, graph, ops)        # writes each op's path, which the memory view names
    schedule = schedule_data(report)
    return {
        "title": title or f"@{report.program or 'program'}",
        "level": report.level, "target": report.target,
        "ops": ops, "groups": groups, "colors": {str(k): v for k, v in colors.items()},
        "graph": layout.graph_data(graph, {r.op: r.reason for r in report.rejected}),
        "passes": passes_data(report),
        "fusion": fusion_data(report),
        "schedule": schedule,
        "streams": streams_data(report),
        "memory": memory_data(report.memory, ops),
        "dry_run_dims": dims or {},
        "kernels": kernels_data(report),
        "scopes": scopes,
        "loops": regions.loops_data(report, step_seconds(report.profile)),
        "profile": report.profile or None,
        "roofline": roofline_data(report),
        "call_time": call_time_data(report.profile),
        "dry_run": None,
        "recompiles": [],
        "warnings": list(report.warnings),
        "seconds": dict(report.seconds),
        "executable_cache": None if report.executable_cache is None else dataclasses.asdict(report.executable_cache),
        "compile_time": compile_time_data(report),
    }

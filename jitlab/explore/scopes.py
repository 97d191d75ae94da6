"""The hierarchy the explorer opens collapsed: source scopes, then fusion groups, with op
counts, bytes, bytes at the memory peak and measured time per scope.

An op's path is its scope (Location.scope, recorded by tracing or the ONNX importer),
then its group as one more level; a group sits at the deepest scope holding all its ops.
Bookkeeping (mem.alloc, mem.free, mem.reuse and no-task views) is marked so views can
hide it; a mem op sits with the op it serves.
"""

from __future__ import annotations

import re
from typing import Any

from ..report import GraphSnapshot, MemoryPlan, OpNode

SEP = "/"
MEM_OPS = ("mem.alloc", "mem.free", "mem.reuse")
SHARED = ("np.constant", "np.weight")   # made once for every op that reads them: their scope is the first reader's
_ONNX_NODE = re.compile(r"^\S+ node ('.*'|#\d+)$")


def is_bookkeeping(node: OpNode) -> bool:
    return node.name in MEM_OPS or node.view


def is_counted(node: OpNode) -> bool:
    """Whether a scope's op count includes this op: work, not bookkeeping, the group op standing
    for its members, or weights and constants (folded into their readers in the drawing)."""
    return not (is_bookkeeping(node) or node.name == "jit.group" or node.name in SHARED)


def onnx_node(node: OpNode) -> str | None:
    """The ONNX node an op was imported from (the importer names it as its location's function)."""
    return node.function if _ONNX_NODE.match(node.function or "") else None


def _common(scopes: list[tuple[str, ...]]) -> tuple[str, ...]:
    if not scopes:
        return ()
    n = 0
    while all(len(s) > n and s[n] == scopes[0][n] for s in scopes):
        n += 1
    return scopes[0][:n]


def group_scopes(graph: GraphSnapshot) -> dict[int, tuple[str, ...]]:
    """Each group's place: the deepest scope holding all its ops that have a place (constants and
    weights aside); an op written at the traced function's top level (a source line, no scope)
    puts its group at the top."""
    members: dict[int, list[tuple[str, ...]]] = {}
    for n in graph.nodes:
        if n.group is not None and n.name != "jit.group":
            members.setdefault(n.group, [])
            if (n.scope or n.loc) and n.name not in SHARED:
                members[n.group].append(tuple(n.scope))
    return {gid: _common(scopes) for gid, scopes in members.items()}


def op_paths(graph: GraphSnapshot) -> dict[int, tuple[str, ...]]:
    """Each op's path: its scope, or its group's path; a mem op takes the path of the op it serves,
    and a weight or constant with no scope (an ONNX initializer) the path of its first reader."""
    places = group_scopes(graph)
    paths: dict[int, tuple[str, ...]] = {}
    for n in graph.nodes:
        gid = int(n.attrs["id"]) if n.name == "jit.group" and "id" in n.attrs else n.group
        if gid is not None:
            paths[n.uid] = places.get(gid, ()) + (f"group {gid}",)
        else:
            paths[n.uid] = tuple(n.scope)
    first_reader: dict[str, int] = {}
    for n in graph.nodes:
        for name in n.operands:
            first_reader.setdefault(name, n.uid)
    nodes = graph.nodes
    for k, n in enumerate(nodes):
        if n.name in SHARED and not n.scope and n.group is None and n.results[0] in first_reader:
            paths[n.uid] = paths[first_reader[n.results[0]]]      # an ONNX weight: where it is first read
        if n.name in MEM_OPS:
            step = 1 if n.name != "mem.free" else -1
            j = k + step
            while 0 <= j < len(nodes) and nodes[j].name in MEM_OPS:
                j += step
            if 0 <= j < len(nodes):
                paths[n.uid] = paths[nodes[j].uid]
    return paths


def _entry(path: tuple[str, ...], kind: str = "scope") -> dict[str, Any]:
    return {"name": path[-1] if path else "", "path": SEP.join(path),
            "parent": SEP.join(path[:-1]) if path else None, "depth": len(path), "kind": kind,
            "children": [], "ops": [], "op_count": 0, "bytes": 0, "peak_bytes": 0, "seconds": None,
            "loc": None, "group": None}


def scope_tree(graph: GraphSnapshot, plan: MemoryPlan | None = None,
               seconds: dict[int, float] | None = None) -> tuple[dict[str, dict[str, Any]], dict[int, str]]:
    """The hierarchy by path string, and each op's path string."""
    paths = op_paths(graph)
    tree: dict[str, dict[str, Any]] = {"": _entry(())}
    for n in graph.nodes:
        path = paths[n.uid]
        _ensure(tree, path)
        node = tree[SEP.join(path)]
        node["ops"].append(n.uid)
        if path and path[-1].startswith("group ") and (n.group is not None or n.name == "jit.group"):
            node["kind"], node["group"] = "group", int(path[-1].split()[1])
        counted = is_counted(n)
        for k in range(len(path) + 1):
            entry = tree[SEP.join(path[:k])]
            entry["op_count"] += counted
            if entry["loc"] is None and n.loc:
                entry["loc"] = n.loc
    _add_bytes(tree, paths, plan)
    _add_seconds(tree, paths, seconds or {})
    return tree, {uid: SEP.join(p) for uid, p in paths.items()}


def _ensure(tree: dict[str, dict[str, Any]], path: tuple[str, ...]) -> None:
    for k in range(1, len(path) + 1):
        key = SEP.join(path[:k])
        if key not in tree:
            tree[key] = _entry(path[:k])
            tree[SEP.join(path[:k - 1])]["children"].append(key)


def _up(tree, path: tuple[str, ...]):
    for k in range(len(path) + 1):
        yield tree[SEP.join(path[:k])]


def _add_bytes(tree, paths: dict[int, tuple[str, ...]], plan: MemoryPlan | None) -> None:
    """Bytes of the buffers each scope's ops make, and of those live at the plan's peak (`None` with no plan: O0)."""
    if plan is None:
        for entry in tree.values():
            entry["bytes"] = entry["peak_bytes"] = None
        return
    step = plan.peak_step()
    for b in plan.buffers:
        if b.alias_of is not None or b.producer not in paths:
            continue
        live = step is not None and b.first <= step <= b.last
        for entry in _up(tree, paths[b.producer]):
            entry["bytes"] += b.bytes
            entry["peak_bytes"] += b.bytes if live else 0


def _add_seconds(tree, paths: dict[int, tuple[str, ...]], seconds: dict[int, float]) -> None:
    for uid, s in seconds.items():
        if uid not in paths:
            continue
        for entry in _up(tree, paths[uid]):
            entry["seconds"] = (entry["seconds"] or 0.0) + s

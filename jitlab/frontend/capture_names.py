"""Which names a captured loop or branch carries: read and write events of a function's statements.

The analysis is on the function's source as written (before any conversion), and errs towards
carrying a name: a carried name that did not need to be costs a block argument, a name missed
would leave the value from before the loop in place (a wrong answer).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

LOOPS = (ast.For, ast.While)
_BLOCKS = ("body", "orelse", "finalbody")


def base_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def events(node: ast.AST) -> Iterator[tuple[str, str]]:
    """("load" | "store" | "update", name) in the order Python evaluates a statement. "update" is a write
    into the value a name holds (`a[i] = v`, `x += v`): it reads the name too. Functions and classes
    defined inside count as the name they bind; a name stored in one branch of an `if` only is "maybe"
    stored (its old value passes through the other branch if it has one)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield "store", node.name
    elif isinstance(node, ast.Name):
        yield ("load" if isinstance(node.ctx, ast.Load) else "store"), node.id
    elif isinstance(node, ast.Assign):
        yield from events(node.value)
        for target in node.targets:
            yield from events(target)
    elif isinstance(node, ast.AugAssign):
        yield from events(node.value)
        base = base_name(node.target)
        if base is not None:
            yield "update", base
    elif isinstance(node, (ast.Subscript, ast.Attribute)) and isinstance(node.ctx, ast.Store):
        base = base_name(node)
        if base is not None:
            yield "update", base
        for child in ast.iter_child_nodes(node):
            if child is not node.value:
                yield from events(child)
    elif isinstance(node, ast.If):
        yield from _if_events(node)
    elif isinstance(node, (ast.For, ast.comprehension)):
        for child in (node.iter, node.target, *getattr(node, "ifs", ()), *getattr(node, "body", ()),
                      *getattr(node, "orelse", ())):
            yield from events(child)
    elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
        for child in (*node.generators, *(getattr(node, k) for k in ("key", "value", "elt") if hasattr(node, k))):
            yield from events(child)
    elif not isinstance(node, ast.Lambda):
        for child in ast.iter_child_nodes(node):
            yield from events(child)


def _if_events(node: ast.If) -> Iterator[tuple[str, str]]:
    yield from events(node.test)
    branches = [flow(node.body), flow(node.orelse)]
    for loads, *_ in branches:
        for name in sorted(loads):
            yield "load", name
    (_, s1, u1, m1), (_, s2, u2, m2) = branches
    for name in sorted(s1 & s2):
        yield "store", name
    for name in sorted(u1 | u2):
        yield "update", name
    for name in sorted((s1 | s2 | m1 | m2) - (s1 & s2)):
        yield "maybe", name


def flow(stmts: list[ast.stmt]) -> tuple[set[str], set[str], set[str], set[str]]:
    """(names read before this code binds them, names it surely binds, names whose value on entry it
    writes into, names it may bind)."""
    loads: set[str] = set()
    sets: dict[str, set[str]] = {"store": set(), "update": set(), "maybe": set()}
    for kind, name in (e for stmt in stmts for e in events(stmt)):
        if kind in ("load", "update") and name not in sets["store"]:
            loads.add(name)
        if kind == "update" and name in sets["store"]:
            continue            # a write into an array this code made, not into the one it was given
        if kind != "load":
            sets[kind].add(name)
    return loads, sets["store"], sets["update"], sets["maybe"]


def all_loads(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def parents(func: ast.FunctionDef) -> dict[int, tuple[ast.AST, list[ast.stmt]]]:
    """For each statement of `func` (by id), the statement or function holding it and its block."""
    out: dict[int, tuple[ast.AST, list[ast.stmt]]] = {}
    stack: list[ast.AST] = [func]
    while stack:
        node = stack.pop()
        for name in _BLOCKS + ("handlers",):
            for child in getattr(node, name, None) or ():
                out[id(child)] = (node, getattr(node, name))
                if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    stack.append(child)
    return out


def live_after(stmt: ast.stmt, func: ast.FunctionDef, where: dict) -> set[str]:
    """The names that code run after `stmt` may read before writing them: the rest of its block, then
    of the blocks around it, and an enclosing loop's next iteration."""
    live: set[str] = set()
    dead: set[str] = set()
    node: ast.AST = stmt
    while node is not func and id(node) in where:
        parent, block = where[id(node)]
        rest = block[next(k for k, s in enumerate(block) if s is node) + 1:]
        loads, stores, *_ = flow(rest)
        live |= loads - dead
        dead |= stores
        if isinstance(parent, LOOPS):       # the next iteration: the condition, then the body from its top
            head = all_loads(parent.test) if isinstance(parent, ast.While) else set()
            live |= (head | flow(parent.body)[0]) - dead
        node = parent
    return live

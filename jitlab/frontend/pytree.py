"""Nested tuples, lists and dicts of leaves: flattened for tracing, rebuilt for results."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TreeDef:
    """The shape of a nested structure: kind ('leaf', 'none', 'tuple', 'list', 'dict'), keys, children."""

    kind: str
    keys: tuple = ()
    children: tuple[TreeDef, ...] = ()

    @property
    def num_leaves(self) -> int:
        return 1 if self.kind == "leaf" else sum(c.num_leaves for c in self.children)


LEAF = TreeDef("leaf")
NONE = TreeDef("none")


def flatten(tree: Any, prefix: str = "", is_leaf: Callable[[Any], bool] | None = None
            ) -> tuple[list[Any], list[str], TreeDef]:
    """Leaves in order, a path name for each (`params.w1`, `xs_0`), and the structure."""
    if is_leaf is not None and is_leaf(tree):
        return [tree], [prefix], LEAF
    if tree is None:                   # no leaves: a function that only writes into its arguments returns it
        return [], [], NONE
    if isinstance(tree, (tuple, list)):
        items = [(f"{prefix}_{i}" if prefix else f"out{i}", v) for i, v in enumerate(tree)]
        keys: tuple = ()
        kind = "tuple" if isinstance(tree, tuple) else "list"
    elif isinstance(tree, dict):
        keys = tuple(tree)
        items = [(f"{prefix}.{k}" if prefix else str(k), tree[k]) for k in keys]
        kind = "dict"
    else:
        return [tree], [prefix], LEAF
    leaves, names, children = [], [], []
    for name, value in items:
        sub_leaves, sub_names, sub_def = flatten(value, name, is_leaf)
        leaves += sub_leaves
        names += sub_names
        children.append(sub_def)
    return leaves, names, TreeDef(kind, keys, tuple(children))


def unflatten(treedef: TreeDef, leaves: list[Any]) -> Any:
    return _build(treedef, iter(leaves))


def _build(treedef: TreeDef, it) -> Any:
    if treedef.kind == "leaf":
        return next(it)
    if treedef.kind == "none":
        return None
    values = [_build(c, it) for c in treedef.children]
    if treedef.kind == "tuple":
        return tuple(values)
    if treedef.kind == "list":
        return values
    return dict(zip(treedef.keys, values))

"""A traced function's arguments as its Executable takes them: `exe(params, x)` with the same
nested lists, tuples and dicts the function was traced with, flattened into the program's inputs
as `jl.jit` flattens them, and every mistake named by the argument's path (`params[2]['w']`)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InputError
from .pytree import TreeDef

_KINDS = {"leaf": "an array", "none": "None", "tuple": "a tuple", "list": "a list", "dict": "a dict"}


def leaf_paths(tree: TreeDef, prefix: str = "") -> list[str]:
    """Each leaf's path as Python spells it: `params[2]['w']`; the top level is a dict of parameters."""
    if tree.kind == "leaf":
        return [prefix]
    if tree.kind == "dict":
        subs = [f"{prefix}[{k!r}]" if prefix else str(k) for k in tree.keys]
    else:
        subs = [f"{prefix}[{i}]" for i in range(len(tree.children))]
    return [p for child, sub in zip(tree.children, subs) for p in leaf_paths(child, sub)]


def difference(expected: TreeDef, got: TreeDef, path: str = "") -> str | None:
    """Where and how the structure `got` differs from `expected`; None where they are the same."""
    if expected == got:
        return None
    if expected.kind != got.kind:
        return f"{path} is {_KINDS[got.kind]} where the function was traced with {_KINDS[expected.kind]}"
    if expected.keys != got.keys:
        return f"{path} has keys {list(got.keys)} where the function was traced with {list(expected.keys)}"
    if len(expected.children) != len(got.children):
        return (f"{path} has {_items(len(got.children))} where the function was traced with "
                f"{_items(len(expected.children))}")
    subs = leaf_paths(TreeDef(expected.kind, expected.keys, (TreeDef("leaf"),) * len(expected.children)), path)
    return next(filter(None, (difference(e, g, s) for e, g, s in zip(expected.children, got.children, subs))), None)


def _items(n: int) -> str:
    return f"{n} item" + ("" if n == 1 else "s")


@dataclass
class CallArguments:
    """How a call with the traced function's own arguments gives its program's inputs."""

    name: str
    signature: inspect.Signature
    in_tree: TreeDef
    mask: list[bool]              # which leaves are program inputs
    statics: list                 # the other leaves as traced (what a call must give again)
    # the bound arguments' leaves, their names, structure and input mask (frontend/jit.py)
    flatten: Callable[[inspect.BoundArguments], tuple[list, list, TreeDef, list[bool]]]
    key: Callable[[Any], Any]     # what a static leaf is compared by

    def __post_init__(self) -> None:
        self.paths = leaf_paths(self.in_tree)
        self.input_paths = [p for p, m in zip(self.paths, self.mask) if m]

    def takes_flat(self, args: Sequence, keywords: int = 0) -> bool:
        """Whether a call gives the program's inputs one by one as arrays, positionally or by input
        name (`keywords` of them: the call every Executable takes), rather than the function's own
        arguments."""
        return len(args) + keywords == len(self.input_paths) and not any(
            isinstance(a, (list, tuple, dict)) or a is None for a in args)

    def inputs(self, args: Sequence, kwargs: dict) -> list:
        """The program's inputs from the function's arguments; an InputError naming the argument
        whose structure or static value differs from the traced one."""
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise InputError(f"@{self.name} takes {self.signature} (or its {len(self.input_paths)} inputs "
                             f"one by one): {e}") from None
        leaves, _, tree, mask = self.flatten(bound)
        why = difference(self.in_tree, tree)
        if why is not None:
            raise InputError(f"@{self.name}: argument {why}")
        statics = iter(self.statics)
        for leaf, path, is_input, was in zip(leaves, self.paths, mask, self.mask):
            if is_input != was:
                raise InputError(f"@{self.name}: argument {path} is {'an array' if is_input else repr(leaf)} "
                                 f"where the function was traced with {'an array' if was else 'a static value'}")
            if not is_input and self.key(leaf) != self.key(next(statics)):
                raise InputError(f"@{self.name}: argument {path} is {leaf!r}, not the value it was traced with "
                                 "(static values are compiled in: trace again, or let jl.jit do it)")
        return [leaf for leaf, m in zip(leaves, mask) if m]

"""Forward and backward ops of a training program, and the activations between them.

The autodiff transform gives every backward op a `BackwardLocation` (the forward op's
location, marked); rewrites copy their anchor's location, so the mark survives
canonicalization, decomposition and fusion. A buffer is an *activation* when a forward
step produces it and a backward step reads it: it must live from the forward pass to
the backward pass, which is what the memory view shows and `recompute` trades away.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.core import Location, Operation


@dataclass(frozen=True)
class BackwardLocation(Location):
    """The location of a backward op: the line of the forward op it differentiates."""

    def __str__(self) -> str:
        return f"backward of {super().__str__()}"


def backward_location(loc: Location | None) -> BackwardLocation:
    """`loc` marked as the source of backward ops."""
    return BackwardLocation(loc.file, loc.line, loc.function, loc.scope) if loc is not None else BackwardLocation("", 0)


def is_backward(op: Operation) -> bool:
    """Whether op (or, for a group, any op inside it) belongs to the backward pass."""
    if isinstance(op.loc, BackwardLocation):
        return True
    return any(is_backward(inner) for region in op.regions for block in region.blocks for inner in block.ops)


def is_forward(op: Operation) -> bool:
    """Whether op (or, for a group, any op inside it) computes part of the forward pass."""
    if op.regions:
        return any(is_forward(inner) for region in op.regions for block in region.blocks for inner in block.ops
                   if inner.name != "jit.yield")
    return not isinstance(op.loc, BackwardLocation)


def activation_roots(graph) -> set[int]:
    """Buffer roots of a StepGraph produced by a forward step and read by a backward one."""
    forward = [is_forward(op) for op in graph.ops]
    backward = [is_backward(op) for op in graph.ops]
    if not any(backward):
        return set()
    return {r for r, kind in graph.root_kind.items()
            if kind in ("temp", "output") and graph.producer[r] >= 0 and forward[graph.producer[r]]
            and any(backward[u] for u in graph.root_users[r])}

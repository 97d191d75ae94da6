"""Where backward ops go, and the numpy building blocks VJP rules share.

A `BackwardContext` is a trace context over an existing program whose builder sits
where the backward graph belongs (before the return, or at the end of a trace); the
ops it emits carry the location of the forward op being differentiated, so the
explorer can tie each backward op to the line that caused it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import UnsupportedOp
from ..frontend.tracer import TraceContext, Tracer
from ..ir.builder import Builder
from ..ir.core import Location, Operation
from ..ir.program import Program
from ..ir.shapes import Dim
from ..passes.activations import backward_location


class BackwardContext(TraceContext):
    """Emits backward ops where `builder` stands, located at the forward op being differentiated. With
    `recompute_loops`, a loop's VJP keeps no carried value per iteration and recomputes them instead."""

    def __init__(self, program: Program, builder: Builder, function_name: str, recompute_loops: bool = False):
        super().__init__(program, function_name)
        # the trace's own builder, moved there: it captures, so a loop's VJP can trace its reverse body
        self.builder.block, self.builder.before = builder.block, builder.before
        self.forward_op: Operation | None = None
        self.recompute_loops = recompute_loops

    def location(self) -> Location | None:
        # Marked, so the memory plan can tell forward activations from backward temporaries.
        return backward_location(self.forward_op.loc if self.forward_op is not None else None)

    def where(self) -> str:
        op = self.forward_op
        if op is None:
            return f"in the gradient of {self.function_name}"
        return f"in the gradient of {op.name}" + (f" from {op.loc}" if op.loc is not None else "")


def zeros(ctx: TraceContext, shape: Sequence[Dim], dtype) -> Tracer:
    return np.broadcast_to(ctx.constant(0, dtype), tuple(shape))


def sum_to(g: Tracer, shape: Sequence[Dim]) -> Tracer:
    """Sums a broadcast gradient back to `shape`: over leading dims and dims that were 1."""
    lead = g.ndim - len(shape)
    ones = tuple(lead + i for i, d in enumerate(shape) if d == 1 and g.shape[lead + i] != 1)
    if ones:
        g = np.sum(g, axis=tuple(range(lead)) + ones, keepdims=True)
    elif lead:
        g = np.sum(g, axis=tuple(range(lead)))
    return np.reshape(g, tuple(shape))


def expand_reduced(g: Tracer, shape: Sequence[Dim], axes: Sequence[int], keepdims: bool) -> Tracer:
    """A reduction's result (or its cotangent) broadcast back over the reduced axes."""
    if not keepdims and axes:
        g = np.expand_dims(g, tuple(axes))
    return np.broadcast_to(g, tuple(shape))


def static(d: Dim, what: str) -> int:
    """`d` as an int, or UnsupportedOp where a gradient rule needs it known at compile time."""
    if not isinstance(d, int):
        raise UnsupportedOp(f"the gradient needs {what} to be static, got {d}")
    return d


def take_range(g: Tracer, axis: int, start: Dim, stop: Dim) -> Tracer:
    """g[..., start:stop, ...] along one axis."""
    starts, stops = [0] * g.ndim, list(g.shape)
    starts[axis], stops[axis] = start, stop
    if (starts, stops) == ([0] * g.ndim, list(g.shape)):
        return g
    return g.ctx.op("np.slice", g.value, starts=tuple(starts), stops=tuple(stops), steps=(1,) * g.ndim)


def pad_axis(g: Tracer, axis: int, before: Dim, after: Dim) -> Tracer:
    """out[j] = g[j - before] along one axis, zero outside g: pads, or crops where negative."""
    before, after = static(before, "the padding"), static(after, "the padding")
    if before < 0 or after < 0:
        n = static(g.shape[axis], "the cropped dim")
        total = n + before + after
        lo, hi = max(0, -before), min(n, total - before)
        if hi <= lo:
            return zeros(g.ctx, g.shape[:axis] + (total,) + g.shape[axis + 1:], g.dtype)
        g = take_range(g, axis, lo, hi)
        before = max(0, before)
        after = total - before - (hi - lo)
    if before == 0 and after == 0:
        return g
    widths = [(0, 0)] * g.ndim
    widths[axis] = (before, after)
    return np.pad(g, widths)


def dilate(g: Tracer, axis: int, step: int) -> Tracer:
    """Inserts step-1 zeros between neighbours along `axis` (length n becomes (n-1)*step+1)."""
    if step == 1:
        return g
    n = static(g.shape[axis], "the dilated dim")
    if n == 0:
        return g
    spread = pad_axis(np.expand_dims(g, axis + 1), axis + 1, 0, step - 1)
    flat = np.reshape(spread, g.shape[:axis] + (n * step,) + g.shape[axis + 1:])
    return pad_axis(flat, axis, 0, -(step - 1))


def place(g: Tracer, axis: int, start: Dim, step: int, size: Dim) -> Tracer:
    """Zeros of length `size` along `axis` with g's entries at start, start+step, ..."""
    n = g.shape[axis]
    if n == 0:
        return zeros(g.ctx, g.shape[:axis] + (size,) + g.shape[axis + 1:], g.dtype)
    spread = dilate(g, axis, step)
    return pad_axis(spread, axis, start, size - start - spread.shape[axis])


def flip(g: Tracer, axes: Sequence[int]) -> Tracer:
    return np.flip(g, tuple(axes)) if axes else g


def scalar_constant(t: Tracer) -> float | None:
    """The value of `t` when it is a one-element np.constant, else None."""
    op = getattr(t.value, "op", None)
    if op is None or op.name != "np.constant" or op.attrs["value"].array.size != 1:
        return None
    return float(op.attrs["value"].array.reshape(-1)[0])

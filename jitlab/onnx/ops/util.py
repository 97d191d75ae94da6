"""Small helpers the handlers share: axes, broadcasting shapes, selecting, slicing one axis."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...errors import ShapeError
from ...ir.opdef import InferCtx
from ..graph import T
from ..node import Node


def norm_axis(n: Node, axis: int, rank: int, what: str = "axis") -> int:
    """`axis` in [0, rank), counting negative ones from the end; an error naming the node otherwise."""
    if not -rank <= axis < rank:
        raise n.error(ShapeError, f"{what} {axis} is out of range for rank {rank}")
    return axis % rank


def norm_axes(n: Node, axes: Sequence[int], rank: int, what: str = "axes") -> tuple[int, ...]:
    """Axes made non-negative and sorted; repeats are an error."""
    out = [norm_axis(n, a, rank, what) for a in axes]
    if len(set(out)) != len(out):
        raise n.error(ShapeError, f"{what} {list(axes)} repeat an axis")
    return tuple(sorted(out))


def positive_attr(n: Node, name: str, default=None) -> int:
    """An int attribute that must be >= 1 (a block size, a window size, a norm's p)."""
    value = n.attr(name) if default is None else n.attr(name, default)
    if not isinstance(value, int) or value < 1:
        raise n.error(ShapeError, f"attribute '{name}' = {value!r} must be an int >= 1")
    return value


def need_rank(n: Node, x: T, rank: int, what: str = "input 0") -> None:
    """An error naming the node unless x has this rank."""
    if x.rank != rank:
        raise n.error(ShapeError, f"{what} must have rank {rank}, got {x.type}")


def where(cond: T, a: T, b: T) -> T:
    """a where cond, else b."""
    return cond.g.op("np.where", cond, a, b)


def maximum(a: T, b) -> T:
    """Elementwise max with a tensor or a scalar of a's dtype."""
    return a.g.op("np.maximum", a, a._lift(b))


def minimum(a: T, b) -> T:
    """Elementwise min with a tensor or a scalar of a's dtype."""
    return a.g.op("np.minimum", a, a._lift(b))


def unary(name: str, x: T) -> T:
    """The np op `name` applied to x."""
    return x.g.op(f"np.{name}", x)


def broadcast_shapes(n: Node, *shapes) -> tuple:
    """numpy broadcasting of shapes (symbolic dims must agree exactly)."""
    return InferCtx(n.op_type, n.g.program.constraints).broadcast(*shapes)


def static_dim(n: Node, d, what: str) -> int:
    """d as an int; a symbolic dim is refused as unsupported where a handler needs it static."""
    if not isinstance(d, (int, np.integer)):
        raise n.unsupported(f"{what} is the symbolic dim {d}; it must be static here")
    return int(d)


UNROLL_LIMIT = 4096     # recurrences are unrolled one step per op group: longer ones are refused


def unroll_steps(n: Node, d, what: str = "the sequence length") -> int:
    """A static number of steps to unroll, refused past UNROLL_LIMIT."""
    steps = static_dim(n, d, what)
    if steps > UNROLL_LIMIT:
        raise n.unsupported(f"{what} is {steps}; jitlab unrolls the recurrence step by step, "
                            f"up to {UNROLL_LIMIT} steps")
    return steps


def slice_axis(x: T, axis: int, start: int, stop: int, step: int = 1) -> T:
    """x[..., start:stop:step, ...] along one axis (absolute, non-negative bounds)."""
    starts = tuple(start if i == axis else 0 for i in range(x.rank))
    stops = tuple(stop if i == axis else d for i, d in enumerate(x.shape))
    steps = tuple(step if i == axis else 1 for i in range(x.rank))
    return x.g.op("np.slice", x, starts=starts, stops=stops, steps=steps)


def repeat_axis(x: T, axis: int, times: int) -> T:
    """np.repeat(x, times, axis): each entry along `axis` repeated `times` times in place."""
    if times == 1:
        return x
    grown = x.g.op("np.expand_dims", x, axes=(axis + 1,))
    shape = grown.shape[:axis + 1] + (times,) + grown.shape[axis + 2:]
    spread = x.g.op("np.broadcast_to", grown, shape=shape)
    return spread.reshape(x.shape[:axis] + (x.shape[axis] * times,) + x.shape[axis + 1:])

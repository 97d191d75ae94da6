"""VJP rules of shape ops: each moves the cotangent back to where its elements came from
(views reshape it back, slices scatter it into zeros, pads and tiles sum it up)."""

from __future__ import annotations

import numpy as np

from ...frontend.tracer import Tracer
from ..emit import flip, place, sum_to, take_range, zeros
from ..registry import Primal, vjp


@vjp("np.reshape", "np.expand_dims", "np.squeeze")
def _view(p: Primal, g):
    return [np.reshape(g, p.args[0].shape)]


@vjp("np.transpose")
def _transpose(p: Primal, g):
    return [np.transpose(g, tuple(int(i) for i in np.argsort(p.attrs["perm"])))]


@vjp("np.broadcast_to")
def _broadcast_to(p: Primal, g):
    return [sum_to(g, p.args[0].shape)]


@vjp("np.concatenate")
def _concatenate(p: Primal, g):
    axis = p.attrs["axis"]
    return p.ctx.emit("np.split", [g.value], axis=axis, sizes=tuple(x.shape[axis] for x in p.args))


@vjp("np.split")
def _split(p: Primal, gs):
    gs = gs if isinstance(gs, list) else [gs]
    parts = [g if g is not None else zeros(p.ctx, out.shape, out.dtype) for g, out in zip(gs, p.outs)]
    return [np.concatenate(parts, axis=p.attrs["axis"]) if len(parts) > 1 else parts[0]]


@vjp("np.stack")
def _stack(p: Primal, g):
    parts = p.ctx.emit("np.split", [g.value], axis=p.attrs["axis"], sizes=(1,) * len(p.args))
    return [np.reshape(part, x.shape) for part, x in zip(parts, p.args)]


@vjp("np.slice")
def _slice(p: Primal, g):
    x = p.args[0]
    for axis, (start, step) in enumerate(zip(p.attrs["starts"], p.attrs["steps"])):
        if step < 0:
            # Reversed, the picked elements run upward from the last one picked.
            start, step = start + (g.shape[axis] - 1) * step, -step
            g = flip(g, [axis])
        g = place(g, axis, start, step, x.shape[axis])
    return [g]


@vjp("np.take")
def _take(p: Primal, g):
    x, indices = p.args
    return [p.emit("np.scatter_add", zeros(p.ctx, x.shape, x.dtype), indices, g, axis=p.attrs["axis"]), None]


@vjp("np.pad")
def _pad(p: Primal, g):
    x, pads = p.args[0], p.attrs["pads"]
    for axis in range(x.ndim):
        g = _unpad(g, axis, pads[2 * axis], pads[2 * axis + 1], x.shape[axis], p.attrs["mode"])
    return [g]


def _unpad(g: Tracer, axis: int, before: int, after: int, n, mode: str) -> Tracer:
    """The cotangent of one padded axis: its core, plus what the padding copied from x."""
    core = take_range(g, axis, before, before + n)
    if mode == "constant":
        return core
    lo, hi = take_range(g, axis, 0, before), take_range(g, axis, before + n, before + n + after)
    if mode == "edge":
        # Every padded element repeats the first (or last) one.
        parts = [(np.sum(lo, axis=axis, keepdims=True), 0, before),
                 (np.sum(hi, axis=axis, keepdims=True), n - 1, after)]
    else:
        # Reflected elements mirror x[1:before+1] and x[n-1-after:n-1].
        parts = [(flip(lo, [axis]), 1, before), (flip(hi, [axis]), n - 1 - after, after)]
    for part, start, width in parts:
        if width:
            core = core + place(part, axis, start, 1, n)
    return core


@vjp("np.tile")
def _tile(p: Primal, g):
    x, reps = p.args[0], p.attrs["reps"]
    if x.ndim == 0:
        return [g]
    folded = np.reshape(g, tuple(d for r, n in zip(reps, x.shape) for d in (r, n)))
    return [np.reshape(np.sum(folded, axis=tuple(range(0, 2 * x.ndim, 2))), x.shape)]


@vjp("np.scatter_add")
def _scatter_add(p: Primal, g):
    return [g, None, np.take(g, p.args[1], axis=p.attrs["axis"])]

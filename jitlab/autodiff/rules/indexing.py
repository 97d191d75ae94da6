"""VJP rules of the gather, scatter and sorting ops: a gather's cotangent is scattered back
(added) where the elements came from; a scatter's is split between the elements kept
and the updates that landed."""

from __future__ import annotations

import numpy as np

from ...errors import UnsupportedOp
from ..emit import zeros
from ..registry import Primal, no_gradient, unsupported_gradient, vjp

no_gradient("reinterprets the bits of its operand, not a differentiable function of its value", "np.bitcast")
no_gradient("has no operands: it states shape values", "np.dims")
unsupported_gradient("its exact gradient is a reverse linear recurrence jitlab has no op for "
                     "(dividing by the operand fails where it is zero)", "np.cumprod")
unsupported_gradient("the adjoint DFT (with its cut, padding and one-sided forms) is not written yet",
                     "np.fft")


@vjp("np.take_along_axis")
def _take_along_axis(p: Primal, g):
    x, idx = p.args
    return [p.emit("np.scatter_elements", zeros(p.ctx, x.shape, x.dtype), idx, g, axis=p.attrs["axis"],
                   reduction="add"), None]


@vjp("np.gather_nd")
def _gather_nd(p: Primal, g):
    x, idx = p.args
    if p.attrs["batch_dims"]:
        raise UnsupportedOp(f"the gradient of np.gather_nd with batch_dims={p.attrs['batch_dims']} is not "
                            f"supported (from {p.op.loc})")
    return [p.emit("np.scatter_nd", zeros(p.ctx, x.shape, x.dtype), idx, g, reduction="add"), None]


@vjp("np.topk")
def _topk(p: Primal, gs):
    g_values = gs[0] if isinstance(gs, list) else gs
    if g_values is None:
        return [None]
    x = p.args[0]
    indices = p.outs[1]
    return [p.emit("np.scatter_elements", zeros(p.ctx, x.shape, x.dtype), indices, g_values,
                   axis=p.attrs["axis"], reduction="add")]


def _scatter_rule(gather: str, p: Primal, g, **where):
    """The cotangents of a scatter (`gather` reads updates' positions back out of a tensor)."""
    x, idx, updates = p.args
    reduction = p.attrs["reduction"]
    if reduction == "add":
        return [g, None, p.emit(gather, g, idx, **where)]
    if reduction != "none":
        raise UnsupportedOp(f"the gradient of {p.op.name} with reduction={reduction!r} is not supported "
                            f"(from {p.op.loc})")
    # Where an update landed, x's element is gone; of several updates to one place the last wins,
    # so only that one gets the cotangent: scattering each update's own number and reading it back
    # tells the winners.
    scatter = p.op.name
    attrs = {"axis": where["axis"]} if "axis" in where else {}
    landed = p.emit(scatter, np.ones_like(x), idx, np.zeros_like(updates), reduction="none", **attrs)
    ids = p.ctx.lift(np.arange(int(np.prod(updates.shape)), dtype=x.dtype).reshape(updates.shape))
    marks = p.emit(scatter, np.full_like(x, -1), idx, ids, reduction="none", **attrs)
    won = p.emit(gather, marks, idx, **where) == ids
    return [g * landed, None, np.where(won, p.emit(gather, g, idx, **where), 0)]


@vjp("np.scatter_elements")
def _scatter_elements(p: Primal, g):
    return _scatter_rule("np.take_along_axis", p, g, axis=p.attrs["axis"])


@vjp("np.scatter_nd")
def _scatter_nd(p: Primal, g):
    return _scatter_rule("np.gather_nd", p, g)


@vjp("np.update_slice")
def _update_slice(p: Primal, g):
    """The operand's elements under the slice were overwritten: their cotangent is zero; the update's
    is the cotangent read at the slice."""
    x, update = p.args
    where = dict(starts=p.attrs["starts"], stops=p.attrs["stops"], steps=p.attrs["steps"])
    return [p.emit("np.update_slice", g, zeros(p.ctx, update.shape, update.dtype), **where),
            p.emit("np.slice", g, **where)]


def _dynamic_where(p: Primal) -> dict:
    return {k: p.attrs[k] for k in ("axes", "sizes", "index_axes")}


@vjp("np.dynamic_slice")
def _dynamic_slice(p: Primal, g):
    """The block's cotangent goes back where the block was read from; the offsets get none."""
    x, *starts = p.args
    return [p.emit("np.dynamic_update_slice", zeros(p.ctx, x.shape, x.dtype), g, *starts, **_dynamic_where(p)),
            *([None] * len(starts))]


@vjp("np.dynamic_update_slice")
def _dynamic_update_slice(p: Primal, g):
    """As np.update_slice's, at offsets known when the op runs."""
    x, update, *starts = p.args
    where = _dynamic_where(p)
    return [p.emit("np.dynamic_update_slice", g, zeros(p.ctx, update.shape, update.dtype), *starts, **where),
            p.emit("np.dynamic_slice", g, *starts, **where), *([None] * len(starts))]

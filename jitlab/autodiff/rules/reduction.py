"""VJP rules of reductions. max/min split the gradient evenly among the elements that tie
for the extreme (as JAX's reduce_max does); prod stays exact when the input has zeros."""

from __future__ import annotations

import numpy as np

from ...ir.shapes import num_elements
from ..emit import expand_reduced
from ..registry import Primal, no_gradient, vjp


def _spread(p: Primal, g):
    """The cotangent broadcast back over the reduced axes."""
    return expand_reduced(g, p.args[0].shape, p.attrs["axes"], p.attrs["keepdims"])


@vjp("np.sum")
def _sum(p: Primal, g):
    return [_spread(p, g)]


@vjp("np.mean")
def _mean(p: Primal, g):
    x, axes = p.args[0], p.attrs["axes"]
    count = num_elements(tuple(x.shape[a] for a in axes))
    if isinstance(count, int):
        return [_spread(p, g / count)]
    # A symbolic count is known only at run time: sum ones to get it.
    count = np.sum(np.broadcast_to(p.ctx.constant(1, x.dtype), x.shape), axis=axes, keepdims=True)
    return [_spread(p, g) / count]


@vjp("np.prod")
def _prod(p: Primal, g):
    x, axes = p.args[0], p.attrs["axes"]
    zero = x == 0
    safe = np.where(zero, 1, x)
    others = np.prod(safe, axis=axes, keepdims=True)
    zeros = np.sum(zero.astype(x.dtype), axis=axes, keepdims=True)
    # No zero: prod / x. One zero: the product of the others at the zero, 0 elsewhere. More: 0.
    d = np.where(zeros == 0, others / safe, np.where((zeros == 1) & zero, others, 0))
    return [_spread(p, g) * d]


@vjp("np.max", "np.min")
def _extreme(p: Primal, g):
    x, axes = p.args[0], p.attrs["axes"]
    hit = x == expand_reduced(p.out, x.shape, axes, p.attrs["keepdims"])
    ties = np.sum(hit.astype(x.dtype), axis=axes, keepdims=True)
    return [np.where(hit, _spread(p, g) / ties, 0)]


@vjp("np.cumsum")
def _cumsum(p: Primal, g):
    a = p.attrs
    return [p.emit("np.cumsum", g, axis=a["axis"], exclusive=a["exclusive"], reverse=not a["reverse"])]


no_gradient("the result is an index or a bool", "np.argmax", "np.argmin", "np.any", "np.all")

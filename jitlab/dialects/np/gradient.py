"""Ops that gradients need and numpy has no single function for: `np.scatter_add`
(the transpose of `np.take`) and `np.max_pool2d_grad` (routes each window's gradient to
the first element that won the max, as select-and-scatter does)."""

from __future__ import annotations

import numpy as np

from ...errors import InputError
from ...ir.attributes import INT
from ...ir.opdef import Trait, defop, get_opdef
from . import nn  # noqa: F401  (np.max_pool2d, whose attributes and shape rule this op shares)
from .common import FLOAT, attr, check_dtype, normalize_axis, same_dtype
from .common import INT as INT_KINDS


def _scatter_add_infer(ctx, types, attrs):
    t, idx, updates = types
    same_dtype(ctx, [t, updates])
    check_dtype(ctx, t, FLOAT, "the operand")
    check_dtype(ctx, idx, INT_KINDS, "the indices")
    axis = normalize_axis(ctx, attrs["axis"], t.rank)
    if axis != attrs["axis"]:
        raise ctx.error(f"axis must be stored non-negative, got {attrs['axis']}")
    want = t.shape[:axis] + idx.shape + t.shape[axis + 1:]
    what = f"updates {updates} must have shape [{','.join(map(str, want))}] (x's, with the indices' dims at axis)"
    if len(updates.shape) != len(want):
        raise ctx.error(what)
    for a, b in zip(updates.shape, want):
        ctx.equal(a, b, what)
    return [t]


def _scatter_add(x, indices, updates, axis):
    n = x.shape[axis]
    if indices.size and (indices.min() < -n or indices.max() >= n):
        raise InputError(f"np.scatter_add: an index is out of range for axis {axis} of size {n}")
    out = np.array(x, copy=True)
    moved = np.moveaxis(out, axis, 0)
    k = indices.ndim
    np.add.at(moved, np.where(indices < 0, indices + n, indices),
              np.moveaxis(updates, list(range(axis, axis + k)), list(range(k))))
    return out


defop("np.scatter_add", operands=3, attrs={"axis": attr(INT)}, traits=(Trait.PURE,),
      infer=_scatter_add_infer, reference=_scatter_add, operand_names=("x", "indices", "updates"),
      doc="x with updates added at `indices` along axis (repeated indices add up); undoes np.take.")


def _max_pool_grad_infer(ctx, types, attrs):
    x, g = types
    same_dtype(ctx, types)
    check_dtype(ctx, x, FLOAT, "the operands")
    (pooled,) = get_opdef("np.max_pool2d").infer(ctx, [x], attrs)
    if g.rank != 4:
        raise ctx.error(f"the gradient must be N,C,OH,OW like the pooled output {pooled}, got {g}")
    for i, (a, b) in enumerate(zip(g.shape, pooled.shape)):
        ctx.equal(a, b, f"dim {i} of the gradient {g} against the pooled output {pooled}")
    return [x]


def _max_pool_grad(x, g, kernel, strides, pads, dilations, ceil_mode):
    oh, ow = g.shape[2:]
    span = [(o - 1) * s + d * (k - 1) + 1 for o, s, d, k in zip((oh, ow), strides, dilations, kernel)]
    extra = [max(0, sp - (n + pads[i] + pads[i + 2])) for i, (sp, n) in enumerate(zip(span, x.shape[2:]))]
    # Padding never wins the max, as in np.max_pool2d.
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2] + extra[0]), (pads[1], pads[3] + extra[1])),
                constant_values=-np.inf)
    taps = [(i * dilations[0], j * dilations[1]) for i in range(kernel[0]) for j in range(kernel[1])]
    windows = [(slice(y, y + (oh - 1) * strides[0] + 1, strides[0]),
                slice(c, c + (ow - 1) * strides[1] + 1, strides[1])) for y, c in taps]
    out = np.zeros(xp.shape, x.dtype)
    if oh and ow and x.shape[0] and x.shape[1]:
        winner = np.argmax(np.stack([xp[:, :, h, w] for h, w in windows]), axis=0)
        for k, (h, w) in enumerate(windows):
            out[:, :, h, w] += np.where(winner == k, g, 0)
    return out[:, :, pads[0]:pads[0] + x.shape[2], pads[1]:pads[1] + x.shape[3]]


defop("np.max_pool2d_grad", operands=2, attrs=dict(get_opdef("np.max_pool2d").attrs), traits=(Trait.PURE,),
      infer=_max_pool_grad_infer, reference=_max_pool_grad, operand_names=("x", "g"),
      doc="The gradient of np.max_pool2d: each window's g goes to its first maximal element of x.")

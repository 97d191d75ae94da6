"""Sorting ops of the `np` dialect: the k largest or smallest elements along an axis."""

from __future__ import annotations

import numpy as np

from ...ir.attributes import BOOL, INT
from ...ir.dtypes import I64
from ...ir.opdef import Trait, defop, static_int
from ...ir.types import TensorType
from .common import NUMERIC, attr, check_dtype, normalize_axis


def _topk_infer(ctx, types, attrs):
    (t,) = types
    check_dtype(ctx, t, NUMERIC, "the operand")
    axis = attrs["axis"]
    if normalize_axis(ctx, axis, t.rank) != axis:
        raise ctx.error(f"axis must be stored non-negative, got {axis}")
    k = attrs["k"]
    if not 0 <= k <= static_int(t.shape[axis], ctx, f"dim {axis}"):
        raise ctx.error(f"k = {k} is outside [0, {t.shape[axis]}]")
    shape = tuple(k if i == axis else d for i, d in enumerate(t.shape))
    return [t.with_shape(shape), TensorType(shape, I64)]


def _topk(x, k, axis, largest):
    """Stable: among equal values the smaller index comes first, largest or smallest."""
    if largest:
        # A stable ascending sort of the reversed axis, read backwards, is descending with ties in index order.
        order = np.flip(np.argsort(np.flip(x, axis), axis=axis, kind="stable"), axis)
        order = x.shape[axis] - 1 - order
    else:
        order = np.argsort(x, axis=axis, kind="stable")
    indices = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, indices, axis), indices.astype(np.int64)


defop("np.topk", attrs={"k": attr(INT), "axis": attr(INT), "largest": attr(BOOL, True)},
      traits=(Trait.PURE,), infer=_topk_infer, reference=_topk, operand_names=("x",),
      doc="The k largest (or smallest) values along axis, sorted, and their int64 indices; ties keep index order.")

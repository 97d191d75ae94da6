"""Running products along an axis (the running sum, np.cumsum, lives with the reductions)."""

from __future__ import annotations

import numpy as np

from ...ir.attributes import BOOL, INT
from ...ir.opdef import Trait, defop
from .common import NUMERIC, attr, check_dtype, normalize_axis, quiet


def _cumprod_infer(ctx, types, attrs):
    (t,) = types
    check_dtype(ctx, t, NUMERIC, "the operand")
    if normalize_axis(ctx, attrs["axis"], t.rank) != attrs["axis"]:
        raise ctx.error(f"axis must be stored non-negative, got {attrs['axis']}")
    return [t]


def _cumprod(x, axis, exclusive, reverse):
    if reverse:
        x = np.flip(x, axis)
    if exclusive:
        ones = np.ones_like(np.take(x, [0], axis=axis)) if x.shape[axis] else np.ones_like(x)
        x = np.concatenate([ones, np.take(x, np.arange(x.shape[axis] - 1), axis=axis)], axis=axis)
    out = np.cumprod(x, axis=axis, dtype=x.dtype)
    return np.flip(out, axis) if reverse else out


defop("np.cumprod", operands=1, attrs={"axis": attr(INT), "exclusive": attr(BOOL, False),
                                       "reverse": attr(BOOL, False)},
      traits=(Trait.PURE,), infer=_cumprod_infer, reference=quiet(_cumprod), operand_names=("x",),
      doc="Running product along axis (optionally exclusive of the current element, or from the end).")

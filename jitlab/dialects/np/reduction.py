"""Reductions of the `np` dialect: along sorted, non-negative `axes`, with `keepdims`."""

from __future__ import annotations

import numpy as np

from ...ir.attributes import BOOL, INT, INTS
from ...ir.dtypes import I64
from ...ir.opdef import Trait, defop
from ...ir.types import TensorType
from .common import ANY, BOOLEAN, INEXACT, NUMBER, attr, check_axes, check_dtype, normalize_axis, quiet


def reduced_shape(shape, axes, keepdims: bool) -> tuple:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _reduction(name: str, fn, kinds: str, out_dtype=None, traits=(), doc: str = ""):
    def infer(ctx, types, attrs):
        (t,) = types
        check_dtype(ctx, t, kinds, "the operand")
        axes = check_axes(ctx, attrs["axes"], t.rank)
        if name in ("max", "min") and any(t.shape[a] == 0 for a in axes):
            raise ctx.error(f"cannot reduce a size-0 axis with {name} (it has no identity)")
        return [TensorType(reduced_shape(t.shape, axes, attrs["keepdims"]), out_dtype or t.dtype)]

    def reference(x, axes, keepdims):
        return np.asarray(fn(x, axis=tuple(axes), keepdims=keepdims), dtype=out_dtype or x.dtype)

    return defop(f"np.{name}", operands=1,
                 attrs={"axes": attr(INTS, doc="reduced axes, sorted and non-negative"),
                        "keepdims": attr(BOOL, False)},
                 traits=(Trait.PURE, Trait.REDUCTION, *traits), infer=infer,
                 reference=quiet(reference), operand_names=("x",), doc=doc)


_reduction("sum", np.sum, NUMBER, doc="Sum along axes.")
_reduction("prod", np.prod, NUMBER, doc="Product along axes.")
_reduction("max", np.max, ANY, doc="Maximum along axes; NaN propagates.")
_reduction("min", np.min, ANY, doc="Minimum along axes; NaN propagates.")
_reduction("mean", np.mean, INEXACT, traits=(Trait.COMPOSITE,), doc="Mean along axes: sum / count.")
_reduction("any", np.any, BOOLEAN, doc="Logical or along axes.")
_reduction("all", np.all, BOOLEAN, doc="Logical and along axes.")


def _arg_reduction(name: str, fn):
    def infer(ctx, types, attrs):
        (t,) = types
        check_dtype(ctx, t, ANY, "the operand")
        axis = normalize_axis(ctx, attrs["axis"], t.rank)
        if axis != attrs["axis"]:
            raise ctx.error(f"axis must be stored non-negative, got {attrs['axis']}")
        if t.shape[axis] == 0:
            raise ctx.error(f"cannot take {name} over a size-0 axis")
        return [TensorType(reduced_shape(t.shape, (axis,), attrs["keepdims"]), I64)]

    def reference(x, axis, keepdims):
        return np.asarray(fn(x, axis=axis, keepdims=keepdims), dtype=I64)

    defop(f"np.{name}", operands=1, attrs={"axis": attr(INT), "keepdims": attr(BOOL, False)},
          traits=(Trait.PURE, Trait.REDUCTION), infer=infer, reference=reference,
          operand_names=("x",), doc=f"Index of the first {name[3:]} along axis (NaN counts as the {name[3:]}).")


_arg_reduction("argmax", np.argmax)
_arg_reduction("argmin", np.argmin)


def _cumsum_infer(ctx, types, attrs):
    (t,) = types
    check_dtype(ctx, t, NUMBER, "the operand")
    if normalize_axis(ctx, attrs["axis"], t.rank) != attrs["axis"]:
        raise ctx.error(f"axis must be stored non-negative, got {attrs['axis']}")
    return [t]


def _cumsum(x, axis, exclusive, reverse):
    if reverse:
        x = np.flip(x, axis)
    out = np.cumsum(x, axis=axis, dtype=x.dtype)
    if exclusive:
        shifted = np.zeros_like(out)
        dst, src = [slice(None)] * x.ndim, [slice(None)] * x.ndim
        dst[axis], src[axis] = slice(1, None), slice(None, -1)
        shifted[tuple(dst)] = out[tuple(src)]
        out = shifted
    return np.flip(out, axis) if reverse else out


defop("np.cumsum", operands=1, attrs={"axis": attr(INT), "exclusive": attr(BOOL, False),
                                      "reverse": attr(BOOL, False)},
      traits=(Trait.PURE,), infer=_cumsum_infer, reference=quiet(_cumsum), operand_names=("x",),
      doc="Running sum along axis (optionally exclusive of the current element, or from the end).")

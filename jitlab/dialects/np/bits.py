"""Reinterpreting the bits of a tensor as another dtype of the same width."""

from __future__ import annotations

from ...ir.attributes import DTYPE
from ...ir.dtypes import dtype_name
from ...ir.opdef import Trait, defop
from .common import attr


def _bitcast_infer(ctx, types, attrs):
    (t,) = types
    dtype = attrs["dtype"]
    if dtype.itemsize != t.dtype.itemsize:
        raise ctx.error(f"cannot reinterpret {dtype_name(t.dtype)} as {dtype_name(dtype)}: widths differ")
    if dtype.kind == "b" and t.dtype.kind != "b":
        raise ctx.error("reinterpreting bits as bool is not supported (only 0 and 1 are bools)")
    return [t.with_dtype(dtype)]


defop("np.bitcast", attrs={"dtype": attr(DTYPE)}, traits=(Trait.PURE, Trait.ELEMENTWISE),
      infer=_bitcast_infer, reference=lambda x, dtype: x.view(dtype), operand_names=("x",),
      doc="The same bits read as another dtype of the same width (a view, like numpy's .view).")

"""Reductions and scans beyond numpy_api's plain ones: np.cumprod (the `np.cumprod` scan, with
np.cumsum's dtype rules) and the NaN-ignoring reductions np.nansum, np.nanprod, np.nanmean, np.nanmax
and np.nanmin (NaN replaced by the reduction's identity, then the plain reduction).

The sums follow the reduction ops' order, so they agree with numpy to rounding.
"""

from __future__ import annotations

import numpy as np

from ..errors import TraceError
from .numpy_api import astype, context_of, implements, mean, normalize_axes, normalize_axis, reduce_over, reshape
from .operands import cast, no_complex, refuse, scalar_constant
from .tracer import Tracer


# -- running product -------------------------------------------------------------------------------
@implements(np.cumprod)
def cumprod(a, axis=None, dtype=None, out=None):
    ctx = context_of(a)
    refuse(ctx, "np.cumprod", out=out)
    x = ctx.lift(a)
    if dtype is not None:
        x = astype(x, dtype)
    elif x.dtype.kind in "biu" and x.dtype.itemsize < 8:     # as np.cumsum and np.prod: ints widen
        x = cast(x, np.uint64 if x.dtype.kind == "u" else np.int64)
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    return ctx.op("np.cumprod", x.value, axis=normalize_axis(x, axis))


# -- NaN-ignoring reductions -----------------------------------------------------------------------
def _nan_replaced(a, value, name: str) -> tuple[Tracer, Tracer | None]:
    """numpy's _replace_nan: NaN set to `value` in a float array, and the NaN mask (None for ints)."""
    x = context_of(a).lift(a)
    if x.dtype.kind not in "fc":
        return x, None
    no_complex(x, name)
    mask = np.isnan(x)
    return np.where(mask, scalar_constant(x.ctx, value, x.dtype), x), mask


def _nan_reduction(kind: str, fill, numpy_function):
    name = f"np.{numpy_function.__name__}"

    @implements(numpy_function)
    def reduce(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
        ctx = context_of(a)
        refuse(ctx, name, out=out, initial=initial, where=where)
        x, _ = _nan_replaced(a, fill, name)
        return reduce_over(kind, x, axis, keepdims, dtype)

    reduce.__name__ = numpy_function.__name__
    return reduce


nansum = _nan_reduction("sum", 0, np.nansum)


nanprod = _nan_reduction("prod", 1, np.nanprod)


@implements(np.nanmean)
def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    """numpy's: the sum of the numbers over their count, divided as numpy does (in the quotient's loop
    dtype, then cast back); an all-NaN slice is 0 / 0, NaN (numpy warns)."""
    ctx = context_of(a)
    refuse(ctx, "np.nanmean", out=out, where=where)
    x, mask = _nan_replaced(a, 0, "np.nanmean")
    if mask is None:
        return mean(x, axis=axis, dtype=dtype, keepdims=keepdims)
    count = reduce_over("sum", ~mask, axis, keepdims, np.int64)
    total = reduce_over("sum", x, axis, keepdims, dtype)
    return cast(np.true_divide(total, count), total.dtype)


def _nan_extreme(kind: str, numpy_function):
    name = f"np.{numpy_function.__name__}"
    fill = np.inf if kind == "min" else -np.inf

    @implements(numpy_function)
    def extreme(a, axis=None, out=None, keepdims=False, initial=None, where=None):
        """numpy's fmin/fmax reduction: NaN replaced by the infinity that never wins, NaN again
        where the whole slice is NaN (numpy warns there; the traced version cannot)."""
        ctx = context_of(a)
        refuse(ctx, name, out=out, initial=initial, where=where)
        x, mask = _nan_replaced(a, fill, name)
        if any(x.shape[i] == 0 for i in normalize_axes(x, axis)):
            raise TraceError(f"{name}: zero-size array to reduction operation which has no identity "
                             f"({ctx.where()})")
        result = reduce_over(kind, x, axis, keepdims)
        if mask is None:
            return result
        all_nan = reduce_over("all", mask, axis, keepdims)
        return np.where(all_nan, scalar_constant(ctx, np.nan, x.dtype), result)

    extreme.__name__ = numpy_function.__name__
    return extreme


nanmax = _nan_extreme("max", np.nanmax)


nanmin = _nan_extreme("min", np.nanmin)

"""The ufunc methods besides a call that a traced function may use: ufunc.outer (every pair),
ufunc.reduce (the matching reduction) and ufunc.accumulate (np.cumsum, np.cumprod, or a scan by
doubling strides); numpy_api's apply_ufunc hands them here. ufunc.at is a write: inplace.py.
"""

from __future__ import annotations

import numpy as np

from ..errors import TraceError, UnsupportedOp
from .indexing import index_along
from .numpy_api import astype, concatenate, normalize_axis, reduce_over, reshape
from .operands import cast, static_length
from .tracer import Tracer

# the reduction op each ufunc's .reduce is
_REDUCTIONS = {np.add: "sum", np.multiply: "prod", np.maximum: "max", np.minimum: "min",
               np.logical_and: "all", np.logical_or: "any"}


def ufunc_outer(ctx, ufunc: np.ufunc, inputs, kwargs):
    """ufunc.outer(a, b): every pair, as the ufunc on a reshaped against b."""
    if len(inputs) != 2:
        raise TraceError(f"np.{ufunc.__name__}.outer takes two arrays ({ctx.where()})")
    x, y = (ctx.lift(i) for i in inputs)      # numpy makes arrays of Python scalars here: int64, float64
    return ufunc(reshape(x, x.shape + (1,) * y.ndim), y, **kwargs)


def _scan_steps(x: Tracer, axis: int, ufunc: np.ufunc) -> Tracer:
    """An inclusive scan by doubling strides (Hillis-Steele): exact for max, min and logic."""
    n = static_length(x, axis, f"np.{ufunc.__name__}.accumulate")
    step = 1
    while step < n:
        shifted = index_along(x, axis, slice(None, n - step))
        first, rest = index_along(x, axis, slice(None, step)), index_along(x, axis, slice(step, None))
        x = concatenate([first, ufunc(rest, shifted)], axis=axis)
        step *= 2
    return x


_SCANNED = (np.maximum, np.minimum, np.logical_and, np.logical_or, np.bitwise_and, np.bitwise_or,
            np.bitwise_xor, np.fmax, np.fmin)


def ufunc_accumulate(ctx, ufunc: np.ufunc, inputs, kwargs):
    name = ufunc.__name__
    x = ctx.lift(inputs[0])
    axis, dtype = kwargs.get("axis", 0), kwargs.get("dtype")
    if axis is None or x.ndim == 0:
        raise TraceError(f"np.{name}.accumulate needs an array of rank >= 1 and an int axis ({ctx.where()})")
    axis = normalize_axis(x, axis)
    if dtype is None and ufunc in (np.logical_and, np.logical_or):
        dtype = np.bool_
    if dtype is not None:
        x = astype(x, dtype)
    if ufunc in (np.add, np.multiply):
        if dtype is None and x.dtype.kind in "biu" and x.dtype.itemsize < 8:   # numpy widens as np.sum does
            x = cast(x, np.uint64 if x.dtype.kind == "u" else np.int64)
        return ctx.op("np.cumsum" if ufunc is np.add else "np.cumprod", x.value, axis=axis)
    if ufunc in _SCANNED:
        return _scan_steps(x, axis, ufunc)
    raise UnsupportedOp(f"np.{name}.accumulate is not supported ({ctx.where()}); jitlab accumulates "
                        "add, multiply, maximum, minimum, fmax, fmin and the logical and bitwise and/or/xor")


def ufunc_reduce(ctx, ufunc: np.ufunc, inputs, kwargs):
    """ufunc.reduce as the matching reduction; where= fills the left-out elements with the
    identity (or initial), and initial joins the result as one more element."""
    name = ufunc.__name__
    if ufunc not in _REDUCTIONS:
        raise UnsupportedOp(f"np.{name}.reduce is not supported ({ctx.where()}); jitlab reduces add, multiply, "
                            "maximum, minimum, logical_and and logical_or")
    initial, where = kwargs.get("initial", np._NoValue), kwargs.get("where", True)
    x = ctx.lift(inputs[0])
    if where is not True:
        fill = ufunc.identity if initial is np._NoValue else initial
        if fill is None:
            raise TraceError(f"np.{name}.reduce(where=...) needs initial=, as numpy does ({ctx.where()})")
        x = np.where(where, x, cast(ctx.lift(fill, x), x.dtype))
    result = reduce_over(_REDUCTIONS[ufunc], x, kwargs.get("axis", 0), kwargs.get("keepdims", False),
                     kwargs.get("dtype"))
    if initial is np._NoValue or initial is None:
        return result
    return cast(ufunc(result, initial), result.dtype)


UFUNC_METHODS = {"outer": ufunc_outer, "accumulate": ufunc_accumulate, "reduce": ufunc_reduce}

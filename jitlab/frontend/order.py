"""numpy's sorting, searching and order statistics: np.sort, np.argsort, np.median, np.quantile and
np.percentile (numpy's default, linear method) traced through np.topk, a stable sort of a whole axis;
np.searchsorted by counting, on the sorted array, the elements before each value.

NaN sorts last, as in numpy. Among equal values argsort keeps index order, as numpy's
kind="stable" does; its default introsort may order ties otherwise on axes longer than 16.
"""

from __future__ import annotations

import numpy as np

from ..errors import TraceError, UnsupportedOp
from .numpy_api import concatenate, context_of, implements, mean, normalize_axis, reshape
from .operands import cast, no_complex, promoted, refuse, static_length
from .tracer import Tracer


def _along(a, axis, name: str) -> tuple[Tracer, int]:
    """The operand (flattened for axis=None) and its sorted axis, made non-negative."""
    ctx = context_of(a)
    x = no_complex(ctx.lift(a), name)
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    if not isinstance(axis, (int, np.integer)):
        raise UnsupportedOp(f"{name} over several axes is not supported; sort one axis ({ctx.where()})")
    axis = normalize_axis(x, int(axis))
    static_length(x, axis, name)
    return x, axis


def _sorted(x: Tracer, axis: int) -> tuple[Tracer, Tracer]:
    """x sorted along axis and the int64 order that sorts it (bools sort as 0 and 1)."""
    keys = cast(x, np.uint8) if x.dtype.kind == "b" else x
    values, order = x.ctx.emit("np.topk", [keys.value], k=x.shape[axis], axis=axis, largest=False)
    return (cast(values, x.dtype) if x.dtype.kind == "b" else values), order


@implements(np.sort)
def sort(a, axis=-1, kind=None, order=None, *, stable=None):
    refuse(context_of(a), "np.sort", order=order)
    return _sorted(*_along(a, axis, "np.sort"))[0]


@implements(np.argsort)
def argsort(a, axis=-1, kind=None, order=None, *, stable=None):
    refuse(context_of(a), "np.argsort", order=order)
    return _sorted(*_along(a, axis, "np.argsort"))[1]


def _take(x: Tracer, axis: int, index: int) -> Tracer:
    """x[..., index:index + 1, ...] along axis: the axis kept, of length 1."""
    key = tuple(slice(index, index + 1) if d == axis else slice(None) for d in range(x.ndim))
    return x[key]


def _nan_where_any(result: Tracer, last: Tracer) -> Tracer:
    """NaN where the sorted slice ends in NaN (it holds one), as numpy's median and quantiles give."""
    if result.dtype.kind != "f":
        return result
    return np.where(np.isnan(last), np.asarray(np.nan, result.dtype), result)


def _keep(x: Tracer, axis: int, keepdims: bool, rank: int, flat: bool) -> Tracer:
    """A result with axis kept at length 1, shaped as numpy's for keepdims (all axes of length 1 when
    axis was None) or with that axis gone."""
    if keepdims:
        return reshape(x, (1,) * rank) if flat else x
    return reshape(x, tuple(d for i, d in enumerate(x.shape) if i != axis))


@implements(np.median)
def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    ctx = context_of(a)
    refuse(ctx, "np.median", out=out)
    rank = ctx.lift(a).ndim
    x, axis_ = _along(a, axis, "np.median")
    n = x.shape[axis_]
    if n == 0:
        raise UnsupportedOp(f"np.median of an empty axis (numpy gives NaN with a warning) is not supported "
                            f"({ctx.where()})")
    s, _ = _sorted(x, axis_)
    middle = [_take(s, axis_, n // 2)] if n % 2 else [_take(s, axis_, n // 2 - 1), _take(s, axis_, n // 2)]
    # numpy takes the mean of the one or two middle values: its dtype, its rounding
    result = mean(concatenate(middle, axis=axis_), axis=axis_, keepdims=True)
    result = _nan_where_any(result, _take(s, axis_, n - 1))
    return _keep(result, axis_, keepdims, rank, axis is None)


def _lerp(a: Tracer, b: Tracer, t: float, dtype) -> Tracer:
    """numpy's _lerp: b - a in the operand's dtype, then a + (b - a) t in `dtype`, or b - (b - a) (1 - t)
    from t = 0.5 on (exact at t = 1)."""
    diff = cast(b - a, dtype)
    a, b = cast(a, dtype), cast(b, dtype)
    return b - diff * (1 - t) if t >= 0.5 else a + diff * t


def _quantile(a, q, weak: bool, axis, keepdims, method: str, name: str):
    """numpy's linear quantiles: a weak q (a Python number) keeps a float operand's dtype, an array
    of q promotes with it; an integer operand gives float64."""
    ctx = context_of(a)
    if method != "linear":
        raise UnsupportedOp(f"{name} with method={method!r} is not supported; the default 'linear' is "
                            f"({ctx.where()})")
    if isinstance(q, Tracer):
        raise UnsupportedOp(f"{name} needs q known while tracing: a number or a list of numbers "
                            f"({ctx.where()})")
    qs = np.asanyarray(q)
    if qs.ndim > 1 or qs.dtype.kind not in "iuf":
        raise UnsupportedOp(f"{name} needs q as a number or a list of numbers ({ctx.where()})")
    if not ((qs >= 0) & (qs <= 1)).all():
        raise TraceError(f"{name}: quantiles must be in [0, 1] (percentiles in [0, 100]), got {q!r} "
                         f"({ctx.where()})")
    rank = ctx.lift(a).ndim
    x, axis_ = _along(a, axis, name)
    n = x.shape[axis_]
    if n == 0:
        raise UnsupportedOp(f"{name} of an empty axis is not supported ({ctx.where()})")
    if x.dtype.kind != "f":
        dtype = np.dtype(np.float64)
    else:
        dtype = x.dtype if weak else np.result_type(x.dtype, qs.dtype)
    s, _ = _sorted(x, axis_)
    last = _take(s, axis_, n - 1)
    virtual = np.atleast_1d((n - 1) * qs)          # numpy's linear index, in q's dtype
    results = []
    for v in virtual:
        below = int(np.floor(v))
        lower, upper = _take(s, axis_, below), _take(s, axis_, min(below + 1, n - 1))
        one = _nan_where_any(_lerp(lower, upper, float(v - np.floor(v)), dtype), cast(last, dtype))
        results.append(_keep(one, axis_, keepdims, rank, axis is None))
    if qs.ndim == 0:
        return results[0]
    return concatenate([reshape(r, (1,) + r.shape) for r in results], axis=0)


@implements(np.quantile)
def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *,
             weights=None, interpolation=None):
    refuse(context_of(a), "np.quantile", out=out, weights=weights, interpolation=interpolation)
    return _quantile(a, q, type(q) in (int, float), axis, keepdims, method, "np.quantile")


@implements(np.percentile)
def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *,
               weights=None, interpolation=None):
    refuse(context_of(a), "np.percentile", out=out, weights=weights, interpolation=interpolation)
    fraction = q if isinstance(q, Tracer) else np.true_divide(q, 100)
    return _quantile(a, fraction, type(q) in (int, float), axis, keepdims, method, "np.percentile")


# -- searching -------------------------------------------------------------------------------------
@implements(np.searchsorted)
def searchsorted(a, v, side="left", sorter=None):
    ctx = context_of(a, v)
    if sorter is not None:
        raise UnsupportedOp(f"np.searchsorted(sorter=...) is not supported ({ctx.where()}); pass a[sorter]")
    if side not in ("left", "right"):
        raise TraceError(f"np.searchsorted: side must be 'left' or 'right', got {side!r} ({ctx.where()})")
    xs, vs = promoted([ctx.lift(a), ctx.lift(v)])
    if xs.ndim != 1:
        raise TraceError(f"np.searchsorted needs a 1-d sorted array, got {xs.value.type} ({ctx.where()})")
    # on a sorted array, the insertion point is the number of elements before it
    col = vs[..., None]
    before = (xs < col) if side == "left" else (xs <= col)
    if xs.dtype.kind == "f":     # numpy sorts NaN last: every number is before a NaN
        before = before | (np.isnan(col) & ~np.isnan(xs))
    return np.sum(before, axis=-1, dtype=np.int64)

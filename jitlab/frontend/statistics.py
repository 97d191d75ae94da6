"""numpy's statistics traced as compositions of `np` ops: np.average (a mean, or weighted sums in
numpy's dtype), np.cov and np.corrcoef, and the counts np.bincount and np.histogram (one scatter-add
each). Medians and quantiles sort: they are in order.py.

The sums follow the reduction ops' order, so float results agree with numpy to rounding.
"""

from __future__ import annotations

import builtins

import numpy as np

from ..errors import TraceError, UnsupportedOp
from ..ir.shapes import Sym
from .matrices import matrix_diagonal
from .numpy_api import (
    astype,
    broadcast_to,
    concatenate,
    context_of,
    implements,
    mean,
    normalize_axes,
    normalize_axis,
    reduce_over,
    reshape,
    transpose,
)
from .operands import cast, no_complex, scalar_constant, static_length
from .tracer import Tracer


# -- means -----------------------------------------------------------------------------------------
@implements(np.average)
def average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    """numpy's weighted mean. Weights that sum to zero make numpy raise ZeroDivisionError; that depends
    on the data, so the traced version divides anyway: NaN or an infinity where they do."""
    ctx = context_of(a, weights)
    x = ctx.lift(a)
    axes = None if axis is None else _axes_in_order(x, axis)
    keep = axes if axes is not None else tuple(range(x.ndim))
    if weights is None:
        avg = mean(x, axis=axes, keepdims=keepdims)
        if not returned:
            return avg
        size, kept = _static_size(ctx, x.shape), _static_size(ctx, avg.shape)
        return avg, Tracer(broadcast_to(scalar_constant(ctx, size / kept, avg.dtype), avg.shape).value, ctx)
    w = _weights_along(ctx, x, ctx.lift(weights), axes)
    dtype = np.result_type(x.dtype, w.dtype, "f8") if x.dtype.kind in "biu" else np.result_type(x.dtype, w.dtype)
    scale = reduce_over("sum", w, keep, keepdims, dtype)
    avg = reduce_over("sum", np.multiply(cast(x, dtype), cast(w, dtype)), keep, keepdims) / scale
    if not returned:
        return avg
    return avg, (scale if scale.shape == avg.shape else Tracer(broadcast_to(scale, avg.shape).value, ctx))


def _weights_along(ctx, x: Tracer, w: Tracer, axes) -> Tracer:
    """numpy's _weights_are_valid: weights of a's shape, or of the shape of the averaged axes."""
    if w.shape == x.shape:
        return w
    if axes is None:
        raise TraceError(f"np.average: axis must be specified when shapes of a and weights differ "
                         f"({ctx.where()})")
    if w.shape != tuple(x.shape[ax] for ax in axes):
        raise TraceError(f"np.average: shape of weights {w.shape} must be consistent with shape of a "
                         f"{x.shape} along axis {axes} ({ctx.where()})")
    w = transpose(w, [int(i) for i in np.argsort(axes)])
    return reshape(w, tuple(s if ax in axes else 1 for ax, s in enumerate(x.shape)))


def _axes_in_order(x: Tracer, axis) -> tuple[int, ...]:
    """numpy's normalize_axis_tuple: non-negative, in the order given (weights follow that order)."""
    normalize_axes(x, axis)                         # checks bounds and repeats
    return tuple(normalize_axis(x, a) for a in ((axis,) if isinstance(axis, (int, np.integer)) else axis))


def _static_size(ctx, shape) -> int:
    if any(isinstance(d, Sym) for d in shape):
        raise UnsupportedOp(f"np.average(returned=True) over symbolic dims {shape} is not supported "
                            f"({ctx.where()})")
    return int(np.prod(shape, dtype=np.int64))


# -- covariance ------------------------------------------------------------------------------------
@implements(np.cov)
def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *, dtype=None):
    ctx = context_of(m, y)
    if fweights is not None or aweights is not None:
        raise UnsupportedOp(f"np.cov with fweights=/aweights= is not supported ({ctx.where()})")
    x = ctx.lift(m)
    if x.ndim > 2:
        raise TraceError(f"np.cov: m has more than 2 dimensions ({ctx.where()})")
    dtype = np.result_type(x.dtype, np.float64) if dtype is None else np.dtype(dtype)
    x = np.atleast_2d(astype(x, dtype))
    if not rowvar and x.shape[0] != 1:
        x = x.T
    if y is not None:
        z = np.atleast_2d(astype(ctx.lift(y), dtype))
        if not rowvar and z.shape[0] != 1:
            z = z.T
        x = concatenate([x, z], axis=0)
    ddof = (0 if bias else 1) if ddof is None else ddof
    n = static_length(x, 1, "np.cov")
    centered = x - np.mean(x, axis=1, keepdims=True)
    c = np.matmul(centered, np.conj(centered).T) / builtins.max(n - ddof, 0)
    return np.squeeze(c)


@implements(np.corrcoef)
def corrcoef(x, y=None, rowvar=True, *, dtype=None):
    c = no_complex(cov(x, y, rowvar, dtype=dtype), "np.corrcoef")
    if c.ndim == 0:
        return c / c
    stddev = np.sqrt(matrix_diagonal(c, 0))
    c = c / stddev[:, None] / stddev[None, :]
    return np.clip(c, -1, 1)


# -- counting --------------------------------------------------------------------------------------
def _scatter_add(ctx, n: int, index: Tracer, weights: Tracer | None, dtype) -> Tracer:
    """Sums of `weights` (or counts) per value of `index`, into a length-n array: one pass over the data."""
    from .inplace import scattered

    zeros = np.broadcast_to(ctx.constant(0, dtype), (n,))
    return scattered(zeros, (index,), 1 if weights is None else weights, "add")


@implements(np.bincount)
def bincount(x, weights=None, minlength=0):
    ctx = context_of(x, weights)
    v = ctx.lift(x)
    if minlength is None or isinstance(minlength, Tracer) or int(minlength) <= 0:
        raise UnsupportedOp(f"np.bincount's result length is max(x) + 1, known only from the data "
                            f"({ctx.where()}); write np.bincount(x, minlength=N) with N a Python int greater "
                            "than every value of x (a value >= N is then an InputError)")
    if v.ndim != 1 or v.dtype.kind not in "biu":
        raise TraceError(f"np.bincount needs a 1-d array of non-negative ints, got {v.value.type} ({ctx.where()})")
    n = int(minlength)
    # numpy would lengthen the result for a value >= N and refuses negatives; with a static
    # length both must fail, not go uncounted: the scatter's bounds check makes them an
    # InputError at run time (negatives sent to N first, since a scatter wraps them).
    v = cast(v, np.int64)
    checked = np.where(v < 0, n, v)
    if weights is None:
        return _scatter_add(ctx, n, checked, None, np.int64)
    w = no_complex(ctx.lift(weights), "np.bincount's weights")
    return _scatter_add(ctx, n, checked, cast(w, np.result_type(w.dtype, np.float64)), np.float64)


def _outer_edges(ctx, x: Tracer, range_):
    """histogram's first and last edge: Python floats from `range`, else the data's min and max."""
    if range_ is None:
        if x.shape == (0,):
            return 0.0, 1.0
        lo, hi = np.min(x), np.max(x)
        same = lo == hi
        return np.where(same, lo - 0.5, lo), np.where(same, hi + 0.5, hi)
    if any(isinstance(r, Tracer) for r in range_):
        raise UnsupportedOp(f"np.histogram with a traced range is not supported ({ctx.where()}); pass Python "
                            "numbers, or leave range out for the data's min and max")
    lo, hi = float(range_[0]), float(range_[1])
    if not lo <= hi:
        raise TraceError(f"np.histogram: max must be larger than min in range parameter ({ctx.where()})")
    return (lo - 0.5, hi + 0.5) if lo == hi else (lo, hi)


@implements(np.histogram)
def histogram(a, bins=10, range=None, density=None, weights=None):
    """numpy's uniform-bin histogram: each value's bin from its offset, corrected against the edges as numpy
    does, then one scatter-add; values outside the range go to a bin past the end that is dropped."""
    ctx = context_of(a, weights)
    if not isinstance(bins, (int, np.integer)) or bins < 1:
        raise UnsupportedOp(f"np.histogram with explicit bin edges is not supported ({ctx.where()}); "
                            "pass bins=<positive int>, and range=(lo, hi) or none")
    n = int(bins)
    x = reshape(no_complex(ctx.lift(a), "np.histogram"), (-1,))
    lo, hi = _outer_edges(ctx, x, range)
    static = isinstance(lo, float)
    bin_dtype = np.result_type(lo, hi, x.dtype) if static else np.result_type(lo.dtype, x.dtype)
    bin_dtype = bin_dtype if bin_dtype.kind == "f" else np.dtype(np.float64)
    if static:
        edges = ctx.constant(np.linspace(lo, hi, n + 1, dtype=bin_dtype))
        denom = hi - lo                                     # numpy divides by the Python float
    else:
        lo, hi = cast(lo, bin_dtype), cast(hi, bin_dtype)
        steps = ctx.constant(np.arange(n + 1, dtype=bin_dtype))
        edges = np.concatenate([(steps * ((hi - lo) / n) + lo)[:n], hi[None]])
        denom = hi - lo
    keep = (x >= lo) & (x <= hi)
    xf = cast(x, bin_dtype)
    f = (xf - lo) / denom * n
    index = np.where(keep, f, 0).astype(np.int64)
    index = np.where(index == n, n - 1, index)
    index = index - (xf < np.take(edges, index))
    index = index + ((xf >= np.take(edges, index + 1)) & (index != n - 1))
    index = np.where(keep, index, n)
    if weights is None:
        counts = _scatter_add(ctx, n + 1, index, None, np.int64)[:n]
    else:
        w = reshape(no_complex(ctx.lift(weights), "np.histogram's weights"), (-1,))
        counts = _scatter_add(ctx, n + 1, index, cast(w, np.float64), np.float64)[:n]
        counts = cast(counts, w.dtype)
    if density:
        widths = cast(edges[1:] - edges[:-1], np.float64)
        counts = counts / widths / np.sum(counts)
    return counts, edges

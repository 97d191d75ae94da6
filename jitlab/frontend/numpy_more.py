"""More numpy functions traced as compositions of existing `np` ops: np.cumprod (the `np.cumprod` scan,
with np.cumsum's dtype rules), np.isclose and np.allclose (numpy's formula, elementwise), np.nan_to_num
(selects), the NaN-ignoring reductions np.nansum, np.nanprod, np.nanmean, np.nanmax and np.nanmin (NaN
replaced by the reduction's identity, then the plain reduction), np.average (a mean, or weighted sums
in numpy's dtype), np.kron and np.meshgrid (broadcasting and reshapes), np.polyval (numpy's Horner
loop, unrolled over the coefficients), np.convolve and np.correlate (a gather of the longer operand by
a constant index matrix, a masked product and a sum), and np.interp (numpy's formula, its interval
found by counting the points at or below each value).

Elementwise ones are exact, bit for bit, as numpy's own definitions are compositions of elementwise
ufuncs; the sums follow the reduction ops' order, so they agree with numpy to rounding.
"""

from __future__ import annotations

import builtins

import numpy as np

from ..errors import TraceError, UnsupportedOp
from ..ir.shapes import Sym
from .numpy_api import (
    astype,
    broadcast_to,
    context_of,
    implements,
    mean,
    normalize_axes,
    normalize_axis,
    reduce_over,
    reshape,
    take,
    transpose,
    zeros_like,
)
from .operands import cast, no_complex, refuse, scalar_constant, static_length
from .tracer import Tracer


# -- running product ------------------------------------------------------------------------
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


# -- closeness --------------------------------------------------------------------------------
def _close_operand(ctx, v):
    """isclose's operands as numpy takes them: Python numbers stay weak, anything else an array."""
    return v if isinstance(v, (int, float, complex)) and not isinstance(v, bool) else ctx.lift(v)


@implements(np.isclose)
def isclose(a, b, rtol=1.e-5, atol=1.e-8, equal_nan=False):
    ctx = context_of(a, b, rtol, atol)
    x, y = _close_operand(ctx, a), _close_operand(ctx, b)
    rtol, atol = _close_operand(ctx, rtol), _close_operand(ctx, atol)
    if isinstance(y, Tracer):
        y = cast(y, np.result_type(y.dtype, 1.0))      # numpy compares in at least a float dtype
    elif isinstance(y, int):
        y = float(y)
    # numpy's formula: infinities are close only to an equal infinity (isfinite(y), then x == y)
    result = (np.less_equal(np.abs(x - y), atol + rtol * np.abs(y)) & np.isfinite(y)) | (np.equal(x, y))
    if equal_nan:
        result = result | (np.isnan(x) & np.isnan(y))
    return result


@implements(np.allclose)
def allclose(a, b, rtol=1.e-5, atol=1.e-8, equal_nan=False):
    """np.all of isclose: a 0-d bool array, where numpy returns a Python bool."""
    return np.all(isclose(a, b, rtol, atol, equal_nan))


# -- NaN and infinities ---------------------------------------------------------------------------
@implements(np.nan_to_num)
def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    ctx = context_of(x, nan, posinf, neginf)
    v = ctx.lift(x)
    if any(isinstance(p, Tracer) for p in (nan, posinf, neginf)):
        raise UnsupportedOp(f"np.nan_to_num with traced nan=/posinf=/neginf= is not supported ({ctx.where()}); "
                            "pass Python numbers")
    if v.dtype.kind not in "fc":
        return v if copy is False else Tracer(v.value, ctx)      # numpy leaves ints and bools alone
    no_complex(v, "np.nan_to_num")
    info = np.finfo(v.dtype)
    hi, lo = info.max if posinf is None else posinf, info.min if neginf is None else neginf
    out = np.where(np.isnan(v), scalar_constant(ctx, nan, v.dtype), v)
    out = np.where(np.isinf(v) & (v > 0), scalar_constant(ctx, hi, v.dtype), out)
    out = np.where(np.isinf(v) & (v < 0), scalar_constant(ctx, lo, v.dtype), out)
    if copy is False:               # numpy replaces in place and returns x (only x dispatches here: a Tracer)
        x[...] = out
        return x
    return out


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


# -- weighted means ---------------------------------------------------------------------------
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


def _axes_in_order(x: Tracer, axis) -> tuple[int, ...]:
    """numpy's normalize_axis_tuple: non-negative, in the order given (weights follow that order)."""
    normalize_axes(x, axis)                         # checks bounds and repeats
    return tuple(normalize_axis(x, a) for a in ((axis,) if isinstance(axis, (int, np.integer)) else axis))


def _static_size(ctx, shape) -> int:
    if any(isinstance(d, Sym) for d in shape):
        raise UnsupportedOp(f"np.average(returned=True) over symbolic dims {shape} is not supported "
                            f"({ctx.where()})")
    return int(np.prod(shape, dtype=np.int64))


# -- products and grids --------------------------------------------------------------------------
@implements(np.kron)
def kron(a, b):
    """numpy's: a with an axis of 1 after each of its axes, times b with one before each, reshaped."""
    ctx = context_of(a, b)
    x, y = ctx.lift(a), ctx.lift(b)
    if x.ndim == 0 or y.ndim == 0:
        return np.multiply(x, y)
    nd = builtins.max(x.ndim, y.ndim)
    x = reshape(x, (1,) * (nd - x.ndim) + x.shape)
    y = reshape(y, (1,) * (nd - y.ndim) + y.shape)
    shape = tuple(m * n for m, n in zip(x.shape, y.shape))
    spread_x = reshape(x, tuple(d for n in x.shape for d in (n, 1)))
    spread_y = reshape(y, tuple(d for n in y.shape for d in (1, n)))
    return reshape(np.multiply(spread_x, spread_y), shape)


@implements(np.meshgrid)
def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    ctx = context_of(*xi)
    if indexing not in ("xy", "ij"):
        raise TraceError(f"np.meshgrid: valid values for `indexing` are 'xy' and 'ij', got {indexing!r} "
                         f"({ctx.where()})")
    n = len(xi)
    ones = (1,) * n
    out = [reshape(ctx.lift(x), ones[:i] + (-1,) + ones[i + 1:]) for i, x in enumerate(xi)]
    if indexing == "xy" and n > 1:
        out[0] = reshape(out[0], (1, -1) + ones[2:])
        out[1] = reshape(out[1], (-1, 1) + ones[2:])
    if not sparse:
        shape = np.broadcast_shapes(*(o.shape for o in out))
        out = [broadcast_to(o, shape) for o in out]
    if copy:
        out = [Tracer(o.value, ctx) for o in out]      # fresh arrays, not views of the inputs
    return tuple(out)


# -- polynomials --------------------------------------------------------------------------------
@implements(np.polyval)
def polyval(p, x):
    """numpy's Horner loop, y = y * x + pv from zeros_like(x), unrolled over the coefficients (each a
    0-d array of p's dtype, as numpy's, so it promotes as an array does)."""
    ctx = context_of(p, x)
    if isinstance(p, Tracer):
        if p.ndim != 1:
            raise UnsupportedOp(f"np.polyval needs p as a 1-d array or a list of numbers, got {p.value.type} "
                                f"({ctx.where()})")
        coefficients = [p[i] for i in range(static_length(p, 0, "np.polyval"))]
    else:
        values = np.asarray(p)
        if values.ndim != 1:
            raise UnsupportedOp(f"np.polyval needs p as a 1-d array or a list of numbers ({ctx.where()})")
        coefficients = [ctx.constant(v) for v in values]
    x = ctx.lift(x)
    y = zeros_like(x)
    for pv in coefficients:
        y = y * x + pv
    return y


# -- convolution ----------------------------------------------------------------------------------
def _correlated(ctx, long: Tracer, short: Tracer, mode: str, name: str) -> Tracer:
    """numpy's _pyarray_correlate: out[k] = sum_j long[k + j - left] * short[j] over the j that fall
    inside `long` (the others are left out, not multiplied by zero: an inf there stays out of the sum)."""
    n1, n2 = static_length(long, 0, name), static_length(short, 0, name)
    if mode == "valid":
        length, left = n1 - n2 + 1, 0
    elif mode == "same":
        length, left = n1, n2 // 2
    else:
        length, left = n1 + n2 - 1, n2 - 1
    index = np.arange(length)[:, None] + np.arange(n2)[None, :] - left
    inside = (index >= 0) & (index < n1)
    gathered = take(long, ctx.constant(np.clip(index, 0, n1 - 1)), axis=0)
    if long.dtype.kind == "b":
        return np.any(gathered & short & ctx.constant(inside), axis=1)
    # -0.0 is the additive identity: x + -0.0 is x, bit for bit, a -0.0 included
    zero = ctx.constant(np.asarray(complex(-0.0, -0.0) if long.dtype.kind == "c" else -0.0 if long.dtype.kind == "f"
                                   else 0).astype(long.dtype))
    products = np.where(ctx.constant(inside), gathered * short, zero)
    return np.sum(products, axis=1, dtype=long.dtype)


def _conv_operands(a, v, name: str, mode) -> tuple[Tracer, Tracer]:
    ctx = context_of(a, v)
    if mode not in ("full", "same", "valid"):
        raise TraceError(f"{name}: mode must be 'full', 'same' or 'valid', got {mode!r} ({ctx.where()})")
    x, y = ctx.lift(a), ctx.lift(v)
    if x.ndim > 1 or y.ndim > 1:
        raise TraceError(f"{name}: object too deep for desired array; both operands must be 1-d, got "
                         f"{x.value.type} and {y.value.type} ({ctx.where()})")
    x, y = reshape(x, (-1,)), reshape(y, (-1,))
    dtype = np.result_type(x.dtype, y.dtype)
    x, y = cast(x, dtype), cast(y, dtype)
    for operand, which in ((x, "first"), (y, "second")):
        if static_length(operand, 0, name) == 0:
            raise TraceError(f"{name}: the {which} array argument cannot be empty ({ctx.where()})")
    return x, y


@implements(np.convolve)
def convolve(a, v, mode="full"):
    """numpy's: the longer operand first, correlated with the shorter one reversed."""
    x, y = _conv_operands(a, v, "np.convolve", mode)
    if y.shape[0] > x.shape[0]:
        x, y = y, x
    return _correlated(x.ctx, x, y[::-1], mode, "np.convolve")


@implements(np.correlate)
def correlate(a, v, mode="valid"):
    """numpy's correlate2: a correlated with conj(v); with v the longer, the two swapped and the
    result reversed, as numpy does."""
    x, y = _conv_operands(a, v, "np.correlate", mode)
    if y.dtype.kind == "c":
        y = np.conj(y)
    if y.shape[0] > x.shape[0]:
        return _correlated(x.ctx, y, x, mode, "np.correlate")[::-1]
    return _correlated(x.ctx, x, y, mode, "np.correlate")


# -- interpolation ------------------------------------------------------------------------------------
def _interp_end(ctx, value, default: Tracer) -> Tracer:
    if value is None:
        return default
    end = ctx.lift(value)
    if end.ndim != 0:
        raise TraceError(f"np.interp: left and right must be numbers ({ctx.where()})")
    return cast(no_complex(end, "np.interp's left/right"), np.float64)


@implements(np.interp)
def interp(x, xp, fp, left=None, right=None, period=None):
    """numpy's compiled interp, in float64: left/right outside [xp[0], xp[-1]], fp[j] at a point, else
    slope * (x - xp[j]) + fp[j] (from xp[j + 1] when that is NaN). xp must be increasing, as numpy
    asks; the interval is the count of xp at or below x (len(x) * len(xp) comparisons)."""
    ctx = context_of(x, xp, fp, left, right)
    refuse(ctx, "np.interp", period=period)
    z, xs, fs = (no_complex(ctx.lift(v), "np.interp") for v in (x, xp, fp))
    z, xs, fs = (cast(v, np.float64) for v in (z, xs, fs))
    if xs.ndim != 1 or fs.ndim != 1 or xs.shape != fs.shape:
        raise TraceError(f"np.interp: xp and fp must be 1-d sequences of the same length, got "
                         f"{xs.value.type} and {fs.value.type} ({ctx.where()})")
    m = static_length(xs, 0, "np.interp")
    if m == 0:
        raise TraceError(f"np.interp: array of sample points is empty ({ctx.where()})")
    lval, rval = _interp_end(ctx, left, fs[0]), _interp_end(ctx, right, fs[m - 1])
    if m == 1:
        return np.where(z < xs[0], lval, np.where(z > xs[0], rval, fs[0]))
    j = np.sum(xs <= z[..., None], axis=-1, dtype=np.int64) - 1
    inner = np.clip(j, 0, m - 2)
    slopes = (fs[1:] - fs[:-1]) / (xs[1:] - xs[:-1])
    slope, x0, x1, f0, f1 = (take(v, inner) for v in (slopes, xs[:-1], xs[1:], fs[:-1], fs[1:]))
    line = slope * (z - x0) + f0
    line = np.where(np.isnan(line), slope * (z - x1) + f1, line)
    line = np.where(np.isnan(line) & (f0 == f1), f0, line)
    at = np.where(j == m - 1, fs[m - 1], np.where(x0 == z, f0, line))
    out = np.where(z < xs[0], lval, np.where(z > xs[m - 1], rval, at))
    return np.where(np.isnan(z), z, out)

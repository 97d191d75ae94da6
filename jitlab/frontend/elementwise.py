"""numpy functions that act element by element, traced as compositions of ufuncs and selects:
np.isclose and np.allclose (numpy's formula), np.nan_to_num, np.polyval (numpy's Horner loop,
unrolled over the coefficients) and np.interp (numpy's formula, its interval found by counting the
points at or below each value).

They are exact, bit for bit, where numpy's own definitions are compositions of elementwise ufuncs.
"""

from __future__ import annotations

import numpy as np

from ..errors import TraceError, UnsupportedOp
from .numpy_api import context_of, implements, take, zeros_like
from .operands import cast, no_complex, refuse, scalar_constant, static_length
from .tracer import Tracer


# -- closeness -------------------------------------------------------------------------------------
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


# -- NaN and infinities ----------------------------------------------------------------------------
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


# -- polynomials -----------------------------------------------------------------------------------
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


# -- interpolation ---------------------------------------------------------------------------------
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

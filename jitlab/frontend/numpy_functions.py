"""numpy functions traced as compositions of existing `np` ops (diff, roll, diagonal, diag, trace,
tril/triu, cross, cov, corrcoef, linalg.norm, histogram, bincount, searchsorted, and the ufunc
methods outer, reduce and accumulate), and np.linalg's inv, det, solve, cholesky and svdvals as
library ops (jitlab/dialects/np/linalg.py).

Each is exact where numpy's own definition is (slices, gathers, masks, comparisons); the sums
follow the reduction ops' order, so float results agree with numpy to rounding.
"""

from __future__ import annotations

import builtins

import numpy as np

from ..errors import TraceError, UnsupportedOp
from .numpy_api import (
    REDUCE_UFUNCS,
    astype,
    concatenate,
    context_of,
    implements,
    normalize_axes,
    normalize_axis,
    reduce_over,
    reshape,
    transpose,
)
from .operands import cast, no_complex, promoted, static_length
from .tracer import Tracer


def _along(x: Tracer, axis: int, index) -> Tracer:
    return x[(slice(None),) * axis + (index,)]


# -- differences and shifts ---------------------------------------------------------------
@implements(np.diff)
def diff(a, n=1, axis=-1, prepend=np._NoValue, append=np._NoValue):
    ctx = context_of(a, prepend, append)
    x = ctx.lift(a)
    if n == 0:
        return x
    if n < 0:
        raise TraceError(f"np.diff: order must be non-negative, got {n} ({ctx.where()})")
    if x.ndim == 0:
        raise TraceError(f"np.diff needs an array of rank >= 1 ({ctx.where()})")
    axis = normalize_axis(x, axis)
    parts = []
    for extra in (prepend, append):
        if extra is np._NoValue:
            parts.append([])
            continue
        e = ctx.lift(extra)
        if e.ndim == 0:
            e = np.broadcast_to(e, x.shape[:axis] + (1,) + x.shape[axis + 1:])
        parts.append([e])
    if parts[0] or parts[1]:
        x = concatenate(parts[0] + [x] + parts[1], axis=axis)
    for _ in range(n):
        hi, lo = _along(x, axis, slice(1, None)), _along(x, axis, slice(None, -1))
        x = np.not_equal(hi, lo) if x.dtype.kind == "b" else np.subtract(hi, lo)
    return x


@implements(np.roll)
def roll(a, shift, axis=None):
    x = context_of(a).lift(a)
    if axis is None:
        return reshape(roll(reshape(x, (-1,)), shift, 0), x.shape)
    shifts = (shift,) if np.ndim(shift) == 0 else tuple(shift)
    axes = (axis,) if np.ndim(axis) == 0 else tuple(axis)
    shifts, axes = np.broadcast_arrays(np.asarray(shifts), np.asarray(axes))
    total: dict[int, int] = {}
    for s, ax in zip(shifts.ravel(), axes.ravel()):
        ax = normalize_axis(x, int(ax))
        total[ax] = total.get(ax, 0) + int(s)
    out = x
    for ax, s in total.items():
        n = static_length(x, ax, "np.roll")
        s = s % n if n else 0
        if s:
            out = concatenate([_along(out, ax, slice(n - s, None)), _along(out, ax, slice(None, n - s))], axis=ax)
    return out if out is not x else Tracer(x.value, x.ctx)


# -- matrices ----------------------------------------------------------------------------
def _tri_mask(x: Tracer, k: int, lower: bool) -> Tracer:
    n, m = static_length(x, x.ndim - 2, "np.tril/np.triu"), static_length(x, x.ndim - 1, "np.tril/np.triu")
    mask = np.tri(n, m, k, dtype=bool)
    return x.ctx.constant(mask if lower else ~mask)


def _masked(x: Tracer, mask: Tracer) -> Tracer:
    return x.ctx.op("np.where", np.broadcast_to(mask, x.shape).value, x.value,
                    np.broadcast_to(x.ctx.constant(0, x.dtype), x.shape).value)


@implements(np.tril)
def tril(m, k=0):
    x = context_of(m).lift(m)
    if x.ndim < 2:
        raise UnsupportedOp(f"np.tril of a rank-{x.ndim} array is not supported ({x.ctx.where()})")
    return _masked(x, _tri_mask(x, int(k), True))


@implements(np.triu)
def triu(m, k=0):
    x = context_of(m).lift(m)
    if x.ndim < 2:
        raise UnsupportedOp(f"np.triu of a rank-{x.ndim} array is not supported ({x.ctx.where()})")
    return _masked(x, _tri_mask(x, int(k) - 1, False))


def _diagonal(x: Tracer, offset: int, name: str = "np.diagonal") -> Tracer:
    """The diagonal of the last two axes, gathered by constant index arrays."""
    n, m = static_length(x, x.ndim - 2, name), static_length(x, x.ndim - 1, name)
    rows = builtins.max(0, builtins.min(n, m - offset) if offset >= 0 else builtins.min(n + offset, m))
    start = np.arange(rows) + builtins.max(0, -offset)
    if rows == 0:
        return reshape(x[..., :0, :0], tuple(x.shape[:-2]) + (0,))
    return x[..., start, start + offset]


@implements(np.diagonal)
def diagonal(a, offset=0, axis1=0, axis2=1):
    x = context_of(a).lift(a)
    if x.ndim < 2:
        raise TraceError(f"np.diagonal needs an array of rank >= 2 ({x.ctx.where()})")
    i, j = normalize_axis(x, axis1), normalize_axis(x, axis2)
    if i == j:
        raise TraceError(f"np.diagonal: axis1 and axis2 are the same ({x.ctx.where()})")
    return _diagonal(transpose(x, [d for d in range(x.ndim) if d not in (i, j)] + [i, j]), int(offset))


@implements(np.diag)
def diag(v, k=0):
    x = context_of(v).lift(v)
    if x.ndim == 2:
        return _diagonal(x, int(k), "np.diag")
    if x.ndim != 1:
        raise TraceError(f"np.diag: input must be 1- or 2-d, got rank {x.ndim} ({x.ctx.where()})")
    n, k = static_length(x, 0, "np.diag"), int(k)
    size = n + abs(k)
    # row i of the result holds v at column i + k: each column j takes v[j - k] (v[j] below the diagonal)
    row = np.pad(x, (builtins.max(k, 0), builtins.max(-k, 0)))
    return _masked(np.broadcast_to(row[None, :], (size, size)), x.ctx.constant(np.eye(size, size, k, dtype=bool)))


@implements(np.trace)
def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    x = context_of(a).lift(a)
    if out is not None:
        raise UnsupportedOp(f"np.trace(out=...) is not supported ({x.ctx.where()})")
    if x.ndim < 2:
        raise TraceError(f"np.trace needs an array of rank >= 2 ({x.ctx.where()})")
    i, j = normalize_axis(x, axis1), normalize_axis(x, axis2)
    if i == j:
        raise TraceError(f"np.trace: axis1 and axis2 are the same ({x.ctx.where()})")
    rest = [d for d in range(x.ndim) if d not in (i, j)]
    moved = transpose(x, rest + [i, j])
    return np.sum(_diagonal(moved, int(offset), "np.trace"), axis=-1, dtype=dtype)


@implements(np.cross)
def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    ctx = context_of(a, b)
    x, y = promoted([ctx.lift(a), ctx.lift(b)])
    if axis is not None:
        axisa = axisb = axisc = axis
    x, y = np.moveaxis(x, axisa, -1), np.moveaxis(y, axisb, -1)
    if x.shape[-1] not in (2, 3) or y.shape[-1] not in (2, 3):
        raise TraceError(f"np.cross: vectors must have 2 or 3 components, got {x.shape[-1]} and "
                         f"{y.shape[-1]} ({ctx.where()})")
    if x.dtype.kind == "b":
        raise TraceError(f"np.cross of bool arrays: numpy has no subtract for bools ({ctx.where()})")
    c = [x[..., i] for i in range(x.shape[-1])]
    d = [y[..., i] for i in range(y.shape[-1])]
    a0, a1, a2 = c + [0] * (3 - len(c))     # a 2-vector has z = 0
    b0, b1, b2 = d + [0] * (3 - len(d))
    z = a0 * b1 - a1 * b0
    if len(c) == 2 and len(d) == 2:
        return z
    parts = [a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, z]
    shape = np.broadcast_shapes(*(p.shape for p in parts))
    out = np.stack([np.broadcast_to(p, shape) for p in parts], axis=-1)
    return np.moveaxis(out, -1, axisc)


# -- statistics --------------------------------------------------------------------------
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
    stddev = np.sqrt(_diagonal(c, 0))
    c = c / stddev[:, None] / stddev[None, :]
    return np.clip(c, -1, 1)


@implements(np.linalg.norm)
def norm(x, ord=None, axis=None, keepdims=False):
    v = context_of(x).lift(x)
    where = v.ctx.where()
    if v.dtype.kind == "c":
        matrix = (axis is None and v.ndim == 2 and ord is not None) or (axis is not None and np.ndim(axis) == 1
                                                                        and len(axis) == 2)
        if matrix and ord in (2, -2, "nuc"):
            no_complex(v, f"np.linalg.norm(ord={ord!r}) of a matrix")
        v = np.abs(v)       # every other norm is that of the magnitudes
    if v.dtype.kind not in "f":
        v = astype(v, np.float64)
    if axis is None and ord is None:
        out = np.sqrt(np.sum(v * v))
        return reshape(out, (1,) * v.ndim) if keepdims else out
    if axis is None:
        if v.ndim not in (1, 2):
            raise TraceError(f"np.linalg.norm: improper number of dimensions to norm ({where})")
        axis = tuple(range(v.ndim))
    axes = normalize_axes(v, axis)
    if len(axes) == 1:
        a = np.abs(v)
        if ord in (None, 2):
            return np.sqrt(np.sum(v * v, axis=axes, keepdims=keepdims))
        if ord == np.inf:
            return np.max(a, axis=axes, keepdims=keepdims)
        if ord == -np.inf:
            return np.min(a, axis=axes, keepdims=keepdims)
        if ord == 0:
            return np.sum(astype(v != 0, v.dtype), axis=axes, keepdims=keepdims)
        if ord == 1:
            return np.sum(a, axis=axes, keepdims=keepdims)
        if isinstance(ord, str):
            raise TraceError(f"np.linalg.norm: invalid norm order {ord!r} for vectors ({where})")
        return np.sum(a ** ord, axis=axes, keepdims=keepdims) ** (1.0 / ord)
    if len(axes) != 2:
        raise TraceError(f"np.linalg.norm: improper number of dimensions to norm ({where})")
    row, col = normalize_axis(v, axis[0]), normalize_axis(v, axis[1])
    a = np.abs(v)
    if ord in (None, "fro", "f"):
        out = np.sqrt(np.sum(v * v, axis=(row, col), keepdims=keepdims))
    elif ord in (1, -1, np.inf, -np.inf):
        summed, other = (row, col) if ord in (1, -1) else (col, row)
        sums = np.sum(a, axis=summed, keepdims=True)
        out = (np.max if ord > 0 else np.min)(sums, axis=other, keepdims=True)
        if not keepdims:
            out = np.squeeze(out, axis=(row, col))
    elif ord in (2, -2, "nuc"):
        last = transpose(v, [d for d in range(v.ndim) if d not in (row, col)] + [row, col])
        s = svdvals(last)
        out = np.sum(s, axis=-1) if ord == "nuc" else (np.max if ord == 2 else np.min)(s, axis=-1)
        if keepdims:
            out = np.expand_dims(out, (row, col))
    else:
        raise TraceError(f"np.linalg.norm: invalid norm order {ord!r} for matrices ({where})")
    return out


# -- counting ---------------------------------------------------------------------------
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


# -- ufunc methods ------------------------------------------------------------------------
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
        shifted = _along(x, axis, slice(None, n - step))
        x = concatenate([_along(x, axis, slice(None, step)), ufunc(_along(x, axis, slice(step, None)), shifted)],
                        axis=axis)
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
    if ufunc not in REDUCE_UFUNCS:
        raise UnsupportedOp(f"np.{name}.reduce is not supported ({ctx.where()}); jitlab reduces add, multiply, "
                            "maximum, minimum, logical_and and logical_or")
    initial, where = kwargs.get("initial", np._NoValue), kwargs.get("where", True)
    x = ctx.lift(inputs[0])
    if where is not True:
        fill = ufunc.identity if initial is np._NoValue else initial
        if fill is None:
            raise TraceError(f"np.{name}.reduce(where=...) needs initial=, as numpy does ({ctx.where()})")
        x = np.where(where, x, cast(ctx.lift(fill, x), x.dtype))
    result = reduce_over(REDUCE_UFUNCS[ufunc], x, kwargs.get("axis", 0), kwargs.get("keepdims", False),
                     kwargs.get("dtype"))
    if initial is np._NoValue or initial is None:
        return result
    return cast(ufunc(result, initial), result.dtype)


UFUNC_METHODS = {"outer": ufunc_outer, "accumulate": ufunc_accumulate, "reduce": ufunc_reduce}


# -- linear algebra: library kernels ------------------------------------------------------
def _linalg_operand(a, name: str, complex_ok: bool = False) -> Tracer:
    """a as LAPACK takes it: float32/64 (complex too where the result keeps numpy's dtype), at least 2-d."""
    x = context_of(a).lift(a)
    if not complex_ok:
        no_complex(x, name)
    if x.dtype.kind == "f" and x.dtype.itemsize < 4:
        raise TraceError(f"{name}: array type {x.dtype} is unsupported in linalg ({x.ctx.where()})")
    if x.dtype.kind not in "fc":
        x = cast(x, np.float64)     # numpy solves integer and bool matrices in float64
    if x.ndim < 2:
        raise TraceError(f"{name}: {x.ndim}-dimensional array given; it must be at least two-dimensional "
                         f"({x.ctx.where()})")
    return x


@implements(np.linalg.cholesky)
def cholesky(a, /, *, upper=False):
    x = _linalg_operand(a, "np.linalg.cholesky", complex_ok=True)
    low = x.ctx.op("np.cholesky", x.value)
    return np.swapaxes(low, -1, -2) if upper else low


@implements(np.linalg.inv)
def inv(a):
    x = _linalg_operand(a, "np.linalg.inv", complex_ok=True)
    return x.ctx.op("np.inv", x.value)


@implements(np.linalg.det)
def det(a):
    x = _linalg_operand(a, "np.linalg.det", complex_ok=True)
    return x.ctx.op("np.det", x.value)


@implements(np.linalg.solve)
def solve(a, b):
    ctx = context_of(a, b)
    x = _linalg_operand(a, "np.linalg.solve", complex_ok=True)
    y = ctx.lift(b)
    x, y = promoted([x, y if y.dtype.kind in "fc" else cast(y, np.float64)])
    if y.ndim == 1:             # numpy 2: a 1-d b is one vector, solved against every matrix of a
        if x.ndim == 2:
            return ctx.op("np.solve", x.value, y.value)
        return solve(x, y[:, None])[..., 0]
    batch = np.broadcast_shapes(tuple(x.shape[:-2]), tuple(y.shape[:-2]))
    x = np.broadcast_to(x, batch + tuple(x.shape[-2:]))
    y = np.broadcast_to(y, batch + tuple(y.shape[-2:]))
    return ctx.op("np.solve", x.value, y.value)


@implements(np.linalg.svdvals)
def svdvals(x, /):
    a = _linalg_operand(x, "np.linalg.svdvals")
    return a.ctx.op("np.svdvals", a.value)


@implements(np.linalg.svd)
def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    if compute_uv:
        raise UnsupportedOp(f"np.linalg.svd with compute_uv=True is not supported ({context_of(a).where()}); "
                            "jitlab computes singular values only: np.linalg.svd(a, compute_uv=False)")
    return svdvals(a)

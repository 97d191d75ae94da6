"""Linear algebra: np.kron and np.cross as broadcast products, np.linalg.norm from sums (and singular
values for the 2-norms of matrices), and np.linalg's inv, det, solve, cholesky and svdvals as library
ops (jitlab/dialects/np/linalg.py). np.dot, np.tensordot and np.outer are in numpy_api.py, np.einsum
in einsum.py.
"""

from __future__ import annotations

import builtins

import numpy as np

from ..errors import TraceError, UnsupportedOp
from .numpy_api import astype, context_of, implements, normalize_axes, normalize_axis, reshape, transpose
from .operands import cast, no_complex, promoted
from .tracer import Tracer


# -- products --------------------------------------------------------------------------------------
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


# -- norms -----------------------------------------------------------------------------------------
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


# -- library kernels -------------------------------------------------------------------------------
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

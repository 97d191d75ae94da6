"""Matrices from arrays, and their parts: the triangles np.tril and np.triu (a constant mask), the
diagonals np.diagonal and np.diag (a gather by constant index arrays) and np.trace, and np.meshgrid's
coordinate matrices (reshapes and broadcasting).
"""

from __future__ import annotations

import builtins

import numpy as np

from ..errors import TraceError, UnsupportedOp
from .numpy_api import broadcast_to, context_of, implements, normalize_axis, reshape, transpose
from .operands import static_length
from .tracer import Tracer


# -- triangles -------------------------------------------------------------------------------------
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


# -- diagonals -------------------------------------------------------------------------------------
def matrix_diagonal(x: Tracer, offset: int, name: str = "np.diagonal") -> Tracer:
    """The diagonal of the last two axes (np.linalg.diagonal), gathered by constant index arrays."""
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
    return matrix_diagonal(transpose(x, [d for d in range(x.ndim) if d not in (i, j)] + [i, j]), int(offset))


@implements(np.diag)
def diag(v, k=0):
    x = context_of(v).lift(v)
    if x.ndim == 2:
        return matrix_diagonal(x, int(k), "np.diag")
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
    return np.sum(matrix_diagonal(moved, int(offset), "np.trace"), axis=-1, dtype=dtype)


# -- coordinate matrices ---------------------------------------------------------------------------
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

"""numpy functions of an array and its shifted copies along one axis: np.diff (differences of
neighbours), np.roll (a rotation, two slices joined), and np.convolve and np.correlate (a gather of
the longer operand by a constant index matrix, a masked product and a sum).

Differences and rotations are exact; the sums follow the reduction ops' order, so they agree with
numpy to rounding.
"""

from __future__ import annotations

import numpy as np

from ..errors import TraceError
from .indexing import index_along
from .numpy_api import concatenate, context_of, implements, normalize_axis, reshape, take
from .operands import cast, static_length
from .tracer import Tracer


# -- differences and rotations ---------------------------------------------------------------------
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
        hi, lo = index_along(x, axis, slice(1, None)), index_along(x, axis, slice(None, -1))
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
            tail, head = index_along(out, ax, slice(n - s, None)), index_along(out, ax, slice(None, n - s))
            out = concatenate([tail, head], axis=ax)
    return out if out is not x else Tracer(x.value, x.ctx)


# -- convolution -----------------------------------------------------------------------------------
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

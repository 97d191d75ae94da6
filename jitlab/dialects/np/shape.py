"""Shape ops of the `np` dialect. Views (reshape, squeeze, expand_dims) move no data;
injective ops (transpose, slice, broadcast_to, ...) read each output element from one
input element, so fusion folds them into indexing."""

from __future__ import annotations

import numpy as np

from ...ir.attributes import FLOAT, INT, INTS, SHAPE, one_of
from ...ir.opdef import Trait, defop, static_int
from ...ir.shapes import Dim, Sym, exact_div, num_elements
from ...ir.types import TensorType
from .common import INT as INT_KINDS
from .common import attr, check_axes, check_dtype, normalize_axis, same_dtype

VIEW = (Trait.PURE, Trait.VIEW)


def _contiguous(a) -> np.ndarray:
    """A C-contiguous array of `a`, keeping rank 0 (np.ascontiguousarray makes it rank 1)."""
    return np.asarray(a, order="C")


INJECTIVE = (Trait.PURE, Trait.INJECTIVE)


def _reshape_infer(ctx, types, attrs):
    (t,) = types
    shape = attrs["shape"]
    if any(isinstance(d, int) and d < 0 for d in shape):
        raise ctx.error(f"shape {list(shape)} has a negative dim (the tracer resolves -1)")
    ctx.equal(num_elements(t.shape), num_elements(shape), f"element count of {t} reshaped to {list(shape)}")
    return [t.with_shape(shape)]


defop("np.reshape", attrs={"shape": attr(SHAPE)}, traits=VIEW, infer=_reshape_infer,
      reference=lambda x, shape: x.reshape(shape), operand_names=("x",),
      doc="The same elements in row-major order under a new shape.")


def _transpose_infer(ctx, types, attrs):
    (t,) = types
    perm = attrs["perm"]
    if sorted(perm) != list(range(t.rank)):
        raise ctx.error(f"perm {list(perm)} is not a permutation of the {t.rank} axes")
    return [t.with_shape(tuple(t.shape[p] for p in perm))]


defop("np.transpose", attrs={"perm": attr(INTS)}, traits=INJECTIVE, infer=_transpose_infer,
      reference=lambda x, perm: _contiguous(np.transpose(x, perm)), operand_names=("x",),
      doc="Permutes axes: out.shape[i] = x.shape[perm[i]].")


def _broadcast_infer(ctx, types, attrs):
    (t,) = types
    shape = tuple(attrs["shape"])
    if len(shape) < t.rank:
        raise ctx.error(f"cannot broadcast {t} to the lower rank {list(shape)}")
    for i, d in enumerate(t.shape):
        target = shape[len(shape) - t.rank + i]
        if d != 1:
            ctx.equal(d, target, f"broadcasting {t} to {list(shape)}")
    return [t.with_shape(shape)]


defop("np.broadcast_to", attrs={"shape": attr(SHAPE)}, traits=INJECTIVE, infer=_broadcast_infer,
      reference=lambda x, shape: _contiguous(np.broadcast_to(x, shape)),
      operand_names=("x",), doc="Repeats size-1 (and missing leading) dims up to `shape`.")


def _expand_infer(ctx, types, attrs):
    (t,) = types
    rank = t.rank + len(attrs["axes"])
    axes = check_axes(ctx, attrs["axes"], rank)
    dims = iter(t.shape)
    return [t.with_shape(tuple(1 if i in axes else next(dims) for i in range(rank)))]


defop("np.expand_dims", attrs={"axes": attr(INTS)}, traits=VIEW, infer=_expand_infer,
      reference=lambda x, axes: np.expand_dims(x, tuple(axes)), operand_names=("x",),
      doc="Inserts size-1 dims at `axes` (positions in the result).")


def _squeeze_infer(ctx, types, attrs):
    (t,) = types
    axes = check_axes(ctx, attrs["axes"], t.rank)
    for a in axes:
        if t.shape[a] != 1:
            raise ctx.error(f"cannot squeeze axis {a} of {t}: its size is {t.shape[a]}, not 1")
    return [t.with_shape(tuple(d for i, d in enumerate(t.shape) if i not in axes))]


defop("np.squeeze", attrs={"axes": attr(INTS)}, traits=VIEW, infer=_squeeze_infer,
      reference=lambda x, axes: np.squeeze(x, tuple(axes)), operand_names=("x",),
      doc="Removes size-1 dims at `axes`.")


def _concat_infer(ctx, types, attrs):
    dtype = same_dtype(ctx, types)
    first = types[0]
    axis = normalize_axis(ctx, attrs["axis"], first.rank)
    if axis != attrs["axis"]:
        raise ctx.error(f"axis must be stored non-negative, got {attrs['axis']}")
    total: Dim = 0
    for k, t in enumerate(types):
        if t.rank != first.rank:
            raise ctx.error(f"operand {k} has rank {t.rank}, operand 0 has rank {first.rank}")
        for i, (a, b) in enumerate(zip(first.shape, t.shape)):
            if i != axis:
                ctx.equal(a, b, f"dim {i} of operand {k} must match operand 0")
        total = total + t.shape[axis]
    return [TensorType(tuple(total if i == axis else d for i, d in enumerate(first.shape)), dtype)]


defop("np.concatenate", operands=(1, None), attrs={"axis": attr(INT)}, traits=INJECTIVE,
      infer=_concat_infer, reference=lambda *xs, axis: np.concatenate(xs, axis=axis),
      doc="Joins tensors along an existing axis.")


def _stack_infer(ctx, types, attrs):
    dtype = same_dtype(ctx, types)
    first = types[0]
    axis = normalize_axis(ctx, attrs["axis"], first.rank + 1)
    if axis != attrs["axis"]:
        raise ctx.error(f"axis must be stored non-negative, got {attrs['axis']}")
    for k, t in enumerate(types[1:], 1):
        if t.rank != first.rank:
            raise ctx.error(f"operand {k} has rank {t.rank}, operand 0 has rank {first.rank}")
        for i, (a, b) in enumerate(zip(first.shape, t.shape)):
            ctx.equal(a, b, f"dim {i} of operand {k} must match operand 0")
    shape = list(first.shape)
    shape.insert(axis, len(types))
    return [TensorType(tuple(shape), dtype)]


defop("np.stack", operands=(1, None), attrs={"axis": attr(INT)},
      traits=(Trait.PURE, Trait.INJECTIVE, Trait.COMPOSITE), infer=_stack_infer,
      reference=lambda *xs, axis: np.stack(xs, axis=axis),
      doc="Joins same-shaped tensors along a new axis.")


def _split_infer(ctx, types, attrs):
    (t,) = types
    axis = normalize_axis(ctx, attrs["axis"], t.rank)
    if axis != attrs["axis"]:
        raise ctx.error(f"axis must be stored non-negative, got {attrs['axis']}")
    sizes = attrs["sizes"]
    if not sizes:
        raise ctx.error("sizes must not be empty")
    ctx.equal(sum(sizes[1:], sizes[0]), t.shape[axis],
              f"the sizes {list(sizes)} must add up to dim {axis} of {t}")
    return [t.with_shape(tuple(s if i == axis else d for i, d in enumerate(t.shape))) for s in sizes]


def _split(x, axis, sizes):
    bounds = np.cumsum(sizes)[:-1]
    return tuple(_contiguous(p) for p in np.split(x, bounds, axis=axis))


defop("np.split", attrs={"axis": attr(INT), "sizes": attr(SHAPE)}, traits=INJECTIVE,
      infer=_split_infer, reference=_split, operand_names=("x",),
      doc="Cuts a tensor along `axis` into pieces of the given sizes.")


def slice_length(start: Dim, stop: Dim, step: int) -> Dim:
    """Number of indices start, start+step, ... before stop (indices are absolute)."""
    if isinstance(start, Sym) or isinstance(stop, Sym):
        span = stop - start if step > 0 else start - stop
        n = exact_div(span, abs(step)) if abs(step) != 1 else span
        if n is None:
            raise ValueError(f"cannot slice a symbolic span {span} with step {step}")
        return n
    if step > 0:
        return max(0, -(-(stop - start) // step))
    return max(0, -(-(start - stop) // -step))


def slice_infer(ctx, types, attrs):
    """np.slice's result type, its starts, stops and steps checked against the operand."""
    (t,) = types
    starts, stops, steps = attrs["starts"], attrs["stops"], attrs["steps"]
    if not len(starts) == len(stops) == len(steps) == t.rank:
        raise ctx.error(f"starts, stops and steps need one entry per dim of {t}")
    shape = []
    for i, (d, a, b, s) in enumerate(zip(t.shape, starts, stops, steps)):
        if s == 0:
            raise ctx.error(f"step of dim {i} is 0")
        if all(isinstance(v, int) for v in (d, a, b)):
            lo, hi = (0, d) if s > 0 else (-1, d - 1)
            if not (lo <= a <= hi and lo <= b <= hi):
                raise ctx.error(f"slice {a}:{b}:{s} is out of bounds for dim {i} of size {d} "
                                "(indices are stored absolute; a negative step stops at -1 to reach 0)")
        try:
            shape.append(slice_length(a, b, s))
        except ValueError as e:
            raise ctx.error(str(e)) from None
    return [t.with_shape(tuple(shape))]


def _empty(start: Dim, stop: Dim, step: int) -> bool:
    return isinstance(start, int) and isinstance(stop, int) and slice_length(start, stop, step) == 0


def _slice(x, starts, stops, steps):
    # Indices are absolute: -1 means "before 0" (a negative step's stop, or its start on an empty
    # range), never numpy's "the last one"; an empty range keeps no element.
    index = tuple(slice(0, 0) if _empty(a, b, s) else slice(a, None if b == -1 else b, s)
                  for a, b, s in zip(starts, stops, steps))
    return _contiguous(x[index])


defop("np.slice", attrs={"starts": attr(SHAPE), "stops": attr(SHAPE), "steps": attr(INTS)},
      traits=INJECTIVE, infer=slice_infer, reference=_slice, operand_names=("x",),
      doc="x[start:stop:step] per dim, indices absolute (no wrap-around).")


def _take_infer(ctx, types, attrs):
    t, idx = types
    check_dtype(ctx, idx, INT_KINDS, "the indices")
    axis = normalize_axis(ctx, attrs["axis"], t.rank)
    if axis != attrs["axis"]:
        raise ctx.error(f"axis must be stored non-negative, got {attrs['axis']}")
    return [t.with_shape(t.shape[:axis] + idx.shape + t.shape[axis + 1:])]


def _take(x, indices, axis):
    from ...errors import InputError

    n = x.shape[axis]
    if indices.size and (indices.min() < -n or indices.max() >= n):
        raise InputError(f"np.take: an index is out of range for axis {axis} of size {n}")
    return np.take(x, indices, axis=axis)


defop("np.take", operands=2, attrs={"axis": attr(INT)}, traits=INJECTIVE, infer=_take_infer,
      reference=_take, operand_names=("x", "indices"),
      doc="Gathers slices of x along `axis` at integer indices (negative ones count from the end).")


def _pad_infer(ctx, types, attrs):
    (t,) = types
    pads = attrs["pads"]
    if len(pads) != 2 * t.rank:
        raise ctx.error(f"pads needs 2 entries (before, after) per dim of {t}, got {len(pads)}")
    if any(p < 0 for p in pads):
        raise ctx.error("pads must be non-negative (use slice to crop)")
    if attrs["mode"] == "reflect":
        for i, d in enumerate(t.shape):
            n = static_int(d, ctx, f"dim {i} under reflect padding")
            if max(pads[2 * i], pads[2 * i + 1]) >= max(n, 1) and (pads[2 * i] or pads[2 * i + 1]):
                raise ctx.error(f"reflect padding of dim {i} must be smaller than its size {n}")
    if attrs["mode"] == "edge" and any(t.shape[i] == 0 and (pads[2 * i] or pads[2 * i + 1])
                                       for i in range(t.rank)):
        raise ctx.error("edge padding needs a non-empty dim to repeat")
    return [t.with_shape(tuple(d + pads[2 * i] + pads[2 * i + 1] for i, d in enumerate(t.shape)))]


def _pad(x, pads, mode, value):
    if x.ndim == 0:                 # np.pad rejects an empty pad_width
        return x.copy()
    width = [(pads[2 * i], pads[2 * i + 1]) for i in range(x.ndim)]
    if mode == "constant":
        return np.pad(x, width, mode="constant", constant_values=np.asarray(value).astype(x.dtype))
    return np.pad(x, width, mode=mode)


defop("np.pad", attrs={"pads": attr(INTS, doc="(before, after) per dim, flattened"),
                       "mode": attr(one_of("constant", "edge", "reflect"), "constant"),
                       "value": attr(FLOAT, 0.0)},
      traits=INJECTIVE, infer=_pad_infer, reference=_pad, operand_names=("x",),
      doc="Pads each dim with a constant, its edge value, or its reflection.")


def _tile_infer(ctx, types, attrs):
    (t,) = types
    reps = attrs["reps"]
    if len(reps) != t.rank or any(r < 0 for r in reps):
        raise ctx.error(f"reps needs one non-negative entry per dim of {t}")
    return [t.with_shape(tuple(d * r for d, r in zip(t.shape, reps)))]


defop("np.tile", attrs={"reps": attr(INTS)}, traits=INJECTIVE, infer=_tile_infer,
      reference=lambda x, reps: np.tile(x, reps), operand_names=("x",),
      doc="Repeats the whole tensor reps[i] times along dim i.")

"""Gathers and scatters with integer index tensors (numpy's take_along_axis, and the
ONNX GatherND / ScatterElements / ScatterND forms), and the slice update that an
in-place `x[a:b, i] = v` becomes. Negative indices count from the
end; an index out of range is an InputError at run time, never a read out of bounds.
Scatters write in index order, so with repeated indices the last update wins (or all
are combined, with a reduction)."""

from __future__ import annotations

import numpy as np

from ...errors import InputError
from ...ir.attributes import INT, INTS, SHAPE, one_of
from ...ir.opdef import Trait, defop, static_int
from .common import INT as INT_KINDS
from .common import attr, check_dtype, normalize_axis, same_dtype
from .shape import slice_infer

REDUCTIONS = ("none", "add", "mul", "max", "min")
_UFUNCS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _wrap(indices: np.ndarray, size, op: str, what: str) -> np.ndarray:
    """Indices made non-negative, after checking they lie in [-size, size)."""
    size = np.asarray(size)
    if indices.size and (np.any(indices < -size) or np.any(indices >= size)):
        raise InputError(f"{op}: an index in {what} is out of range")
    return np.where(indices < 0, indices + size, indices).astype(np.int64)


def _stored_axis(ctx, axis: int, rank: int) -> int:
    if normalize_axis(ctx, axis, rank) != axis:
        raise ctx.error(f"axis must be stored non-negative, got {axis}")
    return axis


def _element_index(indices: np.ndarray, axis: int) -> tuple[np.ndarray, ...]:
    """Full coordinates for an element-wise gather/scatter: `indices` along axis, position elsewhere."""
    grid = list(np.indices(indices.shape, sparse=True))
    grid[axis] = indices
    return tuple(grid)


# -- take_along_axis (GatherElements) -------------------------------------------------
def _take_along_infer(ctx, types, attrs):
    x, idx = types
    check_dtype(ctx, idx, INT_KINDS, "the indices")
    axis = _stored_axis(ctx, attrs["axis"], x.rank)
    if idx.rank != x.rank:
        raise ctx.error(f"indices {idx} must have the rank of {x}")
    for i, (a, b) in enumerate(zip(x.shape, idx.shape)):
        if i != axis and isinstance(a, int) and isinstance(b, int) and b > a:
            raise ctx.error(f"dim {i} of the indices ({b}) exceeds the data's ({a})")
    return [x.with_shape(idx.shape)]


def _take_along(x, indices, axis):
    idx = _wrap(indices, x.shape[axis], "np.take_along_axis", f"axis {axis}")
    return x[_element_index(idx, axis)]


defop("np.take_along_axis", operands=2, attrs={"axis": attr(INT)}, traits=(Trait.PURE, Trait.INJECTIVE),
      infer=_take_along_infer, reference=_take_along, operand_names=("x", "indices"),
      doc="out[i..] = x[i.. with indices[i..] at axis]; the indices may be smaller than x off the axis.")


# -- gather_nd ------------------------------------------------------------------------
def _gather_nd_infer(ctx, types, attrs):
    x, idx = types
    check_dtype(ctx, idx, INT_KINDS, "the indices")
    b = attrs["batch_dims"]
    if idx.rank < 1 or not 0 <= b < min(x.rank, idx.rank):
        raise ctx.error(f"batch_dims {b} must be below the ranks of {x} and {idx}")
    k = static_int(idx.shape[-1], ctx, "the last dim of the indices")
    if b + k > x.rank:
        raise ctx.error(f"indices of depth {k} after {b} batch dims exceed the rank of {x}")
    for i in range(b):
        ctx.equal(x.shape[i], idx.shape[i], f"batch dim {i}")
    return [x.with_shape(idx.shape[:-1] + x.shape[b + k:])]


def _gather_nd(x, indices, batch_dims):
    b, k = batch_dims, indices.shape[-1]
    batch = int(np.prod(x.shape[:b], dtype=np.int64))
    idx = indices.reshape(batch, -1, k)
    idx = _wrap(idx, np.array(x.shape[b:b + k]), "np.gather_nd", "the indices")
    xb = x.reshape((batch,) + x.shape[b:])
    rows = np.arange(batch).reshape(-1, 1)
    out = xb[(rows,) + tuple(idx[..., j] for j in range(k))]
    return out.reshape(indices.shape[:-1] + x.shape[b + k:])


defop("np.gather_nd", operands=2, attrs={"batch_dims": attr(INT, 0)}, traits=(Trait.PURE, Trait.INJECTIVE),
      infer=_gather_nd_infer, reference=_gather_nd, operand_names=("x", "indices"),
      doc="Gathers slices of x at the coordinates in the last dim of indices, after batch_dims shared dims.")


# -- scatter_elements -------------------------------------------------------------------
def _scatter_elements_infer(ctx, types, attrs):
    x, idx, upd = types
    check_dtype(ctx, idx, INT_KINDS, "the indices")
    same_dtype(ctx, [x, upd])
    _take_along_infer(ctx, [x, idx], attrs)
    if upd.shape != idx.shape:
        raise ctx.error(f"updates {upd} must have the shape of the indices {idx}")
    return [x]


def _scatter(out: np.ndarray, coords: tuple[np.ndarray, ...], updates: np.ndarray, reduction: str) -> np.ndarray:
    """Writes `updates` at `coords` (flattened, in order) into `out`."""
    if reduction != "none":
        _UFUNCS[reduction].at(out, coords, updates)
        return out
    flat = np.ravel_multi_index(coords, out.shape).reshape(-1) if out.size else np.zeros(0, np.int64)
    values = updates.reshape(-1)
    # The last write to each position wins: keep each position's last occurrence.
    _, last = np.unique(flat[::-1], return_index=True)
    keep = flat.size - 1 - last
    np.put(out, flat[keep], values[keep])
    return out


def _scatter_elements(x, indices, updates, axis, reduction):
    idx = _wrap(indices, x.shape[axis], "np.scatter_elements", f"axis {axis}")
    coords = tuple(np.broadcast_to(c, idx.shape) for c in _element_index(idx, axis))
    return _scatter(np.array(x, copy=True), coords, updates, reduction)


_SCATTER_ATTRS = {"reduction": attr(one_of(*REDUCTIONS), "none")}

defop("np.scatter_elements", operands=3, attrs={"axis": attr(INT), **_SCATTER_ATTRS}, traits=(Trait.PURE,),
      infer=_scatter_elements_infer, reference=_scatter_elements, operand_names=("x", "indices", "updates"),
      doc="A copy of x with updates written (or combined) at indices along axis, element by element.")


# -- scatter_nd ---------------------------------------------------------------------------
def _scatter_nd_infer(ctx, types, attrs):
    x, idx, upd = types
    check_dtype(ctx, idx, INT_KINDS, "the indices")
    same_dtype(ctx, [x, upd])
    if idx.rank < 1:
        raise ctx.error(f"indices {idx} need a last dim of coordinates")
    k = static_int(idx.shape[-1], ctx, "the last dim of the indices")
    if k > x.rank:
        raise ctx.error(f"coordinates of depth {k} exceed the rank of {x}")
    want = idx.shape[:-1] + x.shape[k:]
    if len(want) != upd.rank:
        raise ctx.error(f"updates {upd} must have shape {list(want)}")
    for i, (a, b) in enumerate(zip(want, upd.shape)):
        ctx.equal(a, b, f"dim {i} of the updates")
    return [x]


def _scatter_nd(x, indices, updates, reduction):
    k = indices.shape[-1]
    idx = _wrap(indices.reshape(-1, k), np.array(x.shape[:k]), "np.scatter_nd", "the indices")
    rows = idx.shape[0]
    tail = x.shape[k:]
    inner = int(np.prod(tail, dtype=np.int64))
    # Each coordinate names a slice of `inner` elements; scatter them as elements of a 2-D view.
    out = np.array(x, copy=True).reshape(int(np.prod(x.shape[:k], dtype=np.int64)), inner)
    slot = np.ravel_multi_index(tuple(idx.T), x.shape[:k]) if rows else np.zeros(0, np.int64)
    coords = (np.repeat(slot, inner), np.tile(np.arange(inner), rows))
    return _scatter(out, coords, updates.reshape(-1), reduction).reshape(x.shape)


defop("np.scatter_nd", operands=3, attrs=dict(_SCATTER_ATTRS), traits=(Trait.PURE,),
      infer=_scatter_nd_infer, reference=_scatter_nd, operand_names=("x", "indices", "updates"),
      doc="A copy of x with slices of updates written (or combined) at the coordinates in indices.")


# -- update_slice ---------------------------------------------------------------------------
def _update_slice_infer(ctx, types, attrs):
    x, upd = types
    same_dtype(ctx, [x, upd])
    (region,) = slice_infer(ctx, [x], attrs)
    if upd.rank != x.rank:
        raise ctx.error(f"the update {upd} must have the rank of {x}")
    for i, (a, b) in enumerate(zip(region.shape, upd.shape)):
        ctx.equal(a, b, f"dim {i} of the update (the slice has shape {list(region.shape)})")
    return [x]


def _update_slice(x, update, starts, stops, steps):
    out = np.array(x, copy=True)
    out[tuple(slice(a, None if b == -1 else b, s) for a, b, s in zip(starts, stops, steps))] = update
    return out


defop("np.update_slice", operands=2,
      attrs={"starts": attr(SHAPE), "stops": attr(SHAPE), "steps": attr(INTS)}, traits=(Trait.PURE,),
      infer=_update_slice_infer, reference=_update_slice, operand_names=("x", "update"),
      doc="A copy of x with x[start:stop:step] (per dim, indices absolute as in np.slice) set to update.")

"""Indexing a traced array: basic indexing becomes one np.slice plus a reshape (a view);
one integer-array index becomes np.take.

On a symbolic dim only slices of the form `k:` / `:-m` / `k:-m` are allowed: their
length `B-k-m` must be non-negative at call time, which the input check enforces, so a
bound can never silently fall outside the array.
"""

from __future__ import annotations

import numpy as np

from ..errors import TraceError, UnsupportedOp
from ..ir.shapes import Dim, Sym
from .tracer import Tracer


def expand_key(x: Tracer, key) -> tuple:
    """`key` as a tuple with an entry for each dim of x (the ellipsis spelled out as slices), new axes (None) kept."""
    if not isinstance(key, tuple):
        key = (key,)
    consuming = sum(1 for k in key if k is not None and k is not Ellipsis)
    if sum(1 for k in key if k is Ellipsis) > 1:
        raise TraceError(f"an index can only have a single ellipsis ({x.ctx.where()})")
    if consuming > x.ndim:
        raise TraceError(f"too many indices for an array of rank {x.ndim} ({x.ctx.where()})")
    out = []
    for k in key:
        if k is Ellipsis:
            out.extend([slice(None)] * (x.ndim - consuming))
        else:
            out.append(k)
    if not any(k is Ellipsis for k in key):
        out.extend([slice(None)] * (x.ndim - consuming))
    return tuple(out)


def is_array_index(k) -> bool:
    """Whether the index entry `k` is an integer array (advanced indexing), not a slice or an int."""
    return isinstance(k, (Tracer, np.ndarray, list))


def _static_slice(x: Tracer, k: slice, n: int) -> tuple[int, int, int]:
    for v in (k.start, k.stop, k.step):
        if v is not None and not isinstance(v, (int, np.integer)):
            raise TraceError(f"slice bounds must be Python ints, got {v!r} ({x.ctx.where()}): a traced bound gives "
                             "a data-dependent shape; pass the value that decides it with static_argnums, or "
                             "gather with an index array (np.take(x, i + np.arange(k)))")
    start, stop, step = k.indices(n)
    return start, stop, step


def _symbolic_slice(x: Tracer, k: slice, n: Sym) -> tuple[Dim, Dim, int]:
    if k.step not in (None, 1):
        raise UnsupportedOp(f"a step other than 1 on symbolic dim {n} is not supported ({x.ctx.where()})")
    start = 0 if k.start is None else k.start
    stop = n if k.stop is None else k.stop
    if not (isinstance(start, int) and start >= 0) or not (stop is n or isinstance(stop, int) and stop < 0):
        raise UnsupportedOp(f"on symbolic dim {n} only slices k:, :-m and k:-m are supported, got "
                            f"{k.start}:{k.stop} ({x.ctx.where()})")
    return start, (n if stop is n else n + stop), 1


def array_index(x: Tracer, k) -> Tracer:
    """The array index `k` into x as a traced integer array (a constant bool mask as its positions)."""
    if isinstance(k, list):
        k = np.asarray(k)
    if isinstance(k, np.ndarray) and k.dtype == np.bool_:
        if k.ndim != 1:
            raise UnsupportedOp(f"indexing with a bool mask of rank {k.ndim} is not supported ({x.ctx.where()})")
        k = np.nonzero(k)[0]
    if isinstance(k, Tracer) and k.dtype.kind == "b":
        raise UnsupportedOp(f"indexing with a traced bool mask has a data-dependent shape; use np.where "
                            f"({x.ctx.where()})")
    idx = x.ctx.lift(k)
    if idx.dtype.kind not in "iu":
        raise TraceError(f"array indices must be integers, got {idx.dtype} ({x.ctx.where()})")
    return idx


def index_along(x: Tracer, axis: int, index) -> Tracer:
    """x[index] along `axis`, every axis before it whole: x[:, ..., :, index]."""
    return x[(slice(None),) * axis + (index,)]


def getitem(x: Tracer, key) -> Tracer:
    """x[key] for basic indexing plus at most one integer-array index; basic indexing gives a view."""
    mask = _traced_mask(key)
    if mask is not None:
        from .selection import select

        rest = key[1:] if isinstance(key, tuple) else ()
        if not all(k is Ellipsis or isinstance(k, slice) and k == slice(None) for k in rest):
            raise UnsupportedOp(f"a traced bool mask is supported as the only index (x[mask]) ({x.ctx.where()})")
        return select(x, x.ctx.lift(mask))
    key = expand_key(x, key)
    from . import dynamic_index, windows

    if windows.needs_window(key):
        return windows.getitem(x, key)
    if dynamic_index.is_dynamic(key):
        from .inplace import make_view

        return make_view(dynamic_index.getitem(x, key), x, lambda base: dynamic_index.getitem(base, key),
                         lambda base, new: dynamic_index.write(base, key, new), f"x[{key_text(key)}]", key)
    arrays = sum(1 for k in key if is_array_index(k))
    if arrays > 1 or arrays and any(isinstance(k, (int, np.integer)) for k in key):
        from .inplace import gathered

        return gathered(x, key)
    out = apply_key(x, key)
    if arrays or all(isinstance(k, (int, np.integer)) for k in key):
        return out          # numpy copies: advanced indexing, or a scalar picked by integers
    from .inplace import make_view, write_basic

    return make_view(out, x, lambda base: apply_key(base, key), lambda base, new: write_basic(base, key, new),
                     f"x[{key_text(key)}]", key)


def _traced_mask(key) -> Tracer | None:
    """The traced bool mask that leads `key`, if it has one."""
    first = key[0] if isinstance(key, tuple) and key else key
    return first if isinstance(first, Tracer) and first.dtype.kind == "b" else None


def key_text(key: tuple) -> str:
    """An expanded index as numpy code, for messages."""
    def one(k):
        if isinstance(k, slice):
            return ":".join("" if v is None else str(v) for v in (k.start, k.stop)) + \
                ("" if k.step is None else f":{k.step}")
        return "None" if k is None else "array" if is_array_index(k) else str(k)

    return ", ".join(one(k) for k in key)


def bounds(x: Tracer, key: tuple) -> tuple[list, list, list, list]:
    """Per dim of x its slice (start, stop, step); and per result dim group its layout entry."""
    ctx = x.ctx
    consuming = [k for k in key if k is not None]
    n_arrays = sum(1 for k in consuming if is_array_index(k))
    if n_arrays > 1:
        raise UnsupportedOp(f"indexing with more than one integer array is not supported ({ctx.where()})")
    if n_arrays and any(isinstance(k, (int, np.integer)) for k in consuming):
        raise UnsupportedOp("mixing an integer array index with integer indices is not supported; "
                            f"index in two steps ({ctx.where()})")
    starts, stops, steps = [], [], []
    layout: list = []          # per result dim group: "new", ("keep", d) or ("take", d, index)
    dim = 0
    for k in key:
        if k is None:
            layout.append("new")
            continue
        n = x.shape[dim]
        if isinstance(k, (bool, np.bool_)):
            raise UnsupportedOp(f"indexing with a bool scalar is not supported ({ctx.where()})")
        if isinstance(k, (int, np.integer)):
            if isinstance(n, Sym):
                raise UnsupportedOp(f"an integer index into symbolic dim {n} is not supported ({ctx.where()}): "
                                    f"its bound cannot be checked while tracing; slice it (x[{k}:{k + 1}] for "
                                    f"k >= 0) or leave the dim static")
            i = int(k) + n if k < 0 else int(k)
            if not 0 <= i < n:
                raise TraceError(f"index {k} is out of bounds for dim {dim} of size {n} ({ctx.where()})")
            b = (i, i + 1, 1)
        elif isinstance(k, slice):
            b = _symbolic_slice(x, k, n) if isinstance(n, Sym) else _static_slice(x, k, n)
            layout.append(("keep", dim))
        elif is_array_index(k):
            b = (0, n, 1)
            layout.append(("take", dim, array_index(x, k)))
        else:
            raise TraceError(f"cannot index with a {type(k).__name__} ({ctx.where()})")
        starts.append(b[0]), stops.append(b[1]), steps.append(b[2])
        dim += 1
    return starts, stops, steps, layout


def apply_key(x: Tracer, key: tuple) -> Tracer:
    """x[key] for an expanded key, as one np.slice, np.take and reshape: no view, no mask."""
    starts, stops, steps, layout = bounds(x, key)
    out = x
    if (starts, stops, steps) != ([0] * x.ndim, list(x.shape), [1] * x.ndim):
        out = x.ctx.op("np.slice", x.value, starts=tuple(starts), stops=tuple(stops), steps=tuple(steps))
    return _reshape_to_layout(out, layout)


def _reshape_to_layout(sliced: Tracer, layout: list) -> Tracer:
    """Applies the take (if any), then one reshape that drops int-indexed dims and adds new axes."""
    out, shape, shift = sliced, [], 0
    for entry in layout:
        if entry == "new":
            shape.append(1)
        elif entry[0] == "keep":
            shape.append(sliced.shape[entry[1]])
        else:
            _, d, idx = entry
            out = out.ctx.op("np.take", out.value, idx.value, axis=d + shift)
            shift += idx.ndim - 1
            shape.extend(idx.shape)
    if tuple(shape) == out.shape:
        return out
    return out.ctx.op("np.reshape", out.value, shape=tuple(shape))

"""Indexing by a traced integer scalar: `a[i]`, `a[i - 1:i + 2]`, `a[:, j]` and their writes, where `i`
and `j` are traced (a loop's induction variable) and the extent is static, become np.dynamic_slice and
np.dynamic_update_slice (dialects/np/dynamic.py), which check the offsets with numpy's rules when they run.

A slice's extent is static when its bounds are the same traced value plus different constants
(`i - 1:i + 2` holds 3 elements), read off the ops that computed them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import TraceError
from ..ir.core import OpResult, Value
from .indexing import apply_key
from .tracer import Tracer


def traced_scalar(k) -> bool:
    return isinstance(k, Tracer) and k.ndim == 0 and k.dtype.kind in "iu"


def is_dynamic(key: tuple) -> bool:
    """Whether an expanded key indexes with a traced integer scalar or slices between traced bounds, and
    with no index array (numpy's advanced indexing, which np.take and the scatters handle)."""
    if any(isinstance(k, (np.ndarray, list)) or isinstance(k, Tracer) and not traced_scalar(k) for k in key):
        return False
    return any(traced_scalar(k) or isinstance(k, slice) and any(isinstance(b, Tracer) for b in (k.start, k.stop))
               for k in key)


@dataclass
class _Plan:
    """An expanded key split into a static slice of every dim, then one dynamic block, then a reshape."""

    static: list = field(default_factory=list)        # a slice per dim of x
    axes: list[int] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    index_axes: list[int] = field(default_factory=list)
    starts: list[Tracer] = field(default_factory=list)
    layout: list = field(default_factory=list)        # per result dim: "new" or the dim of x it keeps

    def attrs(self) -> dict:
        return {"axes": tuple(self.axes), "sizes": tuple(self.sizes), "index_axes": tuple(self.index_axes)}

    @property
    def full(self) -> bool:
        return all(s == slice(None) for s in self.static)


def _plan(x: Tracer, key: tuple) -> _Plan:
    plan, dim = _Plan(), 0
    for k in key:
        if k is None:
            plan.layout.append("new")
            continue
        if traced_scalar(k):
            _dynamic(plan, dim, k, 1, index=True)
        elif isinstance(k, slice) and any(isinstance(b, Tracer) for b in (k.start, k.stop)):
            _dynamic(plan, dim, _start(x, k), _extent(x, k), index=False)
            plan.layout.append(dim)
        elif isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_)):
            n = x.shape[dim]
            i = int(k) + n if isinstance(n, int) and k < 0 else int(k)
            if not isinstance(n, int) or not 0 <= i < n:
                raise TraceError(f"index {k} is out of bounds for dim {dim} of size {n} ({x.ctx.where()})")
            plan.static.append(slice(i, i + 1))
        elif isinstance(k, slice):
            plan.static.append(k)
            plan.layout.append(dim)
        else:
            raise TraceError(f"cannot index with a {type(k).__name__} beside a traced scalar index or traced slice "
                             f"bounds; index in two steps ({x.ctx.where()})")
        dim += 1
    return plan


def _dynamic(plan: _Plan, dim: int, start: Tracer, size: int, index: bool) -> None:
    plan.static.append(slice(None))
    plan.axes.append(dim)
    plan.sizes.append(size)
    plan.starts.append(start)
    if index:
        plan.index_axes.append(dim)


def _start(x: Tracer, k: slice) -> Tracer:
    if k.step not in (None, 1):
        raise TraceError(f"a slice with traced bounds takes step 1, got {k.step} ({x.ctx.where()})")
    if k.start is None:
        raise TraceError(f"a slice with a traced stop needs a traced start (i:i + k) so that its extent is "
                         f"static, or pass the bounds with static_argnums ({x.ctx.where()})")
    return k.start if isinstance(k.start, Tracer) else x.ctx.lift(int(k.start))


def _extent(x: Tracer, k: slice) -> int:
    """stop - start of a slice whose bounds are one traced value plus constants; else a TraceError."""
    (a, da), (b, db) = affine_bound(k.start), affine_bound(k.stop)
    if a is None or a != b or db < da:
        raise TraceError(f"the slice between traced bounds {_text(k.start)}:{_text(k.stop)} has no static "
                         "extent: write it as i + a:i + b with the same traced i and constants a <= b, or pass "
                         f"the bounds with static_argnums ({x.ctx.where()})")
    return db - da


def affine_bound(bound) -> tuple[object, int]:
    """A bound as (the traced value's key, constant offset): `i + 2` is (i, 2), and `2 * i + 2` is
    (the key of 2 * i, 2), whichever `2 * i` it was computed from (`_structure`); a Python int is
    (None, it). Bounds whose keys are equal differ by their offsets alone."""
    if not isinstance(bound, Tracer):
        return None, int(bound) if bound is not None else 0
    v, offset = bound.ctx.local(bound.value), 0      # inside a region: the value as the region sees it
    while isinstance(v, OpResult) and v.op.name in ("np.add", "np.sub"):
        p, q = v.op.operands
        cq, cp = _constant_int(q), _constant_int(p)
        if cq is not None:
            v, offset = p, offset + (cq if v.op.name == "np.add" else -cq)
        elif cp is not None and v.op.name == "np.add":
            v, offset = q, offset + cp
        else:
            break
    return _structure(v), offset


# integer scalar arithmetic a slice bound is computed with (`2 * i`, `i // 2`)
_ARITHMETIC = frozenset({"np.add", "np.sub", "np.mul", "np.floordiv", "np.mod", "np.neg"})


def _structure(v: Value) -> object:
    """A key equal for scalars computed the same way from the same values: `a[2 * i:2 * i + 2]` traces
    `2 * i` twice, and its extent is still 2."""
    if isinstance(v, OpResult) and v.type.rank == 0:
        c = _constant_int(v)
        if c is not None:
            return ("c", c)
        if v.op.name in _ARITHMETIC and not v.op.attrs:
            return (v.op.name, *(_structure(o) for o in v.op.operands))
    return v


def _constant_int(v: Value) -> int | None:
    if isinstance(v, OpResult) and v.op.name == "np.constant" and v.type.rank == 0 and v.type.dtype.kind in "iu":
        return int(v.op.attrs["value"].array)
    return None


def _text(bound) -> str:
    return "" if bound is None else f"%{bound.value.name or '?'}" if isinstance(bound, Tracer) else str(bound)


def getitem(x: Tracer, key: tuple) -> Tracer:
    """x[key] for an expanded key with traced scalars or traced slice bounds."""
    plan = _plan(x, key)
    block = x if plan.full else apply_key(x, tuple(plan.static))
    block = x.ctx.op("np.dynamic_slice", block.value, *(s.value for s in plan.starts), **plan.attrs())
    shape = tuple(1 if d == "new" else block.shape[d] for d in plan.layout)
    return block if shape == block.shape else x.ctx.op("np.reshape", block.value, shape=shape)


def write(x: Tracer, key: tuple, v) -> Tracer:
    """x's value after x[key] = v for an expanded key with traced scalars or traced slice bounds."""
    from .inplace import value_for, write_basic

    plan = _plan(x, key)
    inner = x if plan.full else apply_key(x, tuple(plan.static))
    region = tuple(plan.sizes[plan.axes.index(d)] if d in plan.axes else inner.shape[d] for d in range(x.ndim))
    u = value_for(x, v, tuple(1 if d == "new" else region[d] for d in plan.layout))
    if u.shape != region:
        u = x.ctx.op("np.reshape", u.value, shape=region)
    new = x.ctx.op("np.dynamic_update_slice", inner.value, u.value, *(s.value for s in plan.starts), **plan.attrs())
    return new if plan.full else write_basic(x, tuple(plan.static), new)

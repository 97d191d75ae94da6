"""Functionalization: numpy's in-place writes recorded as SSA ops.

A write (`a[i, 1:] = v`, `a += b`, `np.add(x, y, out=a)`, `np.copyto`, `np.put`,
`np.add.at`...) computes the array's new value with a pure op (`np.update_slice`,
`np.scatter_nd`, `np.where`) and rebinds the Tracer object to it, so every Python name
bound to that array reads the write afterwards.

Views: a traced array made by basic indexing, reshape, transpose, squeeze, expand_dims
or broadcast_to remembers its base and how it was derived (`View`). Reading it after
its base was written re-derives it; writing into it writes the base through the
inverse (an update of the viewed slice, the reshape or transpose undone), as numpy's
shared memory would. A write into a read-only view (broadcast_to) is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import DTypeError, TraceError, UnsupportedOp
from ..ir.shapes import num_elements
from . import dynamic_index, windows
from .indexing import apply_key, array_index, bounds, expand_key, is_array_index
from .numpy_api import context_of, implements, warn_complex_to_real
from .tracer import TraceContext, Tracer, weak_dtype


@dataclass(eq=False)
class View:
    """How a traced view is derived from its base, and how a write to it changes the base."""

    base: Tracer
    derive: Callable[[Tracer], Tracer]                      # the view's value from the base's
    write: Callable[[Tracer, Tracer], Tracer] | None        # the base's new value from the view's; None: read-only
    what: str                                               # the view as code, for messages
    seen: int                                               # the base's version the view was derived from
    key: tuple | None = None                                # the index, for views made by basic indexing

    def refresh(self, view: Tracer) -> None:
        """Re-derives `view` if its base was written since."""
        base = self.base
        _ = base.value                                      # a view of a view brings its own base up first
        if base._version != self.seen:
            view._value = self.derive(base).value
            self.seen = base._version
            view._version += 1


def make_view(out: Tracer, base: Tracer, derive, write, what: str, key: tuple | None = None) -> Tracer:
    """Marks `out` (just derived from `base`) as a view of it."""
    if out is base:
        return base
    out._view = View(base, derive, write, what, base._version, key)
    return out


def view_of(x: Tracer, derive, write, what: str) -> Tracer:
    return make_view(derive(x), x, derive, write, what)


def rebind(t: Tracer, new: Tracer) -> None:
    """Makes `t` hold `new` (of t's shape and dtype) from now on, writing through to the array it views."""
    view = t._view
    if view is not None and view.write is None:
        raise TraceError(f"cannot write into {view.what}: numpy makes it a read-only view ({t.ctx.where()}); "
                         "write into a copy (.copy()) instead")
    if not t.ctx.is_local(t._value) and (view is None or not t.ctx.is_local(view.base._value)):
        raise TraceError(f"a loop body or branch writes into an array from outside it ({t.ctx.where()}): "
                         "the write would be lost after the region; pass the array in as a carried value "
                         "(init_val or an operand) and return its new value")
    t._value = new.value
    t._version += 1
    if view is not None:
        rebind(view.base, view.write(view.base, new))
        view.seen = view.base._version


def _fresh(x: Tracer) -> Tracer:
    return Tracer(x.value, x.ctx)


# -- x[key] = v ---------------------------------------------------------------------------------
def setitem(x: Tracer, key, v) -> None:
    """x[key] = v, numpy's semantics, recorded as x's new value."""
    key = key if isinstance(key, tuple) else (key,)
    if any(_is_mask(k) for k in key):
        rebind(x, _masked(x, key, v))
        return
    key = expand_key(x, key)
    if windows.needs_window(key):
        windows.write(x, key, v)
    elif dynamic_index.is_dynamic(key):
        if not _writes_itself(x, key, v):
            rebind(x, dynamic_index.write(x, key, v))
    elif any(is_array_index(k) for k in key):
        rebind(x, scattered(x, key, v))
    elif not _writes_itself(x, key, v):
        rebind(x, write_basic(x, key, v))


def _writes_itself(x: Tracer, key: tuple, v) -> bool:
    """`a[i] += 1` ends with a[i] = (the view a[i], already written through): nothing left to do.

    A view of x at the same key always holds x[key] (it re-derives after writes to x)."""
    view = v._view if isinstance(v, Tracer) else None
    return view is not None and view.base is x and view.key is not None and len(view.key) == len(key) \
        and all(same_index(a, b) for a, b in zip(view.key, key))


def same_index(a, b) -> bool:
    """Whether two entries of an expanded key are the same index; traced ones by identity (their `==` traces)."""
    if isinstance(a, slice) and isinstance(b, slice):
        return all(same_index(p, q) for p, q in ((a.start, b.start), (a.stop, b.stop), (a.step, b.step)))
    if isinstance(a, (Tracer, np.ndarray)) or isinstance(b, (Tracer, np.ndarray)):
        return a is b
    return bool(a == b)


def _is_mask(k) -> bool:
    if isinstance(k, Tracer):
        return k.dtype.kind == "b"
    if isinstance(k, (np.ndarray, list)):
        return np.asarray(k).dtype == np.bool_ and np.ndim(k) > 0
    return False


def value_for(x: Tracer, v, shape: tuple) -> Tracer:
    """`v` as numpy writes it into x[...] of `shape`: cast to x's dtype, broadcast."""
    ctx = x.ctx
    u = ctx.lift(_stacked(v), x)
    if u.dtype.kind == "c" and x.dtype.kind != "c":
        if isinstance(v, complex):
            raise DTypeError(f"cannot write the complex number {v!r} into a {x.dtype} array, as numpy refuses "
                             f"({ctx.where()})")
        warn_complex_to_real(ctx)       # numpy keeps the real parts, warning
    if u.dtype != x.dtype:
        u = ctx.op("np.cast", u.value, dtype=x.dtype)
    while u.ndim > len(shape) and u.shape[0] == 1:       # numpy drops the value's leading unit dims
        u = ctx.op("np.reshape", u.value, shape=u.shape[1:])
    if u.shape != tuple(shape):
        u = ctx.op("np.broadcast_to", u.value, shape=tuple(shape))
    return u


def _stacked(v):
    """A list or tuple holding traced arrays (`out[0] = [a, b]`) as one traced array."""
    if isinstance(v, (list, tuple)) and any(isinstance(e, (Tracer, list, tuple)) for e in v):
        parts = [_stacked(e) for e in v]
        if any(isinstance(p, Tracer) for p in parts):
            return np.stack([p if isinstance(p, Tracer) else np.asarray(p) for p in parts])
    return v


def write_basic(x: Tracer, key: tuple, v) -> Tracer:
    """x's value after x[key] = v for a basic (int, slice, None) expanded key."""
    from ..dialects.np.shape import slice_length

    ctx = x.ctx
    starts, stops, steps, layout = bounds(x, key)
    region = tuple(slice_length(a, b, s) for a, b, s in zip(starts, stops, steps))
    target = tuple(1 if e == "new" else region[e[1]] for e in layout)
    u = value_for(x, v, target)
    if u.shape != region:
        u = ctx.op("np.reshape", u.value, shape=region)
    if (list(starts), list(stops), list(steps)) == ([0] * x.ndim, list(x.shape), [1] * x.ndim):
        return _fresh(u)
    return ctx.op("np.update_slice", x.value, u.value, starts=tuple(starts), stops=tuple(stops), steps=tuple(steps))


def _transpose(x: Tracer, perm) -> Tracer:
    perm = tuple(int(p) for p in perm)
    return x if perm == tuple(range(x.ndim)) else x.ctx.op("np.transpose", x.value, perm=perm)


@dataclass
class _Advanced:
    """An index with integer arrays (or arrays and ints) split as numpy does."""

    region_key: tuple          # the key with the advanced entries made full slices
    region: Tracer             # x[region_key]: same rank as x
    order: list[int]           # the region's dims, advanced ones first
    coords: Tracer             # the broadcast indices stacked on a last dim
    shape: tuple               # the indices' broadcast shape
    position: int              # where numpy puts the indexed dims in x[key]


def _advanced(x: Tracer, key: tuple, what: str) -> _Advanced:
    ctx = x.ctx
    if any(k is None for k in key):
        raise UnsupportedOp(f"{what} through an index that mixes integer arrays with None is not supported "
                            f"({ctx.where()})")
    advanced = [d for d, k in enumerate(key) if is_array_index(k) or isinstance(k, (int, np.integer))]
    region_key = tuple(slice(None) if d in advanced else k for d, k in enumerate(key))
    region = apply_key(x, region_key)
    indices = [_index(region, d, k) for d, k in enumerate(key) if d in advanced]
    if any(not isinstance(d, int) for i in indices for d in i.shape):
        raise UnsupportedOp(f"{what} at traced indices of a symbolic shape is not supported ({ctx.where()})")
    shape = tuple(np.broadcast_shapes(*(i.shape for i in indices)))
    coords = ctx.op("np.stack", *(_broadcast(i, shape).value for i in indices), axis=len(shape))
    adjacent = advanced == list(range(advanced[0], advanced[-1] + 1))
    others = [d for d in range(x.ndim) if d not in advanced]
    return _Advanced(region_key, region, advanced + others, coords, shape, advanced[0] if adjacent else 0)


def _front(n: int, p: int, rank: int) -> list[int]:
    """The permutation that moves dims p..p+n to the front."""
    return list(range(p, p + n)) + list(range(p)) + list(range(p + n, rank))


def gathered(x: Tracer, key: tuple) -> Tracer:
    """x[key] for an expanded key with several integer arrays, or arrays and ints."""
    a = _advanced(x, key, "indexing")
    out = x.ctx.op("np.gather_nd", _transpose(a.region, a.order).value, a.coords.value)
    return _transpose(out, np.argsort(_front(len(a.shape), a.position, out.ndim)))


def scattered(x: Tracer, key: tuple, v, reduction: str = "none") -> Tracer:
    """x's value after x[key] = v (or ufunc.at) for an expanded key with integer-array indices."""
    a = _advanced(x, key, "writing")
    rest = tuple(a.region.shape[d] for d in a.order[a.coords.shape[-1]:])
    u = value_for(x, v, rest[:a.position] + a.shape + rest[a.position:])
    u = _transpose(u, _front(len(a.shape), a.position, u.ndim))
    new = x.ctx.op("np.scatter_nd", _transpose(a.region, a.order).value, a.coords.value, u.value,
                   reduction=reduction)
    new = _transpose(new, np.argsort(a.order))
    return new if a.region is x else write_basic(x, a.region_key, new)


def _index(region: Tracer, dim: int, k) -> Tracer:
    ctx = region.ctx
    if isinstance(k, (int, np.integer)):
        n = region.shape[dim]
        if isinstance(n, int) and not -n <= k < n:
            raise TraceError(f"index {k} is out of bounds for dim {dim} of size {n} ({ctx.where()})")
        return ctx.constant(int(k), np.int64)
    i = array_index(region, k)
    return i if i.dtype == np.int64 else ctx.op("np.cast", i.value, dtype=np.dtype(np.int64))


def _broadcast(i: Tracer, shape: tuple) -> Tracer:
    return i if i.shape == tuple(shape) else i.ctx.op("np.broadcast_to", i.value, shape=tuple(shape))


def _masked(x: Tracer, key: tuple, v) -> Tracer:
    """x's value after x[mask] = v."""
    ctx = x.ctx
    mask, rest = key[0], key[1:]
    if not all(k is Ellipsis or isinstance(k, slice) and k == slice(None) for k in rest):
        raise UnsupportedOp(f"a bool mask is supported as the only index (x[mask] = v) ({ctx.where()})")
    from .selection import Selection, written

    if isinstance(v, Selection):
        if not isinstance(mask, Tracer):
            raise UnsupportedOp(f"x[static_mask] = y[traced_mask] ({ctx.where()}): the selections may differ in "
                                "length; write x = np.where(mask, values, x)")
        return written(x, ctx.lift(mask), v)
    scalar = not isinstance(v, (Tracer, np.ndarray, list)) or int(np.prod(np.shape(v))) == 1
    if not isinstance(mask, Tracer) and not scalar:
        return scattered(x, expand_key(x, np.nonzero(np.asarray(mask))), v)
    if not scalar:
        raise UnsupportedOp(f"x[mask] = values with a traced mask: how many values are taken depends on the mask "
                            f"({ctx.where()}); write x = np.where(mask, values, x) with values of x's shape")
    m = ctx.lift(mask)
    if m.shape != x.shape[:m.ndim]:
        raise TraceError(f"the mask {m.value.type} does not match the leading dims of {x.value.type} "
                         f"({ctx.where()})")
    m = ctx.op("np.reshape", m.value, shape=m.shape + (1,) * (x.ndim - m.ndim)) if m.ndim < x.ndim else m
    u = value_for(x, v, ())
    return ctx.op("np.where", m.value, u.value, x.value)


# -- out= and the numpy functions that write ----------------------------------------------------
def write_out(ctx: TraceContext, name: str, out, results: list[Tracer], casting: str = "same_kind", where=True):
    """Writes `results` into the `out=` arrays as numpy does; returns what numpy returns."""
    outs = out if isinstance(out, tuple) else (out,)
    for o, r in zip(outs, results):
        if o is None:
            continue
        target = writable(ctx, o, f"{name}(..., out=)")
        if not np.can_cast(r.dtype, target.dtype, casting):
            raise DTypeError(f"{name}: cannot cast the result from {r.dtype} to the out= array's {target.dtype} "
                             f"with casting rule {casting!r}, as numpy refuses ({ctx.where()})")
        if where is not True:
            r = ctx.op("np.where", _bool(ctx.lift(where)).value, value_for(target, r, r.shape).value,
                       value_for(target, target, r.shape).value)
        setitem(target, Ellipsis, r)
    return outs[0] if len(outs) == 1 else outs


def _bool(t: Tracer) -> Tracer:
    return t if t.dtype.kind == "b" else t != 0


def writable(ctx: TraceContext, o, what: str) -> Tracer:
    if isinstance(o, Tracer):
        return o
    raise TraceError(f"{what} writes into a numpy array from outside the traced function ({ctx.where()}); "
                     "write into an argument or an array created inside the function (np.empty, np.zeros...)")


def ufunc_at(ctx: TraceContext, ufunc: np.ufunc, inputs) -> None:
    """ufunc.at(a, indices, b): unbuffered, so repeated indices all apply."""
    reductions = {np.add: "add", np.subtract: "add", np.multiply: "mul", np.maximum: "max", np.minimum: "min"}
    a = writable(ctx, inputs[0], f"np.{ufunc.__name__}.at")
    b = inputs[2] if len(inputs) > 2 else None
    key = expand_key(a, inputs[1] if isinstance(inputs[1], tuple) else (inputs[1],))
    if not any(is_array_index(k) for k in key):
        view = a[key]              # no index repeats: the buffered and unbuffered forms agree
        setitem(a, key, ufunc(view) if b is None else ufunc(view, b))
        return
    if ufunc not in reductions or b is None:
        raise UnsupportedOp(f"np.{ufunc.__name__}.at with integer-array indices is not supported; add, subtract, "
                            f"multiply, maximum and minimum are ({ctx.where()})")
    b = ctx.lift(b, a)
    rebind(a, scattered(a, key, -b if ufunc is np.subtract else b, reductions[ufunc]))


def _source_dtype(dst: Tracer, src):
    if isinstance(src, (bool, int, float)):
        return weak_dtype(dst.dtype, src)
    return src.dtype if hasattr(src, "dtype") else np.asarray(src).dtype


@implements(np.copyto)
def copyto(dst, src, casting="same_kind", where=True):
    ctx = context_of(dst, src, where)
    target = writable(ctx, dst, "np.copyto")
    if not np.can_cast(_source_dtype(target, src), target.dtype, casting):
        raise DTypeError(f"np.copyto: cannot cast {_source_dtype(target, src)} to {target.dtype} with casting "
                         f"rule {casting!r} ({ctx.where()})")
    value = value_for(target, src, target.shape)
    if where is not True:
        value = ctx.op("np.where", _bool(ctx.lift(where)).value, value.value, target.value)
    setitem(target, Ellipsis, value)


@implements(np.put)
def put(a, ind, v, mode="raise"):
    ctx = context_of(a, ind, v)
    target = writable(ctx, a, "np.put")
    if mode != "raise":
        raise UnsupportedOp(f"np.put(mode={mode!r}) is not supported ({ctx.where()})")
    size = num_elements(target.shape)
    flat = Tracer(ctx.op("np.reshape", target.value, shape=(size,)).value, ctx)
    idx = ctx.lift(np.asarray(ind) if isinstance(ind, (list, int)) else ind)
    idx = ctx.op("np.reshape", idx.value, shape=(num_elements(idx.shape),))
    values = ctx.lift(v, target)
    if num_elements(values.shape) not in (1, idx.shape[0]):
        raise UnsupportedOp(f"np.put repeats {num_elements(values.shape)} values over {idx.shape[0]} indices; "
                            f"pass one value or one per index ({ctx.where()})")
    values = ctx.op("np.reshape", values.value, shape=(num_elements(values.shape),))
    new = scattered(flat, (idx,), values)
    rebind(target, ctx.op("np.reshape", new.value, shape=target.shape))


@implements(np.putmask)
def putmask(a, mask, values):
    ctx = context_of(a, mask, values)
    target = writable(ctx, a, "np.putmask")
    v = ctx.lift(values, target)
    if v.shape != target.shape and num_elements(v.shape) != 1:
        raise UnsupportedOp(f"np.putmask repeats values of shape {v.shape} over {target.shape}; pass one value or "
                            f"values of the array's shape ({ctx.where()})")
    m = _bool(ctx.lift(mask))
    rebind(target, ctx.op("np.where", m.value, value_for(target, v, target.shape).value, target.value))


@implements(np.fill_diagonal)
def fill_diagonal(a, val, wrap=False):
    ctx = context_of(a, val)
    target = writable(ctx, a, "np.fill_diagonal")
    shape = target.shape
    if target.ndim < 2 or (target.ndim > 2 and len(set(shape)) != 1):
        raise TraceError(f"np.fill_diagonal needs a 2-d array or one with all dims equal, got {shape} "
                         f"({ctx.where()})")
    if wrap and shape[0] > shape[1] + 1:
        raise UnsupportedOp(f"np.fill_diagonal(wrap=True) of a tall matrix is not supported ({ctx.where()})")
    n = min(shape)
    v = ctx.lift(val, target)
    if num_elements(v.shape) not in (1, n):
        raise UnsupportedOp(f"np.fill_diagonal repeats {num_elements(v.shape)} values over a diagonal of {n}; "
                            f"pass one value or {n} ({ctx.where()})")
    v = ctx.op("np.reshape", v.value, shape=(num_elements(v.shape),))
    diagonal = np.arange(n)
    rebind(target, scattered(target, (diagonal,) * target.ndim, v))


@implements(np.copy)
def copy(a, order="K", subok=False):
    return _fresh(context_of(a).lift(a))

"""Slices whose extent follows a traced bound (`a[i, :j]`, `cov[i:m, i]`, `c[i, :i + 1] *= beta`): windows.

Such a slice has no static shape, so while tracing it is a `Window`: the whole axis (its static size n)
plus traced bounds [lo, hi) computed with numpy's slice rules (a negative bound counts from the end, then
both are clamped to [0, n]). Element k of the window is the array's for lo <= k < hi; the lanes outside
hold whatever the array holds there and never reach a result:

- elementwise ops between windows of the same bounds (or with scalars and operands that broadcast along
  the windowed axes) compute on every lane and give a window;
- a reduction or a contraction over a windowed axis first fills the lanes outside with the reduction's
  identity (np.where, never a product with the mask: inf * 0 is nan), so the result is numpy's up to the
  summation order, as for any fused reduction;
- a write (`a[i:m, c] = w`, `a[:j] += v`) is np.where(mask, new, old) over the whole axis;
- windows of different bounds are realigned to start at 0 (np.flip of a window is one too) and then
  must have provably equal extents; anything that needs the actual shape (len, .shape, reshape,
  returning it, carrying it through a loop) is refused naming the line, so a captured loop unrolls.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import TraceError, UnsupportedOp
from .dynamic_index import affine_bound, traced_scalar
from .shapeless import Shapeless
from .tracer import Tracer

_ADVICE = ("a slice whose extent follows a traced bound (a[:j], a[i:m]) has no static shape; it can be used "
           "in elementwise arithmetic with slices of the same bounds, in sums, means and dot products, reversed with "
           "np.flip, and written into a slice of the same bounds")
# integer ops whose lanes outside a window get 1, so that they can neither raise nor warn
_GUARDED = (np.floor_divide, np.remainder, np.fmod, np.divmod, np.power)
_IDENTITY = {np.add: 0, np.multiply: 1, np.logical_or: False, np.logical_and: True}


@dataclass(frozen=True, eq=False)
class Bound:
    """A clamped slice bound: `key` says which values are equal (same key, same value); `make` traces it."""

    key: tuple
    make: Callable[[], Tracer | int]


@dataclass(frozen=True, eq=False)
class Span:
    """The window [lo, hi) of an axis of static size n."""

    lo: Bound
    hi: Bound
    n: int

    def same(self, other: Span) -> bool:
        return self.n == other.n and self.lo.key == other.lo.key and self.hi.key == other.hi.key


def _const(c: int) -> Bound:
    return Bound(("c", c), lambda: c)


def _bound(b, default: int, n: int) -> Bound:
    """numpy's slice bound `b` on an axis of size n, wrapped when negative and clamped to [0, n]."""
    if b is None:
        return _const(default)
    if not isinstance(b, Tracer):
        b = int(b)
        return _const(min(max(b + n if b < 0 else b, 0), n))
    base, offset = affine_bound(b)

    def make():
        wrapped = np.where(b < 0, b + n, b)
        return np.clip(wrapped, 0, n).astype(np.int64)
    return Bound(("v", base, offset, n), make)


def _extent(span: Span) -> Bound:
    """max(0, hi - lo), the window's length."""
    lo, hi = span.lo, span.hi
    if lo.key[0] == "c" and hi.key[0] == "c":
        return _const(max(0, hi.key[1] - lo.key[1]))
    if lo.key == ("c", 0):
        return hi
    return Bound(("ext", lo.key, hi.key), lambda: np.maximum(hi.make() - lo.make(), 0))


def needs_window(key: tuple) -> bool:
    """Whether an expanded key slices between traced bounds whose extent is not static (`:j`, `i:m`)."""
    if any(isinstance(k, (np.ndarray, list)) or isinstance(k, Tracer) and not traced_scalar(k) for k in key):
        return False
    return any(isinstance(k, slice) and k.step in (None, 1) and _windowed(k) for k in key)


def _windowed(k: slice) -> bool:
    bounds = (k.start, k.stop)
    if not any(isinstance(b, Tracer) for b in bounds):
        return False
    if not all(b is None or traced_scalar(b) or isinstance(b, (int, np.integer)) for b in bounds):
        return False
    if k.start is None or k.stop is None:
        return True
    (a, da), (b, db) = affine_bound(k.start), affine_bound(k.stop)
    return a is None or a != b or db < da


# -- the window ----------------------------------------------------------------------------------------
class Window(Shapeless):
    """A slice between traced bounds: the whole array along each windowed axis, and the axes' spans."""

    NAME, ADVICE = "a slice between traced bounds", _ADVICE
    AS_ARRAY = "converting to an array (returning it, carrying it through a loop, np.asarray)"

    def __init__(self, full: Tracer, spans: dict[int, Span], source: tuple | None = None):
        self._full, self.spans, self.source = full, dict(spans), source   # source: (x, key) it views

    @property
    def full(self) -> Tracer:
        return self._full

    @property
    def ctx(self):
        return self._full.ctx

    @property
    def dtype(self) -> np.dtype:
        return self._full.dtype

    @property
    def ndim(self) -> int:
        return self._full.ndim

    def __setitem__(self, key, value):
        self._refuse("writing by index")

    def __repr__(self) -> str:
        return f"Window({self._full!r}, axes {sorted(self.spans)})"

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        self._refuse(f".{name}")

    # -- numpy dispatch -------------------------------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        out = kwargs.pop("out", None)
        if method == "reduce" and ufunc in _IDENTITY and len(inputs) == 1:
            result = reduce(inputs[0], ufunc, **kwargs)
        elif method != "__call__" or kwargs.keys() - {"dtype"}:
            raise UnsupportedOp(f"np.{ufunc.__name__}.{method} with {sorted(kwargs)} on a slice between traced "
                                f"bounds ({self.ctx.where()}): {_ADVICE}")
        elif ufunc is np.matmul:
            result = contract(*inputs, np.matmul)
        else:
            result = elementwise(lambda *xs: ufunc(*xs, **kwargs), inputs, guard=ufunc in _GUARDED)
        if out is None:
            return result
        results = result if isinstance(result, tuple) else (result,)
        for o, r in zip(out, results, strict=True):
            if not isinstance(o, Window):
                raise UnsupportedOp(f"np.{ufunc.__name__}(..., out=) of a slice between traced bounds into another "
                                    f"array ({self.ctx.where()}): {_ADVICE}")
            if not np.can_cast(r.dtype, o.dtype, "same_kind"):
                raise TraceError(f"np.{ufunc.__name__} cannot cast its {r.dtype} result into the {o.dtype} slice "
                                 f"({self.ctx.where()})")
            o.assign(r)
        return out if len(out) > 1 else out[0]

    def __array_function__(self, func, types, args, kwargs):
        impl = _FUNCTIONS.get(func)
        if impl is None:
            raise UnsupportedOp(f"np.{func.__name__} of a slice between traced bounds ({self.ctx.where()}): {_ADVICE}")
        return impl(*args, **kwargs)

    # -- methods --------------------------------------------------------------------------------------
    def sum(self, axis=None, dtype=None, keepdims=False):
        return reduce(self, np.add, axis, dtype, keepdims)

    def prod(self, axis=None, dtype=None, keepdims=False):
        return reduce(self, np.multiply, axis, dtype, keepdims)

    def any(self, axis=None, keepdims=False):
        return reduce(self, np.logical_or, axis, None, keepdims)

    def all(self, axis=None, keepdims=False):
        return reduce(self, np.logical_and, axis, None, keepdims)

    def mean(self, axis=None, dtype=None, keepdims=False):
        return mean(self, axis, dtype, keepdims)

    def dot(self, b):
        return contract(self, b, np.dot)

    def copy(self, order="C"):
        return Window(Tracer(self._full.value, self.ctx), self.spans)

    def astype(self, dtype, copy=True):
        return Window(self._full.astype(dtype), self.spans)

    def mask(self) -> Tracer | None:
        """True on the lanes inside every windowed axis (None: all of them)."""
        masks = [m for d, s in self.spans.items() if (m := _mask(self.ctx, s, d, self.ndim)) is not None]
        out = masks[0] if masks else None
        for m in masks[1:]:
            out = out & m
        return out

    def assign(self, value) -> None:
        """Writes `value` into this window's lanes (into the array it views, if it is a slice of one)."""
        full = written(self, value)
        if self.source is None:
            self._full = full
            return
        from .inplace import rebind

        rebind(self._full, full)


def _mask(ctx, span: Span, axis: int, rank: int) -> Tracer | None:
    """arange(n) in [lo, hi) along `axis` of an array of `rank` (None when the window is the whole axis)."""
    k = ctx.constant(np.arange(span.n, dtype=np.int64))
    parts = []
    if span.lo.key != ("c", 0):
        parts.append(k >= span.lo.make())
    if span.hi.key != ("c", span.n):
        parts.append(k < span.hi.make())
    if not parts:
        return None
    m = parts[0] if len(parts) == 1 else parts[0] & parts[1]
    return m.reshape((1,) * axis + (span.n,) + (1,) * (rank - axis - 1)) if rank > 1 else m


def filled(w: Window, axes, fill) -> Tracer:
    """w's whole array with the lanes outside its window along `axes` set to `fill`."""
    full = w.full
    for d in axes:
        if d in w.spans and (m := _mask(w.ctx, w.spans[d], d, w.ndim)) is not None:
            full = np.where(m, full, w.ctx.constant(fill, full.dtype))
    return full


def wrap(full: Tracer, spans: dict[int, Span]):
    return Window(full, spans) if spans else full


# -- realigning: a window as one that starts at 0 ---------------------------------------------------
def _shifted(full: Tracer, axis: int, n: int, start) -> Tracer:
    """full[start:start + n] along `axis`, past the end reading zeros (full padded by n zeros)."""
    if isinstance(start, int) and start == 0:
        return full
    padded = np.concatenate([full, np.zeros_like(full)], axis=axis)
    if isinstance(start, int):
        return padded[(slice(None),) * axis + (slice(start, start + n),)]
    return full.ctx.op("np.dynamic_slice", padded.value, start.value, axes=(axis,), sizes=(n,), index_axes=())


def realigned(w: Window, axis: int) -> Window:
    """w with its window along `axis` moved to start at 0 (the same elements, the same extent)."""
    span = w.spans[axis]
    if span.lo.key == ("c", 0):
        return w
    spans = dict(w.spans)
    spans[axis] = Span(_const(0), _extent(span), span.n)
    return Window(_shifted(w.full, axis, span.n, span.lo.make()), spans)


def flip(m, axis=None):
    """np.flip of a window: reversing [lo, hi) of n elements gives [0, hi - lo) of the reversed array
    read from n - hi on."""
    if not isinstance(m, Window):
        raise UnsupportedOp(f"np.flip with a slice between traced bounds as other than its array: {_ADVICE}")
    from .numpy_api import normalize_axes

    axes = normalize_axes(m.full, axis)
    full, spans = np.flip(m.full, axis), dict(m.spans)
    for d in axes:
        if d in spans:
            span = spans[d]
            hi = span.hi.make()
            full = _shifted(full, d, span.n, span.n - hi)
            spans[d] = Span(_const(0), _extent(span), span.n)
    return Window(full, spans)


# -- ops ----------------------------------------------------------------------------------------------
def _shape(x) -> tuple:
    return x.full.shape if isinstance(x, Window) else tuple(x.shape) if isinstance(x, Tracer) else np.shape(x)


def _rank(x) -> int:
    return len(_shape(x))


def _agree(ctx, what: str, windows: list[tuple[Window, int]]) -> list[Window]:
    """Windows meeting at one axis (each with its axis there), realigned if their bounds differ; their
    extents must then be provably equal, else numpy would raise for unequal ones."""
    first = windows[0][0].spans[windows[0][1]]
    if all(w.spans[d].same(first) for w, d in windows):
        return [w for w, _ in windows]
    moved = [realigned(w, d) for w, d in windows]
    first = moved[0].spans[windows[0][1]]
    if all(w.spans[d].same(first) for w, (_, d) in zip(moved, windows)):
        return moved
    raise UnsupportedOp(f"{what} pairs slices between traced bounds whose extents may differ ({ctx.where()}): "
                        "numpy raises when they do; write both with the same bounds")


def elementwise(fn: Callable, inputs, guard: bool = False):
    """fn over the inputs' whole arrays, where the windows among them share their windowed axes."""
    ctx = next(x for x in inputs if isinstance(x, Window)).ctx
    rank = max(_rank(x) for x in inputs)
    inputs = list(inputs)
    spans: dict[int, Span] = {}
    for axis in sorted({d + rank - x.ndim for x in inputs if isinstance(x, Window) for d in x.spans}):
        at = [(k, axis - rank + x.ndim) for k, x in enumerate(inputs) if isinstance(x, Window)
              and axis - rank + x.ndim in x.spans]
        agreed = _agree(ctx, "an elementwise op", [(inputs[k], d) for k, d in at])
        for (k, _), w in zip(at, agreed):
            inputs[k] = w
        spans[axis] = agreed[0].spans[at[0][1]]
        _check_broadcast(ctx, inputs, axis - rank)
    fulls = [_guarded(x) if guard and isinstance(x, Window) and x.dtype.kind in "iu" else
             x.full if isinstance(x, Window) else x for x in inputs]
    result = fn(*fulls)
    if isinstance(result, tuple):
        return tuple(wrap(r, spans) for r in result)
    return wrap(result, spans)


def _check_broadcast(ctx, inputs, axis: int) -> None:
    """Every input not windowed along `axis` (counted from the end) broadcasts along it (size 1)."""
    for x in inputs:
        d = axis + _rank(x)
        size = _shape(x)[d] if d >= 0 else 1
        if size != 1 and not (isinstance(x, Window) and d in x.spans):
            raise UnsupportedOp(f"an elementwise op between a slice between traced bounds and an array of static "
                                f"size {size} along its windowed axis ({ctx.where()}): numpy raises unless the "
                                f"extents agree; {_ADVICE}")


def _guarded(w: Window) -> Tracer:
    """w's whole array with 1 in the lanes outside it: an integer division there can neither raise nor warn."""
    return filled(w, list(w.spans), 1)


def reduce(x, ufunc, axis=0, dtype=None, keepdims=False, **kwargs):
    """A sum (prod, any, all) of a window: the lanes outside it filled with the reduction's identity."""
    if not isinstance(x, Window) or kwargs:
        raise UnsupportedOp(f"np.{ufunc.__name__}.reduce with {sorted(kwargs)} of a slice between traced bounds: "
                            f"{_ADVICE}")
    from .numpy_api import normalize_axes

    axes = normalize_axes(x.full, axis)
    full = filled(x, axes, _IDENTITY[ufunc])
    result = ufunc.reduce(full, axis=axes, dtype=dtype, keepdims=keepdims) if ufunc in (np.add, np.multiply) \
        else ufunc.reduce(full, axis=axes, keepdims=keepdims)
    spans = {d if keepdims else d - sum(a < d for a in axes): s for d, s in x.spans.items() if d not in axes}
    return wrap(result, spans)


def mean(x, axis=None, dtype=None, keepdims=False):
    """np.mean of a window: the sum of the lanes inside over their count, in numpy's result dtype (nan for
    an empty window, as numpy gives, without its warning)."""
    from .numpy_api import normalize_axes

    axes = normalize_axes(x.full, axis)
    kind = np.dtype(dtype) if dtype is not None else \
        np.dtype(np.float64) if x.dtype.kind in "biu" else x.dtype
    count = 1
    for d in axes:
        count = count * (_extent(x.spans[d]).make() if d in x.spans else x.full.shape[d])
    if isinstance(count, Tracer):
        count = count.astype(kind)      # numpy divides in the result dtype
    return reduce(x, np.add, axis, kind, keepdims) / count


def contract(a, b, fn):
    """np.dot or np.matmul (operands of rank 1 or 2) with a window among them: a windowed contracted axis
    is filled with zeros on each side."""
    ctx = (a if isinstance(a, Window) else b).ctx
    ra, rb = _rank(a), _rank(b)
    if ra == 0 or rb == 0:
        return elementwise(np.multiply, [a, b])
    if ra > 2 or rb > 2:
        raise UnsupportedOp(f"np.{fn.__name__} of rank {ra} and {rb} with a slice between traced bounds "
                            f"({ctx.where()}): {_ADVICE}")
    ca, cb = ra - 1, 0 if rb == 1 else rb - 2
    sa = a.spans.get(ca) if isinstance(a, Window) else None
    sb = b.spans.get(cb) if isinstance(b, Window) else None
    if (sa is None) != (sb is None):
        raise UnsupportedOp(f"np.{fn.__name__} contracts a slice between traced bounds with an axis of static "
                            f"size ({ctx.where()}): numpy raises unless the extents agree; {_ADVICE}")
    if sa is not None:
        a, b = _agree(ctx, f"np.{fn.__name__}", [(a, ca), (b, cb)])
    af = filled(a, [ca], 0) if isinstance(a, Window) else a
    bf = filled(b, [cb], 0) if isinstance(b, Window) else b
    if ra == 1 and rb == 1:     # a fused multiply-and-sum, which a native loop runs (a lone matmul it does not)
        return np.sum(af * bf).astype(np.result_type(af.dtype, bf.dtype))
    spans = {d: s for d, s in a.spans.items() if d != ca} if isinstance(a, Window) else {}
    if isinstance(b, Window) and rb == 2 and 1 in b.spans:
        spans[ra - 1] = b.spans[1]
    return wrap(fn(af, bf), spans)


def _where(cond, x=None, y=None):
    if x is None or y is None:
        raise UnsupportedOp(f"np.where(cond) of a slice between traced bounds: {_ADVICE}")
    return elementwise(np.where, [cond, x, y])


def _method(name: str):
    def call(a, *args, **kwargs):
        if not isinstance(a, Window):
            raise UnsupportedOp(f"np.{name} with a slice between traced bounds as other than its array: {_ADVICE}")
        try:
            return getattr(a, name)(*args, **kwargs)
        except TypeError as e:
            raise UnsupportedOp(f"np.{name} of a slice between traced bounds ({a.ctx.where()}): {e}") from None
    return call


_FUNCTIONS = {np.sum: _method("sum"), np.prod: _method("prod"), np.any: _method("any"), np.all: _method("all"),
              np.mean: _method("mean"),
              np.copy: _method("copy"), np.dot: lambda a, b: contract(a, b, np.dot),
              np.vdot: lambda a, b: contract(a, b, np.dot), np.flip: flip, np.where: _where}


# -- reading and writing ------------------------------------------------------------------------------
def getitem(x: Tracer, key: tuple) -> Window:
    """x[key] for an expanded key with slices between traced bounds: a window viewing x."""
    from .indexing import getitem as index

    whole, spans, axis, dim = [], {}, 0, 0
    for k in key:
        if isinstance(k, slice) and k.step in (None, 1) and any(isinstance(b, Tracer) for b in (k.start, k.stop)):
            n = x.shape[dim]
            if not isinstance(n, int):
                raise UnsupportedOp(f"a slice between traced bounds of symbolic dim {n} ({x.ctx.where()})")
            spans[axis] = Span(_bound(k.start, 0, n), _bound(k.stop, n, n), n)
            whole.append(slice(None))
        else:
            whole.append(k)
        if k is None or isinstance(k, slice):
            axis += 1
        dim += k is not None
    return Window(index(x, tuple(whole)), spans, (x, key))


def written(w: Window, value) -> Tracer:
    """w's whole array with `value` (numpy's assignment cast) in the lanes of its window."""
    ctx = w.ctx
    if isinstance(value, Window):
        lead = w.ndim - value.ndim
        if lead < 0 or any(d + lead not in w.spans or not s.same(w.spans[d + lead]) for d, s in value.spans.items()):
            raise UnsupportedOp(f"writing a slice between traced bounds into one of other bounds ({ctx.where()}): "
                                f"numpy raises unless the extents agree; {_ADVICE}")
        new = value.full
    else:
        new = ctx.lift(value, w.full)
    lead = w.ndim - new.ndim
    if lead < 0 or any(d - lead >= 0 and new.shape[d - lead] != 1 and not (isinstance(value, Window) and
                                                                            d - lead in value.spans)
                       for d in w.spans):
        raise UnsupportedOp(f"writing an array of static size into a slice between traced bounds "
                            f"({ctx.where()}): numpy raises unless the extents agree; {_ADVICE}")
    if new.dtype != w.dtype:
        new = new.astype(w.dtype)
    mask = w.mask()
    return np.where(mask if mask is not None else True, new, w.full)


def write(x: Tracer, key: tuple, v) -> None:
    """x[key] = v for an expanded key with slices between traced bounds."""
    from .inplace import same_index

    if isinstance(v, Window) and v.source is not None and v.source[0] is x and len(v.source[1]) == len(key) \
            and all(same_index(a, b) for a, b in zip(v.source[1], key)):
        return      # `a[:j] += 1` ends with a[:j] = (the window, already written through)
    getitem(x, key).assign(v)

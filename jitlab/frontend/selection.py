"""`x[mask]` with a traced mask: a selection whose length is known only at run time.

No array of that shape can be traced, but most code that takes one uses it in ways that
do not need its length: elementwise arithmetic on selections made with the same mask,
sums, means, any/all, and writing it back under the same mask (`a[m] = b[m] * 2`,
`a[m] += 1`). A `Selection` keeps x's whole array and the mask; it computes on every
element and lets the mask decide at the end (`np.where`), which is what numpy's result
is on the selected elements. Whatever needs the length (its shape, len, max of an
empty selection, passing it to another function) is refused, naming the line.
"""

from __future__ import annotations

import numpy as np

from ..errors import TraceError, UnsupportedOp
from ..ir.core import Value
from .shapeless import Shapeless
from .tracer import Tracer

_ADVICE = ("x[mask] with a traced mask has a length known only at run time; it can be used in elementwise "
           "arithmetic with selections by the same mask, in sum/mean/any/all, and written back with the same "
           "mask (a[mask] = b[mask] * 2); otherwise write np.where(mask, x, other) over the whole array")


class Selection(Shapeless):
    """x[mask] for a traced bool mask over x's leading dims, held as x's whole array and the mask."""

    NAME, ADVICE = "x[mask]", _ADVICE

    def __init__(self, full: Tracer, mask: Tracer):
        self.full, self.mask = full, mask

    @property
    def ctx(self):
        return self.full.ctx

    @property
    def dtype(self) -> np.dtype:
        return self.full.dtype

    @property
    def ndim(self) -> int:
        return self.full.ndim - self.mask.ndim + 1

    def _spread(self) -> Tracer:
        """The mask with unit dims appended, to broadcast against the whole array."""
        m, ctx = self.mask, self.ctx
        extra = self.full.ndim - m.ndim
        return m if extra == 0 else ctx.op("np.reshape", m.value, shape=m.shape + (1,) * extra)

    def _whole(self, other, what: str):
        """`other` as an operand over the whole array: a selection by the same mask, or what broadcasts to a row."""
        if isinstance(other, Selection):
            if not same_mask(self.mask.value, other.mask.value):
                raise UnsupportedOp(f"{what} mixes selections by different masks ({self.ctx.where()}): {_ADVICE}")
            return other.full
        if np.ndim(other) >= self.ndim:
            raise UnsupportedOp(f"{what} of x[mask] with an array of rank {np.ndim(other)} needs the selection's "
                                f"length ({self.ctx.where()}): {_ADVICE}")
        return other

    # -- numpy dispatch -----------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        name = f"np.{ufunc.__name__}"
        out = kwargs.pop("out", None)
        if method == "reduce" and ufunc in _REDUCERS and len(inputs) == 1 and not kwargs:
            return _REDUCERS[ufunc](self)
        if method != "__call__" or kwargs.keys() - {"dtype"}:
            raise UnsupportedOp(f"{name}.{method} with {sorted(kwargs)} on x[mask] ({self.ctx.where()}): {_ADVICE}")
        result = ufunc(*(self._whole(x, name) for x in inputs), **kwargs)
        results = [Selection(r, self.mask) for r in (result if isinstance(result, tuple) else (result,))]
        if out is not None:     # a += 1 on a selection: it is a copy (numpy's too), so rebinding it is the write
            for o, r in zip(out, results):
                if not isinstance(o, Selection):
                    raise UnsupportedOp(f"{name}(..., out=) from x[mask] into another array ({self.ctx.where()}): "
                                        f"{_ADVICE}")
                if r.dtype != o.dtype:
                    if not np.can_cast(r.dtype, o.dtype, "same_kind"):
                        raise TraceError(f"{name} cannot cast its {r.dtype} result into the {o.dtype} selection "
                                         f"({self.ctx.where()})")
                    r.full = r.full.astype(o.dtype)
                o.full = r.full
            return out if len(out) > 1 else out[0]
        return tuple(results) if len(results) > 1 else results[0]

    def __array_function__(self, func, types, args, kwargs):
        if func in _FUNCTIONS:
            return _FUNCTIONS[func](*args, **kwargs)
        raise UnsupportedOp(f"np.{func.__name__} of x[mask] ({self.ctx.where()}): {_ADVICE}")

    # -- reductions ---------------------------------------------------------------
    def _filled(self, fill) -> Tracer:
        return np.where(self._spread(), self.full, self.ctx.constant(fill, self.full.dtype))

    def _axes(self, axis, what: str):
        if axis is None:
            return None
        if axis in (0, -self.ndim):
            return tuple(range(self.mask.ndim))
        raise UnsupportedOp(f"x[mask].{what}(axis={axis}) ({self.ctx.where()}): only axis=None and axis=0, the "
                            "selected axis, are supported")

    def sum(self, axis=None, dtype=None):
        return np.sum(self._filled(0), axis=self._axes(axis, "sum"), dtype=dtype)

    def prod(self, axis=None, dtype=None):
        return np.prod(self._filled(1), axis=self._axes(axis, "prod"), dtype=dtype)

    def any(self, axis=None):
        return np.any(self._filled(False), axis=self._axes(axis, "any"))

    def all(self, axis=None):
        return np.all(self._filled(True), axis=self._axes(axis, "all"))

    def mean(self, axis=None, dtype=None):
        """numpy's mean (np.mean's dtype rule: integers in float64; f16 summed in f32); nan when empty."""
        from .numpy_api import astype
        from .operands import float_of

        x = astype(self.full, dtype) if dtype is not None else float_of(self.full)
        wide = x.astype(np.float32) if x.dtype == np.float16 else x
        axes = self._axes(axis, "mean")
        spread = self._spread()
        total = np.sum(np.where(spread, wide, self.ctx.constant(0, wide.dtype)), axis=axes)
        count = np.sum(np.broadcast_to(spread, wide.shape), axis=axes).astype(wide.dtype)
        return (total / count).astype(x.dtype)

    def max(self, *args, **kwargs):
        self._refuse("the max (numpy raises on an empty selection, which a compiled kernel cannot)")

    def min(self, *args, **kwargs):
        self._refuse("the min (numpy raises on an empty selection, which a compiled kernel cannot)")

    def astype(self, dtype, copy=True):
        return Selection(self.full.astype(dtype), self.mask)

    def copy(self):
        return Selection(self.full, self.mask)

    def clip(self, a_min=None, a_max=None):
        return Selection(np.clip(self.full, self._whole(a_min, "clip"), self._whole(a_max, "clip")), self.mask)


def _where(cond, x, y):
    sel = next(a for a in (cond, x, y) if isinstance(a, Selection))
    return Selection(np.where(*(sel._whole(a, "np.where") for a in (cond, x, y))), sel.mask)


_REDUCERS = {np.add: Selection.sum, np.multiply: Selection.prod, np.logical_or: Selection.any,
             np.logical_and: Selection.all}
def _method(name: str):
    """np.<name>(selection, ...) as the selection's method; keepdims, out= and the like are refused."""
    def call(a, *args, **kwargs):
        if not isinstance(a, Selection):
            raise UnsupportedOp(f"np.{name} with x[mask] as other than its first argument: {_ADVICE}")
        try:
            return getattr(a, name)(*args, **kwargs)
        except TypeError as e:
            raise UnsupportedOp(f"np.{name} of x[mask] ({a.ctx.where()}): {e}; only axis, dtype (and for clip "
                                "its bounds) are supported") from None
    return call


_FUNCTIONS = {np.sum: _method("sum"), np.prod: _method("prod"), np.mean: _method("mean"),
              np.any: _method("any"), np.all: _method("all"), np.clip: _method("clip"), np.where: _where}


def same_mask(a: Value, b: Value) -> bool:
    """Whether two mask values are the same array: one value, or one op on the same operands (`x > 0` twice)."""
    if a is b:
        return True
    da, db = getattr(a, "op", None), getattr(b, "op", None)
    return da is not None and db is not None and da.name == db.name and a.index == b.index and \
        len(da.operands) == len(db.operands) and all(x is y for x, y in zip(da.operands, db.operands)) and \
        da.attrs.keys() == db.attrs.keys() and all(da.attrs[k] is db.attrs[k] or da.attrs[k] == db.attrs[k]
                                                   for k in da.attrs)


def select(x: Tracer, mask: Tracer) -> Selection:
    """x[mask] for a traced bool mask over x's leading dims."""
    ctx = x.ctx
    if mask.ndim == 0 or mask.shape != x.shape[:mask.ndim]:
        raise TraceError(f"the mask {mask.value.type} does not match the leading dims of {x.value.type} "
                         f"({ctx.where()})")
    return Selection(x.copy(), mask)


def written(x: Tracer, mask: Tracer, sel: Selection) -> Tracer:
    """x's value after x[mask] = sel, sel a selection by the same mask."""
    if not same_mask(mask.value, sel.mask.value):
        raise UnsupportedOp(f"x[mask] = y[other_mask] with a different traced mask ({x.ctx.where()}): the two "
                            "selections may differ in length; write x = np.where(mask, values, x)")
    whole = sel.full
    if np.broadcast_shapes(tuple(whole.shape), tuple(x.shape)) != tuple(x.shape):
        raise TraceError(f"x[mask] = y[mask]: y {whole.value.type} does not fit x {x.value.type} "
                         f"({x.ctx.where()})")
    return np.where(sel._spread(), whole.astype(x.dtype) if whole.dtype != x.dtype else whole, x)

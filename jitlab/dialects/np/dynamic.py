"""Slices at offsets known only at run time (XLA's dynamic_slice and dynamic_update_slice):
what `a[i]`, `a[i - 1:i + 2]` and `a[:, j] = v` become when `i` and `j` are traced integer
scalars (a loop's induction variable). The extent is static; the offset is checked when the op
runs, with numpy's rules: an integer index lies in [-n, n) and counts from the end when negative;
a slice `s:s+k` must hold exactly its k elements as numpy would slice it (each bound counting from
the end when negative). Anything else is an OutOfBoundsError (an IndexError, as numpy raises, or
a slice numpy would cut short), never a read or write outside the array.

Operands: the array (and, for the update, the new values), then one integer scalar per entry of
`axes`. `sizes` gives the extent along each of those axes; `index_axes` lists those of them that
numpy indexes with an integer (their extent is 1).
"""

from __future__ import annotations

from ...errors import OutOfBoundsError
from ...ir.attributes import INTS
from ...ir.opdef import Trait, defop
from .common import INT as INT_KINDS
from .common import attr, check_dtype


def _check_axes(ctx, x, starts, attrs) -> None:
    axes, sizes = attrs["axes"], attrs["sizes"]
    if len(axes) != len(sizes) or len(axes) != len(starts):
        raise ctx.error(f"needs one start operand and one size per axis, got {len(starts)} start(s) for axes "
                        f"{list(axes)} and sizes {list(sizes)}")
    if len(set(axes)) != len(axes) or any(not 0 <= a < x.rank for a in axes):
        raise ctx.error(f"axes {list(axes)} must be distinct axes of {x}")
    if not set(attrs["index_axes"]) <= set(axes):
        raise ctx.error(f"index_axes {list(attrs['index_axes'])} must be among axes {list(axes)}")
    for a, k in zip(axes, sizes):
        n = x.shape[a]
        if k < 0 or isinstance(n, int) and k > n or a in attrs["index_axes"] and k != 1:
            raise ctx.error(f"size {k} does not fit axis {a} of {x}"
                            + (" (an integer index takes 1)" if a in attrs["index_axes"] else ""))
    for s in starts:
        if s.rank != 0:
            raise ctx.error(f"a start must be an integer scalar, got {s}")
        check_dtype(ctx, s, INT_KINDS, "a start")


def _slice_infer(ctx, types, attrs):
    x, *starts = types
    _check_axes(ctx, x, starts, attrs)
    shape = list(x.shape)
    for a, k in zip(attrs["axes"], attrs["sizes"]):
        shape[a] = k
    return [x.with_shape(shape)]


def _update_infer(ctx, types, attrs):
    x, v, *starts = types
    _check_axes(ctx, x, starts, attrs)
    if v.dtype != x.dtype or v.rank != x.rank:
        raise ctx.error(f"the update {v} must have the dtype and rank of {x}")
    sizes = dict(zip(attrs["axes"], attrs["sizes"]))
    for d in range(x.rank):
        ctx.equal(v.shape[d], sizes.get(d, x.shape[d]), f"dim {d} of the update")
    return [x]


def offsets(op: str, shape, starts, axes, sizes, index_axes) -> tuple[slice, ...]:
    """The region of an array of `shape` that these starts pick, checked with numpy's rules."""
    region = [slice(None)] * len(shape)
    for s, a, k in zip(starts, axes, sizes):
        n, s = shape[a], int(s)
        if a in index_axes:
            if not -n <= s < n:
                raise OutOfBoundsError(f"{op}: index {s} is out of bounds for axis {a} with size {n}")
            s = s + n if s < 0 else s
        else:
            picked = range(n)[s:s + k]
            if len(picked) != k:
                raise OutOfBoundsError(f"{op}: the slice {s}:{s + k} of axis {a} with size {n} holds "
                                       f"{len(picked)} element(s) where {k} were traced")
            s = picked.start if k else 0
        region[a] = slice(s, s + k)
    return tuple(region)


def _slice(x, *starts, axes, sizes, index_axes):
    return x[offsets("np.dynamic_slice", x.shape, starts, axes, sizes, index_axes)].copy()


def _update(x, v, *starts, axes, sizes, index_axes):
    out = x.copy()
    out[offsets("np.dynamic_update_slice", x.shape, starts, axes, sizes, index_axes)] = v
    return out


_ATTRS = {"axes": attr(INTS, doc="the axes that start operands index, in order"),
          "sizes": attr(INTS, doc="the extent taken along each of those axes"),
          "index_axes": attr(INTS, (), doc="those axes numpy indexes with an integer (extent 1, negatives "
                                           "count from the end, [-n, n))")}

defop("np.dynamic_slice", operands=(1, None), attrs=_ATTRS, traits=(Trait.PURE,), infer=_slice_infer,
      reference=_slice, operand_names=("x",),
      doc="x's block of extent `sizes` along `axes` at offsets given by the scalar operands (checked).")
defop("np.dynamic_update_slice", operands=(2, None), attrs=_ATTRS, traits=(Trait.PURE,), infer=_update_infer,
      reference=_update, operand_names=("x", "update"),
      doc="x with its block at the offsets given by the scalar operands replaced by `update` (checked).")

"""Shape and layout ops: reshapes, transposes, concat/split, slicing, padding, tiling."""

from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from ...ir.shapes import Sym, exact_div, num_elements
from ..graph import T
from ..node import Node
from ..registry import onnx_op
from .util import broadcast_shapes, need_rank, norm_axes, norm_axis, positive_attr, static_dim

BIG = 2 ** 62        # slice bounds past this mean "to the end"


def resolve_shape(n: Node, dims, target, allowzero: bool) -> tuple:
    """ONNX Reshape's target: 0 copies the input dim (unless allowzero), -1 is inferred."""
    out, infer_at = [], None
    for i, d in enumerate(target):
        if isinstance(d, (int, np.integer)) and d == -1:
            if infer_at is not None:
                raise n.error(ShapeError, f"shape {list(target)} has more than one -1")
            infer_at = i
            out.append(1)
        elif isinstance(d, (int, np.integer)) and d == 0 and not allowzero:
            if i >= len(dims):
                raise n.error(ShapeError, f"shape {list(target)} copies dim {i}, the input has rank {len(dims)}")
            out.append(dims[i])
        elif isinstance(d, (int, np.integer)) and d < 0:
            raise n.error(ShapeError, f"shape {list(target)} has the negative entry {d}")
        else:
            out.append(d if isinstance(d, Sym) else int(d))
    if infer_at is not None:
        rest = num_elements(tuple(out))
        inferred = exact_div(num_elements(tuple(dims)), rest) if rest != 0 else None
        if inferred is None:
            raise n.error(ShapeError, f"cannot reshape {list(dims)} to {list(target)}")
        out[infer_at] = inferred
    return tuple(out)


@onnx_op("Reshape", 5, 13, 14, 19, 21, 23, 24, 25)
def reshape(n: Node) -> T:
    x = n.input(0)
    target = n.static(1, "the shape").reshape(-1).tolist()
    return x.reshape(resolve_shape(n, x.shape, target, bool(n.attr("allowzero", 0))))


@onnx_op("Flatten", 1, 9, 11, 13, 21, 23, 24, 25)
def flatten(n: Node) -> T:
    x = n.input(0)
    axis = n.attr("axis", 1)
    axis = axis if axis == x.rank else norm_axis(n, axis, x.rank)
    return x.reshape((num_elements(x.shape[:axis]), num_elements(x.shape[axis:])))


def _axes(n: Node, since_input: int) -> list[int] | None:
    """Axes from the attribute (older opsets) or input 1 (from `since_input`)."""
    if n.opset >= since_input:
        return n.static_ints(1, "axes")
    return n.attr("axes", None)


@onnx_op("Squeeze", 1, 11, 13, 21, 23, 24, 25)
def squeeze(n: Node) -> T:
    x = n.input(0)
    axes = _axes(n, 13)
    if axes is None:
        axes = [i for i, d in enumerate(x.shape) if static_dim(n, d, f"dim {i}") == 1]
    axes = norm_axes(n, axes, x.rank)
    if not axes:
        return x
    return n.g.op("np.squeeze", x, axes=axes)


@onnx_op("Unsqueeze", 1, 11, 13, 21, 23, 24, 25)
def unsqueeze(n: Node) -> T:
    x = n.input(0)
    axes = _axes(n, 13)
    if axes is None:
        raise n.error(ShapeError, "needs axes")
    return n.g.op("np.expand_dims", x, axes=norm_axes(n, axes, x.rank + len(axes)))


@onnx_op("Transpose", 1, 13, 21, 23, 24, 25)
def transpose(n: Node) -> T:
    x = n.input(0)
    perm = n.attr("perm", list(range(x.rank))[::-1])
    if sorted(perm) != list(range(x.rank)):
        raise n.error(ShapeError, f"perm {perm} is not a permutation of {x.rank} axes")
    return x.transpose(perm)


@onnx_op("Expand", 8, 13)
def expand(n: Node) -> T:
    x = n.input(0)
    shape = tuple(d if isinstance(d, Sym) else int(d) for d in n.static(1, "the shape").reshape(-1).tolist())
    out = broadcast_shapes(n, x.shape, shape)
    return x if out == x.shape else n.g.op("np.broadcast_to", x, shape=out)


@onnx_op("Concat", 4, 11, 13)
def concat(n: Node) -> T:
    xs = n.inputs()
    axis = norm_axis(n, n.attr("axis"), xs[0].rank)
    return xs[0] if len(xs) == 1 else n.g.op("np.concatenate", *xs, axis=axis)


@onnx_op("Split", 2, 11, 13, 18)
def split(n: Node):
    x = n.input(0)
    axis = norm_axis(n, n.attr("axis", 0), x.rank)
    sizes = n.static_ints(1, "split") if n.opset >= 13 else n.attr("split", None)
    count = len(n.proto.output)
    if sizes is None:
        parts = n.attr("num_outputs", count) if n.opset >= 18 else count
        dim = static_dim(n, x.shape[axis], f"dim {axis}")
        chunk = -(-dim // parts) if n.opset >= 18 else dim // parts
        if n.opset < 18 and dim % parts:
            raise n.error(ShapeError, f"dim {axis} of size {dim} does not split into {parts} equal parts")
        sizes = [chunk] * (parts - 1) + [dim - chunk * (parts - 1)]
    if len(sizes) != count:
        raise n.error(ShapeError, f"{len(sizes)} split sizes for {count} outputs")
    return n.g.ops("np.split", [x], axis=axis, sizes=tuple(sizes))


def _slice_bounds(n: Node, dim, start: int, end: int, step: int) -> tuple:
    """Absolute (start, stop) as np.slice wants them, clamped as ONNX Slice clamps."""
    if isinstance(dim, Sym):
        if step != 1 or start < -BIG or end < -BIG:
            raise n.unsupported(f"slicing the symbolic dim {dim} with start {start}, end {end}, step {step}")
        lo = start if start >= 0 else dim + start
        return lo, (dim if end >= BIG else (end if end >= 0 else dim + end))
    start, end = (v + dim if v < 0 else v for v in (start, end))
    if step > 0:
        return min(max(start, 0), dim), min(max(end, 0), dim)
    return min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)


@onnx_op("Slice", 10, 11, 13)
def slice_(n: Node) -> T:
    x = n.input(0)
    if n.input(1).known is None and n.input(2).known is None:
        sizes = _extents(n.input(1), n.input(2))
        if sizes is not None:
            return _dynamic_slice(n, x, sizes)
    starts, ends = n.static_ints(1, "starts"), n.static_ints(2, "ends")
    axes = n.static_ints(3, "axes") or list(range(len(starts)))
    steps = n.static_ints(4, "steps") or [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise n.error(ShapeError, "starts, ends, axes and steps must have the same length")
    if 0 in steps:
        raise n.error(ShapeError, "a step is 0")
    lo, hi, st = [0] * x.rank, list(x.shape), [1] * x.rank
    for a, s, e, step in zip(axes, starts, ends, steps):
        a = norm_axis(n, a, x.rank)
        lo[a], hi[a] = _slice_bounds(n, x.shape[a], s, e, step)
        st[a] = step
    if lo == [0] * x.rank and hi == list(x.shape) and st == [1] * x.rank:
        return x
    return n.g.op("np.slice", x, starts=tuple(lo), stops=tuple(hi), steps=tuple(st))


_SHAPE_ONLY = ("np.reshape", "np.expand_dims", "np.squeeze")


def _source(x: T):
    """The value `x` reshapes (an Unsqueeze of a loop's counter is the counter)."""
    v = x.value
    while getattr(v.owner, "name", None) in _SHAPE_ONLY:
        v = v.owner.operands[0]
    return v


def _extents(starts: T, ends: T) -> list[int] | None:
    """ends - starts when ends is starts plus a constant (`i:i + k` with i traced), else None."""
    start, end = _source(starts), _source(ends)
    op = end.owner
    if getattr(op, "name", None) != "np.add" or start not in op.operands:
        return None
    other = op.operands[1] if op.operands[0] is start else op.operands[0]
    k = starts.g.value_of(other)
    if k is None or k.dtype == object or k.size not in (1, starts.shape[0] if starts.rank else 1):
        return None
    return np.broadcast_to(k.reshape(-1), (starts.shape[0] if starts.rank else 1,)).astype(int).tolist()


def _dynamic_slice(n: Node, x: T, sizes: list[int]) -> T:
    """Slice with traced starts and ends - starts known: np.dynamic_slice, whose bounds follow numpy
    (a start past the end is an OutOfBoundsError where ONNX would clamp it: an error, never a shorter slice)."""
    axes = n.static_ints(3, "axes") or list(range(len(sizes)))
    steps = n.static_ints(4, "steps") or [1] * len(sizes)
    if len(axes) != len(sizes) or any(step != 1 for step in steps):
        raise n.unsupported(f"traced starts with axes {axes} and steps {steps}: only steps of 1, one start per axis")
    starts = n.input(1).cast(np.int64).reshape((len(sizes),))
    at = [n.g.op("np.slice", starts, starts=(k,), stops=(k + 1,), steps=(1,)).reshape(()) for k in range(len(sizes))]
    return n.g.op("np.dynamic_slice", x, *at, axes=tuple(norm_axis(n, a, x.rank) for a in axes), sizes=tuple(sizes),
                  index_axes=())


@onnx_op("Tile", 6, 13)
def tile(n: Node) -> T:
    x = n.input(0)
    reps = n.static_ints(1, "repeats")
    if len(reps) != x.rank:
        raise n.error(ShapeError, f"repeats {reps} needs one entry per dim of {x.type}")
    return x if all(r == 1 for r in reps) else n.g.op("np.tile", x, reps=tuple(reps))


@onnx_op("Pad", 11, 13, 18, 19, 21, 23, 24, 25)
def pad(n: Node) -> T:
    x = n.input(0)
    pads = n.static_ints(1, "pads")
    value = n.static_scalar(2, "constant_value", 0)
    axes = n.static_ints(3, "axes") if n.opset >= 18 else None
    mode = n.attr("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise n.unsupported(f"attribute 'mode' = {mode!r}")
    axes = [norm_axis(n, a, x.rank) for a in axes] if axes else list(range(x.rank))
    if len(pads) != 2 * len(axes):
        raise n.error(ShapeError, f"pads {pads} needs 2 entries per padded axis ({len(axes)} axes)")
    width = [[0, 0] for _ in range(x.rank)]
    for i, a in enumerate(axes):
        width[a] = [pads[i], pads[i + len(axes)]]
    x = _crop(n, x, width)
    if mode == "wrap":
        return _wrap(n, x, width)
    flat = tuple(max(p, 0) for w in width for p in w)
    if not any(flat):
        return x
    return n.g.op("np.pad", x, pads=flat, mode=mode, value=float(value))


def _crop(n: Node, x: T, width) -> T:
    """Negative pads cut the tensor."""
    if all(p >= 0 for w in width for p in w):
        return x
    starts = tuple(max(-b, 0) for b, _ in width)
    stops = tuple(d - max(-a, 0) for d, (_, a) in zip(x.shape, width))
    return n.g.op("np.slice", x, starts=starts, stops=stops, steps=(1,) * x.rank)


def _wrap(n: Node, x: T, width) -> T:
    """Wrap padding: the tensor repeated around itself, cut to size."""
    for a, (before, after) in enumerate(width):
        before, after = max(before, 0), max(after, 0)
        if not before and not after:
            continue
        dim = static_dim(n, x.shape[a], f"dim {a}")
        copies = 1 + 2 * -(-max(before, after) // max(dim, 1))
        reps = tuple(copies if i == a else 1 for i in range(x.rank))
        tiled = n.g.op("np.tile", x, reps=reps)
        start = (copies // 2) * dim - before
        starts = tuple(start if i == a else 0 for i in range(x.rank))
        stops = tuple(start + dim + before + after if i == a else d for i, d in enumerate(x.shape))
        x = n.g.op("np.slice", tiled, starts=starts, stops=stops, steps=(1,) * x.rank)
    return x


@onnx_op("DepthToSpace", 1, 11, 13, 28)
def depth_to_space(n: Node) -> T:
    x = n.input(0)
    bs, mode = positive_attr(n, "blocksize"), n.attr("mode", "DCR")
    need_rank(n, x, 4)
    b, c, h, w = x.shape
    if mode == "DCR":
        tmp = x.reshape((b, bs, bs, c // (bs * bs), h, w)).transpose((0, 3, 4, 1, 5, 2))
    elif mode == "CRD":
        tmp = x.reshape((b, c // (bs * bs), bs, bs, h, w)).transpose((0, 1, 4, 2, 5, 3))
    else:
        raise n.unsupported(f"attribute 'mode' = {mode!r}")
    return tmp.reshape((b, c // (bs * bs), h * bs, w * bs))


@onnx_op("SpaceToDepth", 1, 13, 28)
def space_to_depth(n: Node) -> T:
    x = n.input(0)
    bs, mode = positive_attr(n, "blocksize"), n.attr("mode", "DCR")
    need_rank(n, x, 4)
    b, c, h, w = x.shape
    tmp = x.reshape((b, c, h // bs, bs, w // bs, bs))
    if mode == "DCR":
        tmp = tmp.transpose((0, 3, 5, 1, 2, 4))
    elif mode == "CRD":
        tmp = tmp.transpose((0, 1, 3, 5, 2, 4))
    else:
        raise n.unsupported(f"attribute 'mode' = {mode!r}")
    return tmp.reshape((b, c * bs * bs, h // bs, w // bs))


@onnx_op("Gather", 1, 11, 13)
def gather(n: Node) -> T:
    x, indices = n.input(0), n.input(1)
    return n.g.op("np.take", x, indices, axis=norm_axis(n, n.attr("axis", 0), x.rank))


@onnx_op("CenterCropPad", 18)
def center_crop_pad(n: Node) -> T:
    x = n.input(0)
    shape = n.static_ints(1, "shape")
    axes = [norm_axis(n, a, x.rank) for a in n.attr("axes", list(range(x.rank)))]
    if len(shape) != len(axes):
        raise n.error(ShapeError, f"shape {shape} needs one entry per axis {axes}")
    width = [[0, 0] for _ in range(x.rank)]
    for a, target in zip(axes, shape):
        diff = target - static_dim(n, x.shape[a], f"dim {a}")
        width[a] = [diff // 2, diff - diff // 2] if diff >= 0 else [-((-diff) // 2), -(-diff - (-diff) // 2)]
    x = _crop(n, x, width)
    flat = tuple(max(p, 0) for w in width for p in w)
    return n.g.op("np.pad", x, pads=flat) if any(flat) else x

"""Gathers, scatters, TopK, CumProd, BitCast and ReverseSequence."""

from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from ..graph import T
from ..node import Node
from ..reader import dtype_of
from ..registry import onnx_op
from .util import norm_axis, static_dim, where

REDUCTIONS = ("none", "add", "mul", "max", "min")


@onnx_op("GatherElements", 11, 13)
def gather_elements(n: Node) -> T:
    x, indices = n.input(0), n.input(1)
    return n.g.op("np.take_along_axis", x, indices, axis=norm_axis(n, n.attr("axis", 0), x.rank))


@onnx_op("GatherND", 11, 12, 13)
def gather_nd(n: Node) -> T:
    return n.g.op("np.gather_nd", n.input(0), n.input(1), batch_dims=n.attr("batch_dims", 0))


def _reduction(n: Node) -> str:
    reduction = n.attr("reduction", "none")
    if reduction not in REDUCTIONS:
        raise n.unsupported(f"attribute 'reduction' = {reduction!r}")
    return reduction


@onnx_op("ScatterElements", 11, 13, 16, 18)
def scatter_elements(n: Node) -> T:
    x = n.input(0)
    return n.g.op("np.scatter_elements", x, n.input(1), n.input(2),
                  axis=norm_axis(n, n.attr("axis", 0), x.rank), reduction=_reduction(n))


@onnx_op("Scatter", 9, 11)
def scatter(n: Node) -> T:
    x = n.input(0)
    return n.g.op("np.scatter_elements", x, n.input(1), n.input(2), axis=norm_axis(n, n.attr("axis", 0), x.rank))


@onnx_op("ScatterND", 11, 13, 16, 18)
def scatter_nd(n: Node) -> T:
    return n.g.op("np.scatter_nd", n.input(0), n.input(1), n.input(2), reduction=_reduction(n))


@onnx_op("TopK", 10, 11, 24)
def top_k(n: Node):
    x = n.input(0)
    k = int(n.static_scalar(1, "K"))
    axis = norm_axis(n, n.attr("axis", -1), x.rank)
    largest = bool(n.attr("largest", 1))
    n.attr("sorted", 1)     # unsorted output may come in any order; sorted is one of them
    return n.g.ops("np.topk", [x], k=k, axis=axis, largest=largest)


@onnx_op("CumProd", 26)
def cumprod(n: Node) -> T:
    x = n.input(0)
    axis = norm_axis(n, int(n.static_scalar(1, "axis")), x.rank)
    return n.g.op("np.cumprod", x, axis=axis, exclusive=bool(n.attr("exclusive", 0)),
                  reverse=bool(n.attr("reverse", 0)))


@onnx_op("BitCast", 26)
def bitcast(n: Node) -> T:
    return n.g.op("np.bitcast", n.input(0), dtype=dtype_of(n.attr("to"), f"attribute 'to' of {n.label}"))


@onnx_op("ReverseSequence", 10, 28)
def reverse_sequence(n: Node) -> T:
    """Reverses the first lens[b] steps of each batch entry: a gather along the time axis."""
    x, lens = n.input(0), n.input(1).cast(np.int64)
    batch_axis, time_axis = n.attr("batch_axis", 1), n.attr("time_axis", 0)
    if {batch_axis, time_axis} != {0, 1} or x.rank < 2:
        raise n.error(ShapeError, f"batch_axis {batch_axis} and time_axis {time_axis} must be 0 and 1 "
                                  f"of an input of rank >= 2, got {x.type}")
    steps = static_dim(n, x.shape[time_axis], "the time dim")
    shape = [1] * x.rank
    shape[time_axis] = steps
    t = n.g.const(np.arange(steps, dtype=np.int64).reshape(shape))
    lens_shape = [1] * x.rank
    lens_shape[batch_axis] = x.shape[batch_axis]
    length = lens.reshape(tuple(lens_shape))
    source = where(t < length, length - 1 - t, t)
    index = n.g.op("np.broadcast_to", source, shape=x.shape)
    return n.g.op("np.take_along_axis", x, index, axis=time_axis)


@onnx_op("TensorScatter", 24)
def tensor_scatter(n: Node) -> T:
    """Writes `update` into the cache along the sequence axis from each batch entry's write index."""
    cache, update = n.input(0), n.input(1)
    starts = n.input(2, required=False)
    mode = n.attr("mode", "linear")
    if mode not in ("linear", "circular"):
        raise n.unsupported(f"attribute 'mode' = {mode!r}")
    axis = norm_axis(n, n.attr("axis", -2), cache.rank)
    length = update.shape[axis]
    steps = np.arange(length, dtype=np.int64).reshape(tuple(length if i == axis else 1 for i in range(cache.rank)))
    first = starts.cast(np.int64).reshape(starts.shape + (1,) * (cache.rank - 1)) if starts is not None \
        else n.g.const(np.zeros((1,) * cache.rank, np.int64))
    index = first + n.g.const(steps)
    if mode == "circular":
        index = n.g.op("np.mod", index, index._lift(cache.shape[axis]))
    index = n.g.op("np.broadcast_to", index, shape=update.shape)
    return n.g.op("np.scatter_elements", cache, index, update, axis=axis)

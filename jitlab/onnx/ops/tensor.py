"""Tensors made from attributes and shapes (constants, Shape, Range, EyeLike ...), and
inference-time no-ops (Dropout)."""

from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from ...ir.shapes import num_elements
from ..graph import T, settle
from ..node import Node
from ..reader import dtype_of
from ..registry import onnx_op
from .util import norm_axis, static_dim, where


@onnx_op("Constant", 9, 11, 12, 13, 19, 21, 23, 24, 25)
def constant(n: Node) -> T:
    given = [k for k in ("value", "value_float", "value_floats", "value_int", "value_ints", "sparse_value",
                         "value_string", "value_strings") if n.has_attr(k)]
    if len(given) != 1:
        raise n.error(ShapeError, f"needs exactly one value attribute, got {given or 'none'}")
    kind = given[0]
    if kind in ("sparse_value", "value_string", "value_strings"):
        raise n.unsupported(f"attribute '{kind}' is not supported (jitlab has no sparse or string tensors)")
    value = n.attr(kind)
    dtype = {"value_float": np.float32, "value_floats": np.float32, "value_int": np.int64,
             "value_ints": np.int64}.get(kind)
    return n.g.const(value, dtype)


@onnx_op("ConstantOfShape", 9, 20, 21, 23, 24, 25)
def constant_of_shape(n: Node) -> T:
    shape = n.static(0, "the shape")
    value = n.attr("value", np.zeros(1, np.float32))
    if value.size != 1:
        raise n.error(ShapeError, f"attribute 'value' must hold one element, got shape {list(value.shape)}")
    fill = n.g.const(value.reshape(()))
    return n.g.op("np.broadcast_to", fill, shape=tuple(shape.reshape(-1).tolist()))


@onnx_op("Shape", 1, 13, 15, 19, 21, 23, 24, 25)
def shape(n: Node) -> T:
    x = n.input(0)
    start, end = n.attr("start", 0), n.attr("end", None)
    rank = x.rank
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = rank if end is None else min(max(end + rank if end < 0 else end, 0), rank)
    dims = np.array(list(x.shape[start:end]), dtype=object)
    return n.g.const(settle(dims.reshape(len(dims))) if len(dims) else np.zeros(0, np.int64))


@onnx_op("Size", 1, 13, 19, 21, 23, 24, 25)
def size(n: Node) -> T:
    return n.g.const(settle(np.array(num_elements(n.input(0).shape), dtype=object)))


@onnx_op("Range", 11, 27)
def range_(n: Node) -> T:
    """Computed at import (its inputs fix its length); float16 steps in float32 when stash_type says so."""
    start, limit, delta = (n.static_scalar(i, what) for i, what in ((0, "start"), (1, "limit"), (2, "delta")))
    dtype = n.input(0).dtype
    if delta == 0:
        raise n.error(ShapeError, "delta must not be 0")
    stash = n.attr("stash_type", 1 if n.opset >= 27 else None)
    if dtype == np.float16 and stash is not None:
        wide = dtype_of(stash, "attribute 'stash_type'")
        return n.g.const(np.arange(wide.type(start), float(limit), float(delta), dtype=wide).astype(dtype))
    return n.g.const(np.arange(start, limit, delta).astype(dtype))


@onnx_op("EyeLike", 9, 22)
def eye_like(n: Node) -> T:
    x = n.input(0)
    if x.rank != 2:
        raise n.error(ShapeError, f"takes a 2-D input, got {x.type}")
    rows, cols = (static_dim(n, d, "the input's shape") for d in x.shape)
    dtype = dtype_of(n.attr("dtype"), "attribute 'dtype'") if n.has_attr("dtype") else x.dtype
    return diagonals(n.g, rows, cols).eq(n.attr("k", 0)).cast(dtype)


def diagonals(g, rows: int, cols: int) -> T:
    """The (rows, cols) tensor of column - row: which diagonal each entry is on. Made from two
    ranges, so a large one is computed at run time, never held as a constant."""
    row = g.const(np.arange(rows, dtype=np.int64).reshape(rows, 1))
    return g.const(np.arange(cols, dtype=np.int64).reshape(1, cols)) - row


@onnx_op("Dropout", 7, 10)
def dropout_7(n: Node):
    """Inference: the identity; the mask is all true."""
    x = n.input(0)
    n.attr("ratio", 0.5)
    return x, _all_true(x) if n.wants_output(1) else None


@onnx_op("Dropout", 12, 13, 22)
def dropout(n: Node):
    x = n.input(0)
    n.attr("seed", 0)
    training = bool(n.static_scalar(2, "training_mode", False))
    if not training:
        n.input(1, required=False)      # the ratio does not matter at inference
        return x, _all_true(x) if n.wants_output(1) else None
    ratio = n.static_scalar(1, "ratio", 0.5)
    if ratio != 0:
        raise n.unsupported(f"training_mode = true with ratio {ratio} (random dropout is not supported)")
    return x, _all_true(x) if n.wants_output(1) else None


def _all_true(x: T) -> T:
    return x.g.op("np.broadcast_to", x.g.const(np.bool_(True)), shape=x.shape)


@onnx_op("OneHot", 9, 11, 28)
def one_hot(n: Node) -> T:
    indices, values = n.input(0), n.input(2)
    depth = int(n.static_scalar(1, "depth"))
    axis = norm_axis(n, n.attr("axis", -1), indices.rank + 1)
    idx = indices.cast(np.int64)
    idx = where(idx < 0, idx + depth, idx)
    positions = np.arange(depth, dtype=np.int64).reshape([-1] + [1] * (indices.rank - axis))
    expanded = n.g.op("np.expand_dims", idx, axes=(axis,))
    hot = expanded.eq(n.g.const(positions))
    if values.rank != 1 or values.shape[0] != 2:
        raise n.error(ShapeError, f"values must be [off, on], got {values.type}")
    off, on = (n.g.op("np.take", values, n.g.const(np.int64(i)), axis=0) for i in (0, 1))
    return where(hot, on, off)


@onnx_op("Trilu", 14)
def trilu(n: Node) -> T:
    x = n.input(0)
    k = int(n.static_scalar(1, "k", 0))
    if x.rank < 2:
        raise n.error(ShapeError, f"takes a tensor of rank >= 2, got {x.type}")
    rows, cols = (static_dim(n, d, "the last two dims") for d in x.shape[-2:])
    diagonal = diagonals(n.g, rows, cols)
    return where(diagonal >= k if n.attr("upper", 1) else diagonal <= k, x, x._lift(0))

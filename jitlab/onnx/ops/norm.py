"""Normalizations: Batch, Instance, Layer, Group, RMS, LRN, MeanVariance and Lp."""

from __future__ import annotations

import math

from ...errors import DTypeError, ShapeError
from ...ir.shapes import num_elements
from ..graph import T
from ..node import Node
from ..registry import onnx_op
from .util import norm_axis, positive_attr, unary, where
from .window import Window, window_sum


def _channels(p: T, rank: int) -> T:
    """A per-channel [C] parameter shaped to broadcast over N, C, *spatial."""
    return p.reshape(p.shape + (1,) * (rank - 2))


@onnx_op("BatchNormalization", 9, 14, 15)
def batch_norm(n: Node):
    x = n.input(0)
    params = [n.input(i) for i in range(1, 5)]
    for i, (name, p) in enumerate(zip(("scale", "B", "input_mean", "input_var"), params), 1):
        if p.dtype.kind != "f":
            raise n.error(DTypeError, f"{name} (input {i}) must be a float tensor, got {p.type}")
    scale, bias, mean, var = (p.cast(x.dtype) for p in params)
    eps, momentum = n.attr("epsilon", 1e-5), n.attr("momentum", 0.9)
    if not n.attr("training_mode", 0):
        return n.g.op("np.batch_norm", x, scale, bias, mean, var, eps=eps)
    axes = tuple(i for i in range(x.rank) if i != 1)
    batch_mean = x.reduce("mean", axes, keepdims=True)
    centered = x - batch_mean
    batch_var = (centered * centered).reduce("mean", axes, keepdims=True)
    y = centered / unary("sqrt", batch_var + eps) * _channels(scale, x.rank) + _channels(bias, x.rank)
    flat_mean, flat_var = batch_mean.reshape(mean.shape), batch_var.reshape(var.shape)
    return y, mean * momentum + flat_mean * (1 - momentum), var * momentum + flat_var * (1 - momentum)


@onnx_op("InstanceNormalization", 6, 22)
def instance_norm(n: Node) -> T:
    x, scale, bias = n.input(0), n.input(1), n.input(2)
    if x.rank < 3:
        raise n.error(ShapeError, f"takes N, C and spatial dims, got {x.type}")
    y = n.g.op("np.layer_norm", x, axis=2, eps=n.attr("epsilon", 1e-5))
    return y * _channels(scale, x.rank) + _channels(bias, x.rank)


def _moments(x: T, axis: int) -> tuple[T, T]:
    """Mean and biased variance over the dims from axis to the end."""
    axes = tuple(range(axis, x.rank))
    mean = x.reduce("mean", axes, keepdims=True)
    centered = x - mean
    return mean, (centered * centered).reduce("mean", axes, keepdims=True)


@onnx_op("LayerNormalization", 17)
def layer_norm(n: Node):
    x, scale, bias = n.input(0), n.input(1), n.input(2, required=False)
    axis = norm_axis(n, n.attr("axis", -1), x.rank)
    eps = n.attr("epsilon", 1e-5)
    n.attr("stash_type", 1)          # np.layer_norm computes float16 and float32 in float32 (stash_type 1)
    if not (n.wants_output(1) or n.wants_output(2)):
        operands = [x, scale] + ([bias] if bias is not None else [])
        return n.g.op("np.layer_norm", *operands, axis=axis, eps=eps)
    mean, var = _moments(x, axis)
    inv_std = unary("reciprocal", unary("sqrt", var + eps))
    y = (x - mean) * inv_std * scale
    return (y + bias if bias is not None else y), mean, inv_std


@onnx_op("GroupNormalization", 18, 21)
def group_norm(n: Node) -> T:
    x, scale, bias = n.input(0), n.input(1), n.input(2)
    groups, eps = n.attr("num_groups"), n.attr("epsilon", 1e-5)
    n.attr("stash_type", 1)
    batch, channels = x.shape[:2]
    if not isinstance(channels, int) or channels % groups:
        raise n.error(ShapeError, f"num_groups {groups} must divide the {channels} channels")
    grouped = x.reshape((batch, groups, num_elements(x.shape[1:]) // groups))
    normalized = n.g.op("np.layer_norm", grouped, axis=2, eps=eps)
    if n.opset < 21:
        per_group = (groups, 1)
        normalized = normalized * scale.reshape(per_group) + bias.reshape(per_group)
        return normalized.reshape(x.shape)
    return normalized.reshape(x.shape) * _channels(scale, x.rank) + _channels(bias, x.rank)


@onnx_op("RMSNormalization", 23)
def rms_norm(n: Node) -> T:
    x, scale = n.input(0), n.input(1)
    axis = norm_axis(n, n.attr("axis", -1), x.rank)
    n.attr("stash_type", 1)
    mean_square = (x * x).reduce("mean", tuple(range(axis, x.rank)), keepdims=True)
    return x * unary("rsqrt", mean_square + n.attr("epsilon", 1e-5)) * scale


@onnx_op("LRN", 1, 13)
def lrn(n: Node) -> T:
    """x / (bias + alpha/size * sum of squares over the channel window) ** beta."""
    x = n.input(0)
    size = positive_attr(n, "size")
    alpha, beta, bias = n.attr("alpha", 1e-4), n.attr("beta", 0.75), n.attr("bias", 1.0)
    if x.rank < 2:
        raise n.error(ShapeError, f"takes N, C and spatial dims, got {x.type}")
    batch, channels = x.shape[:2]
    pixels = num_elements(x.shape[2:])
    squares = (x * x).reshape((batch, 1, channels, pixels))
    # a window reaching past every channel sums them all: clamped, it sums the same
    reach = channels - 1 if isinstance(channels, int) else size
    before, after = min((size - 1) // 2, reach), min(math.ceil((size - 1) / 2), reach)
    win = Window((before + after + 1, 1), (1, 1), (1, 1), (before, 0), (after, 0))
    total = window_sum(squares, win).reshape(x.shape)
    return x / (total * (alpha / size) + bias) ** beta


@onnx_op("MeanVarianceNormalization", 9, 13)
def mean_variance_norm(n: Node) -> T:
    x = n.input(0)
    axes = tuple(sorted(norm_axis(n, a, x.rank) for a in n.attr("axes", [0, 2, 3])))
    mean = x.reduce("mean", axes, keepdims=True)
    std = unary("sqrt", (x * x).reduce("mean", axes, keepdims=True) - mean * mean)
    return (x - mean) / (std + 1e-9)


@onnx_op("LpNormalization", 1, 22)
def lp_norm(n: Node) -> T:
    x = n.input(0)
    axis, p = norm_axis(n, n.attr("axis", -1), x.rank), n.attr("p", 2)
    if p == 1:
        norm = unary("abs", x).reduce("sum", (axis,), keepdims=True)
    elif p == 2:
        norm = unary("sqrt", (x * x).reduce("sum", (axis,), keepdims=True))
    else:
        raise n.unsupported(f"attribute 'p' = {p} (1 or 2)")
    zero = norm.eq(0)
    return where(zero, x._lift(0), x / where(zero, norm._lift(1), norm))

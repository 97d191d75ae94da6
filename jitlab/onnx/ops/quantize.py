"""Linear quantization: (de)quantize with per-tensor, per-axis or blocked scales, and the
integer and quantized-linear matmul and conv, as casts, rounding and clipping around
float or int32 arithmetic."""

from __future__ import annotations

import numpy as np

from ...errors import DTypeError
from ..graph import T
from ..node import Node
from ..reader import dtype_of
from ..registry import onnx_op
from .nn import kernel_of
from .util import norm_axis, repeat_axis, slice_axis, unary
from .window import conv, window

_INTEGER_TYPES = (np.int8, np.uint8, np.int16, np.uint16)


def broadcast_param(n: Node, p: T, x: T, axis: int, block: int) -> T:
    """A scale or zero point shaped to broadcast over x: scalar, per axis, or per block."""
    if p.rank == 0 or p.shape == (1,):
        return p.reshape(())
    axis = norm_axis(n, axis, x.rank)
    if not block:
        return p.reshape(tuple(p.shape[0] if i == axis else 1 for i in range(x.rank)))
    spread = repeat_axis(p, axis, block)
    return slice_axis(spread, axis, 0, x.shape[axis]) if spread.shape[axis] != x.shape[axis] else spread


def _qparams(n: Node, x: T) -> tuple[int, int]:
    """The axis (checked once a per-axis scale needs it) and the block size."""
    return n.attr("axis", 1), n.attr("block_size", 0)


def quantize(x: T, scale: T, zero: T | None, dtype) -> T:
    """round-half-even(x / scale) + zero, clipped to the integer dtype's range."""
    info = np.iinfo(dtype)
    q = unary("round", x / scale)
    if zero is not None:
        q = q + zero.cast(q.dtype)
    return x.g.op("np.clip", q, min=float(info.min), max=float(info.max)).cast(dtype)


@onnx_op("QuantizeLinear", 10, 13, 19, 21, 23, 24, 25, 28)
def quantize_linear(n: Node) -> T:
    x, scale, zero = n.input(0), n.input(1), n.input(2, required=False)
    axis, block = _qparams(n, x)
    n.attr("saturate", 1)                       # only casts to float8 saturate
    out = n.attr("output_dtype", 0)
    dtype = zero.dtype if zero is not None else (dtype_of(out, "attribute 'output_dtype'") if out else np.uint8)
    if np.dtype(dtype) not in {np.dtype(t) for t in _INTEGER_TYPES}:
        raise n.unsupported(f"quantizing to {np.dtype(dtype)} (int8, uint8, int16 and uint16 are supported)")
    precision = n.attr("precision", 0)
    work = dtype_of(precision, "attribute 'precision'") if precision else x.dtype
    scale = broadcast_param(n, scale, x, axis, block).cast(work)
    zero = broadcast_param(n, zero, x, axis, block) if zero is not None else None
    return quantize(x.cast(work), scale, zero, dtype)


@onnx_op("DequantizeLinear", 10, 13, 19, 21, 23, 24, 25, 28)
def dequantize_linear(n: Node) -> T:
    x, scale, zero = n.input(0), n.input(1), n.input(2, required=False)
    axis, block = _qparams(n, x)
    out = n.attr("output_dtype", 0)
    values = x.cast(np.float32)
    if zero is not None:
        values = values - broadcast_param(n, zero, x, axis, block).cast(np.float32)
    y = values * broadcast_param(n, scale, x, axis, block).cast(np.float32)
    return y.cast(dtype_of(out, "attribute 'output_dtype'") if out else scale.dtype)


@onnx_op("DynamicQuantizeLinear", 11)
def dynamic_quantize_linear(n: Node):
    """uint8 quantization with the scale and zero point that cover [min(x, 0), max(x, 0)]."""
    x = n.input(0)
    axes = tuple(range(x.rank))
    zero = x._lift(0)
    high = n.g.op("np.maximum", x.reduce("max", axes), zero)
    low = n.g.op("np.minimum", x.reduce("min", axes), zero)
    span = n.g.op("np.where", high.eq(low), x._lift(1), high - low)
    scale = span / 255.0
    point = unary("round", n.g.op("np.clip", -(low / scale), min=0.0, max=255.0))
    return quantize(x, scale, point, np.uint8), scale, point.cast(np.uint8)


def _centered(x: T, zero: T | None) -> T:
    """x - zero in int32."""
    values = x.cast(np.int32)
    return values if zero is None else values - zero.cast(np.int32)


@onnx_op("MatMulInteger", 10)
def matmul_integer(n: Node) -> T:
    a, b = n.input(0), n.input(1)
    a_zero, b_zero = n.input(2, required=False), n.input(3, required=False)
    if a_zero is not None and a_zero.rank == 1 and a.rank >= 2:
        a_zero = a_zero.reshape(a_zero.shape + (1,))          # per row of A
    return n.g.op("np.matmul", _centered(a, a_zero), _centered(b, b_zero))


@onnx_op("QLinearMatMul", 10, 21)
def qlinear_matmul(n: Node) -> T:
    a, a_scale, a_zero, b, b_scale, b_zero, y_scale, y_zero = (n.input(i) for i in range(8))
    product = n.g.op("np.matmul", _centered(a, a_zero), _centered(b, b_zero))
    multiplier = a_scale * b_scale / y_scale
    scaled = product.cast(multiplier.dtype) * multiplier + y_zero.cast(multiplier.dtype)
    info = np.iinfo(y_zero.dtype)
    return n.g.op("np.clip", unary("round", scaled), min=float(info.min), max=float(info.max)).cast(y_zero.dtype)


def _conv_int(n: Node, x: T, w: T, w_zero: T | None) -> T:
    """Integer convolution, exact through float64 (products of 8- and 16-bit ints)."""
    if w_zero is not None and w_zero.rank == 1 and w_zero.shape[0] == w.shape[0] and w_zero.shape[0] != 1:
        w_zero = w_zero.reshape(w_zero.shape + (1,) * (w.rank - 1))
    kernel = kernel_of(n, w)
    xs, ws = x.cast(np.float64), _centered(w, w_zero).cast(np.float64)
    return conv(xs, ws, window(n, x, kernel), n.attr("group", 1)).cast(np.int32)


@onnx_op("ConvInteger", 10)
def conv_integer(n: Node) -> T:
    x, w = n.input(0), n.input(1)
    x_zero, w_zero = n.input(2, required=False), n.input(3, required=False)
    return _conv_int(n, _centered(x, x_zero), w, w_zero)


@onnx_op("QLinearConv", 10)
def qlinear_conv(n: Node) -> T:
    x, x_scale, x_zero, w, w_scale, w_zero, y_scale, y_zero = (n.input(i) for i in range(8))
    bias = n.input(8, required=False)
    acc = _conv_int(n, _centered(x, x_zero), w, w_zero)
    if bias is not None:
        acc = acc + bias.cast(np.int32).reshape(bias.shape + (1,) * (acc.rank - 2))
    if w_scale.rank == 1 and w_scale.shape[0] != 1:
        w_scale = w_scale.reshape(w_scale.shape + (1,) * (acc.rank - 2))
    if x_scale.dtype != w_scale.dtype:
        raise n.error(DTypeError, "x_scale and w_scale must share a dtype")
    multiplier = x_scale * w_scale / y_scale
    scaled = acc.cast(multiplier.dtype) * multiplier + y_zero.cast(multiplier.dtype)
    info = np.iinfo(y_zero.dtype)
    return n.g.op("np.clip", unary("round", scaled), min=float(info.min), max=float(info.max)).cast(y_zero.dtype)

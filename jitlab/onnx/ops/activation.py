"""Activations, each decomposed into elementwise `np` ops (so fusion sees through them),
and the softmax family."""

from __future__ import annotations

import math

import numpy as np

from ..graph import T
from ..node import Node
from ..registry import onnx_op
from .util import maximum, minimum, norm_axis, unary, where


@onnx_op("LeakyRelu", 6, 16)
def leaky_relu(n: Node) -> T:
    x = n.input(0)
    return where(x < 0, x * n.attr("alpha", 0.01), x)


@onnx_op("PRelu", 9, 16)
def prelu(n: Node) -> T:
    x, slope = n.input(0), n.input(1)
    return where(x < 0, x * slope, x)


@onnx_op("Elu", 6, 22)
def elu(n: Node) -> T:
    x = n.input(0)
    return where(x < 0, unary("expm1", x) * n.attr("alpha", 1.0), x)


@onnx_op("Selu", 6, 22)
def selu(n: Node) -> T:
    x = n.input(0)
    alpha, gamma = n.attr("alpha", 1.67326319217681884765625), n.attr("gamma", 1.05070102214813232421875)
    return where(x > 0, x, unary("expm1", x) * alpha) * gamma


@onnx_op("Celu", 12, 28)
def celu(n: Node) -> T:
    x = n.input(0)
    alpha = n.attr("alpha", 1.0)
    return maximum(x, 0) + minimum(unary("expm1", x / alpha) * alpha, 0)


def hard_sigmoid_of(x: T, alpha: float, beta: float) -> T:
    return x.g.op("np.clip", x * alpha + beta, min=0.0, max=1.0)


@onnx_op("HardSigmoid", 6, 22)
def hard_sigmoid(n: Node) -> T:
    return hard_sigmoid_of(n.input(0), n.attr("alpha", 0.2), n.attr("beta", 0.5))


@onnx_op("HardSwish", 14, 22)
def hard_swish(n: Node) -> T:
    x = n.input(0)
    return x * hard_sigmoid_of(x, 1 / 6, 0.5)


def softplus_of(x: T) -> T:
    """log(1 + exp(x)) without overflow: max(x, 0) + log1p(exp(-|x|))."""
    return maximum(x, 0) + unary("log1p", unary("exp", -unary("abs", x)))


@onnx_op("Softplus", 1, 22)
def softplus(n: Node) -> T:
    return softplus_of(n.input(0))


@onnx_op("Softsign", 1, 22)
def softsign(n: Node) -> T:
    x = n.input(0)
    return x / (unary("abs", x) + 1)


@onnx_op("Mish", 18, 22)
def mish(n: Node) -> T:
    x = n.input(0)
    return x * unary("tanh", softplus_of(x))


@onnx_op("ThresholdedRelu", 10, 22)
def thresholded_relu(n: Node) -> T:
    x = n.input(0)
    return where(x > n.attr("alpha", 1.0), x, x._lift(0))


@onnx_op("Swish", 24)
def swish(n: Node) -> T:
    x = n.input(0)
    return x * unary("sigmoid", x * n.attr("alpha", 1.0))


@onnx_op("Gelu", 20)
def gelu(n: Node) -> T:
    approximate = n.attr("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise n.unsupported(f"attribute 'approximate' = {approximate!r}")
    return n.g.op("np.gelu", n.input(0), approximate=approximate)


@onnx_op("Shrink", 9)
def shrink(n: Node) -> T:
    x = n.input(0)
    bias, lambd = n.attr("bias", 0.0), n.attr("lambd", 0.5)
    zero = x._lift(0)
    return where(x < -lambd, x + bias, where(x > lambd, x - bias, zero))


# -- softmax family ---------------------------------------------------------------------
def _coerced(n: Node, x: T, fn) -> T:
    """Opsets before 13 apply softmax to x flattened to 2-D at `axis`, then restore the shape."""
    axis = norm_axis(n, n.attr("axis", 1), max(x.rank, 1))
    rows = math.prod(x.shape[:axis]) if axis else 1
    cols = math.prod(x.shape[axis:])
    return fn(x.reshape((rows, cols)), 1).reshape(x.shape)


def _softmax(x: T, axis: int) -> T:
    return x.g.op("np.softmax", x, axis=axis)


def _log_softmax(x: T, axis: int) -> T:
    return x.g.op("np.log_softmax", x, axis=axis)


def _hardmax(x: T, axis: int) -> T:
    """1 at the first maximum along `axis`, 0 elsewhere."""
    first = x.g.op("np.argmax", x, axis=axis, keepdims=True)
    positions = np.arange(x.shape[axis], dtype=np.int64).reshape([-1] + [1] * (x.rank - axis - 1))
    return first.eq(x.g.const(positions)).cast(x.dtype)


def _register_softmax(op_type: str, fn) -> None:
    @onnx_op(op_type, 1, 11)
    def coerced(n: Node) -> T:
        return _coerced(n, n.input(0), fn)

    @onnx_op(op_type, 13)
    def along_axis(n: Node) -> T:
        x = n.input(0)
        return fn(x, norm_axis(n, n.attr("axis", -1), x.rank))


_register_softmax("Softmax", _softmax)
_register_softmax("LogSoftmax", _log_softmax)
_register_softmax("Hardmax", _hardmax)


@onnx_op("SwiGLU", 28)
def swiglu(n: Node) -> T:
    a, b = n.input(0), n.input(1)
    return a * unary("sigmoid", a * n.attr("alpha", 1.0)) * b

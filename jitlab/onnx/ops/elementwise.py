"""Elementwise math, comparisons and logic: one `np` op each, or a short composition."""

from __future__ import annotations

import numpy as np

from ...errors import DTypeError
from ..graph import T
from ..node import Node
from ..registry import onnx_op
from .util import maximum, minimum, unary

_UNARY = {
    "Abs": ("abs", (6, 13)), "Neg": ("neg", (6, 13)), "Exp": ("exp", (6, 13)), "Log": ("log", (6, 13)),
    "Sqrt": ("sqrt", (6, 13)), "Reciprocal": ("reciprocal", (6, 13)), "Floor": ("floor", (6, 13)),
    "Ceil": ("ceil", (6, 13)), "Sigmoid": ("sigmoid", (6, 13)), "Tanh": ("tanh", (6, 13)),
    "Relu": ("relu", (6, 13, 14)), "Sin": ("sin", (7, 22)), "Cos": ("cos", (7, 22)), "Tan": ("tan", (7, 22)),
    "Asin": ("asin", (7, 22)), "Acos": ("acos", (7, 22)), "Atan": ("atan", (7, 22)),
    "Sinh": ("sinh", (9, 22)), "Cosh": ("cosh", (9, 22)), "Asinh": ("asinh", (9, 22)),
    "Acosh": ("acosh", (9, 22)), "Atanh": ("atanh", (9, 22)), "Erf": ("erf", (9, 13)),
    "Sign": ("sign", (9, 13)), "Round": ("round", (11, 22)), "IsNaN": ("isnan", (9, 13, 20)),
    "Not": ("logical_not", (1,)), "BitwiseNot": ("bitwise_not", (18,)),
}

_BINARY = {
    "Add": ("add", (7, 13, 14)), "Sub": ("sub", (7, 13, 14)), "Mul": ("mul", (7, 13, 14)),
    "Div": ("div", (7, 13, 14)), "And": ("logical_and", (7,)), "Or": ("logical_or", (7,)),
    "Xor": ("logical_xor", (7,)), "Equal": ("equal", (7, 11, 13, 19)), "Greater": ("greater", (7, 9, 13)),
    "Less": ("less", (7, 9, 13)), "GreaterOrEqual": ("greater_equal", (12, 16)),
    "LessOrEqual": ("less_equal", (12, 16)), "BitwiseAnd": ("bitwise_and", (18,)),
    "BitwiseOr": ("bitwise_or", (18,)), "BitwiseXor": ("bitwise_xor", (18,)),
}


def _register_unary(op_type: str, np_name: str, versions: tuple[int, ...]) -> None:
    onnx_op(op_type, *versions)(lambda n: unary(np_name, n.input(0)))


def _register_binary(op_type: str, np_name: str, versions: tuple[int, ...]) -> None:
    onnx_op(op_type, *versions)(lambda n: n.g.op(f"np.{np_name}", n.input(0), n.input(1)))


for _op, (_name, _versions) in _UNARY.items():
    _register_unary(_op, _name, _versions)
for _op, (_name, _versions) in _BINARY.items():
    _register_binary(_op, _name, _versions)


@onnx_op("Pow", 7, 12, 13, 15)
def pow_(n: Node) -> T:
    """The result takes the base's dtype; a float exponent of an integer base is computed in float64."""
    x, y = n.input(0), n.input(1)
    if x.dtype == y.dtype:
        return x ** y
    if x.dtype.kind == "f":
        return x ** y.cast(x.dtype)
    return (x.cast(np.float64) ** y.cast(np.float64)).cast(x.dtype)


@onnx_op("Mod", 10, 13, 28)
def mod(n: Node) -> T:
    fmod = n.attr("fmod", 0)
    if fmod not in (0, 1):
        raise n.unsupported(f"attribute 'fmod' = {fmod} (must be 0 or 1)")
    return n.g.op("np.fmod" if fmod else "np.mod", n.input(0), n.input(1))


@onnx_op("BitShift", 11, 28)
def bit_shift(n: Node) -> T:
    """Shifts of a negative or too-large amount give what the sign fill alone gives (opset 28)."""
    x, y = n.input(0), n.input(1)
    direction = n.attr("direction")
    if direction not in ("LEFT", "RIGHT"):
        raise n.unsupported(f"attribute 'direction' = {direction!r}")
    bits = 8 * x.dtype.itemsize
    in_range = (y >= 0) & (y < bits)
    safe = n.g.op("np.where", in_range, y, y._lift(0))
    shifted = n.g.op("np.left_shift" if direction == "LEFT" else "np.right_shift", x, safe)
    fill = x._lift(0)
    if direction == "RIGHT" and x.dtype.kind == "i":
        fill = n.g.op("np.where", x < 0, x._lift(-1), fill)
    return n.g.op("np.where", in_range, shifted, fill)


def _variadic(n: Node, name: str) -> T:
    xs = n.inputs()
    if len({x.dtype for x in xs}) > 1:
        raise n.error(DTypeError, "inputs must share one dtype")
    out = xs[0]
    for x in xs[1:]:
        out = n.g.op(name, out, x)
    return out


@onnx_op("Max", 8, 12, 13)
def max_(n: Node) -> T:
    return _variadic(n, "np.maximum")


@onnx_op("Min", 8, 12, 13)
def min_(n: Node) -> T:
    return _variadic(n, "np.minimum")


@onnx_op("Sum", 8, 13)
def sum_(n: Node) -> T:
    return _variadic(n, "np.add")


@onnx_op("Mean", 8, 13)
def mean(n: Node) -> T:
    return _variadic(n, "np.add") / float(len(n.inputs()))


@onnx_op("Where", 9, 16)
def where(n: Node) -> T:
    return n.g.op("np.where", n.input(0), n.input(1), n.input(2))


@onnx_op("IsInf", 10, 20)
def is_inf(n: Node) -> T:
    x = n.input(0)
    positive, negative = n.attr("detect_positive", 1), n.attr("detect_negative", 1)
    inf = unary("isinf", x)
    if positive and negative:
        return inf
    if positive:
        return inf & (x > 0)
    if negative:
        return inf & (x < 0)
    return inf & (x < 0) & (x > 0)


@onnx_op("Clip", 6)
def clip_6(n: Node) -> T:
    return n.g.op("np.clip", n.input(0), min=n.attr("min", None), max=n.attr("max", None))


@onnx_op("Clip", 11, 12, 13)
def clip(n: Node) -> T:
    """max(x, lo) then min(.., hi): when lo > hi every element is hi, as the spec says."""
    x = n.input(0)
    for i, bound in ((1, maximum), (2, minimum)):
        limit = n.input(i, required=False)
        if limit is not None:
            if limit.rank and all(d == 1 for d in limit.shape):
                limit = limit.reshape(())
            x = bound(x, limit)
    return x


@onnx_op("Cast", 6, 9, 13, 19, 21, 23, 24, 25, 28)
def cast(n: Node) -> T:
    from ..reader import dtype_of

    _float8_only(n)
    return n.input(0).cast(dtype_of(n.attr("to"), f"attribute 'to' of {n.label}"))


@onnx_op("CastLike", 15, 19, 21, 23, 24, 25)
def cast_like(n: Node) -> T:
    _float8_only(n)
    return n.input(0).cast(n.input(1).dtype)


def _float8_only(n: Node) -> None:
    """`saturate` and `round_mode` only change casts to float8 types, which jitlab has none of."""
    n.attr("saturate", 1)
    n.attr("round_mode", "up")


@onnx_op("Identity", 1, 13, 14, 16, 19, 21, 23, 24, 25)
def identity(n: Node) -> T:
    return n.input(0)

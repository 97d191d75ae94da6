"""Reductions (Reduce*), ArgMax/ArgMin and CumSum.

`noop_with_empty_axes` with no axes reduces over nothing: the elementwise part still
applies (ReduceL2 gives |x|), as in onnx's reference. Max and min over an empty set give
the identity of the reduction (-inf, the dtype's lowest, false ...).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..graph import T
from ..node import Node
from ..registry import onnx_op
from .util import norm_axes, norm_axis, unary, where

_SINCE_INPUT = 18       # opset from which axes are an input (ReduceSum: 13)


def _axes(n: Node, x: T, since_input: int) -> tuple[int, ...]:
    axes = n.static_ints(1, "axes") if n.opset >= since_input else n.attr("axes", None)
    noop = n.attr("noop_with_empty_axes", 0)
    if not axes:
        return () if noop else tuple(range(x.rank))
    return norm_axes(n, axes, x.rank)


def _empty(x: T, axes) -> bool:
    return any(x.shape[a] == 0 for a in axes)


def _identity(x: T, axes, keepdims: bool, fill) -> T:
    shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape) if keepdims or i not in axes)
    return x.g.op("np.broadcast_to", x.g.const(np.asarray(fill, x.dtype)), shape=shape)


def _lowest(dtype: np.dtype):
    return False if dtype.kind == "b" else (-np.inf if dtype.kind == "f" else np.iinfo(dtype).min)


def _highest(dtype: np.dtype):
    return True if dtype.kind == "b" else (np.inf if dtype.kind == "f" else np.iinfo(dtype).max)


def _extreme(kind: str, fill: Callable) -> Callable:
    def reduce(x: T, axes, keepdims: bool) -> T:
        if _empty(x, axes):
            return _identity(x, axes, keepdims, fill(x.dtype))
        return x.reduce(kind, axes, keepdims)

    return reduce


def _mean(x: T, axes, keepdims: bool) -> T:
    if x.dtype.kind == "f":
        return x.reduce("mean", axes, keepdims)
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    return x.reduce("sum", axes, keepdims) / count


def _log_sum_exp(x: T, axes, keepdims: bool) -> T:
    """max + log(sum(exp(x - max))), with infinities left out of the max as onnx's reference does."""
    if _empty(x, axes):
        return _identity(x, axes, keepdims, -np.inf)
    finite = where(unary("isinf", x), x._lift(-np.inf), x)
    top = finite.reduce("max", axes, keepdims=True)
    out = unary("log", unary("exp", x - top).reduce("sum", axes, keepdims=True)) + top
    return out if keepdims or not axes else x.g.op("np.squeeze", out, axes=tuple(axes))


_REDUCTIONS: dict[str, tuple[Callable, tuple[int, ...], int]] = {
    "ReduceSum": (lambda x, a, k: x.reduce("sum", a, k), (11, 13), 13),
    "ReduceMean": (_mean, (11, 13, 18), _SINCE_INPUT),
    "ReduceMax": (_extreme("max", _lowest), (11, 12, 13, 18, 20), _SINCE_INPUT),
    "ReduceMin": (_extreme("min", _highest), (11, 12, 13, 18, 20), _SINCE_INPUT),
    "ReduceProd": (lambda x, a, k: x.reduce("prod", a, k), (11, 13, 18), _SINCE_INPUT),
    "ReduceL1": (lambda x, a, k: unary("abs", x).reduce("sum", a, k), (11, 13, 18), _SINCE_INPUT),
    "ReduceL2": (lambda x, a, k: unary("sqrt", (x * x).reduce("sum", a, k)), (11, 13, 18), _SINCE_INPUT),
    "ReduceSumSquare": (lambda x, a, k: (x * x).reduce("sum", a, k), (11, 13, 18), _SINCE_INPUT),
    "ReduceLogSum": (lambda x, a, k: unary("log", x.reduce("sum", a, k)), (11, 13, 18, 28), _SINCE_INPUT),
    "ReduceLogSumExp": (_log_sum_exp, (11, 13, 18, 28), _SINCE_INPUT),
}


def _register(op_type: str, fn: Callable, versions: tuple[int, ...], since_input: int) -> None:
    @onnx_op(op_type, *versions)
    def reduce(n: Node) -> T:
        x = n.input(0)
        return fn(x, _axes(n, x, since_input), bool(n.attr("keepdims", 1)))


for _op, (_fn, _versions, _since) in _REDUCTIONS.items():
    _register(_op, _fn, _versions, _since)


def _arg(kind: str):
    @onnx_op(f"Arg{kind.capitalize()}", 11, 12, 13)
    def arg(n: Node) -> T:
        x = n.input(0)
        axis = norm_axis(n, n.attr("axis", 0), x.rank)
        keepdims = bool(n.attr("keepdims", 1))
        if not n.attr("select_last_index", 0):
            return n.g.op(f"np.arg{kind}", x, axis=axis, keepdims=keepdims)
        dim = x.shape[axis]
        flipped = n.g.op("np.slice", x, starts=tuple(dim - 1 if i == axis else 0 for i in range(x.rank)),
                         stops=tuple(-1 if i == axis else d for i, d in enumerate(x.shape)),
                         steps=tuple(-1 if i == axis else 1 for i in range(x.rank)))
        return (dim - 1) - n.g.op(f"np.arg{kind}", flipped, axis=axis, keepdims=keepdims)


_arg("max")
_arg("min")


@onnx_op("CumSum", 11, 14)
def cumsum(n: Node) -> T:
    x = n.input(0)
    axis = norm_axis(n, int(n.static_scalar(1, "axis")), x.rank)
    return n.g.op("np.cumsum", x, axis=axis, exclusive=bool(n.attr("exclusive", 0)),
                  reverse=bool(n.attr("reverse", 0)))

"""The `decompose` pass: composite ops rewritten into `np` primitives, so fusion sees
what they are made of.

Each decomposition computes what the op's reference implementation computes, in the
same precision and (where it matters) the same order: softmax is max-subtracted,
reductions keep their dims, layer_norm's mean and variance are sums divided by N (times
1/N would differ from numpy's mean in the last bit where N is not a power of two), and
layer_norm, batch_norm and gelu work in their references' work dtype (the operands' own
float dtype, float16 widened to float32), constants included, so a decomposed program
agrees with O0 on overflow, NaN and inf as well, and a float32 model stays in float32.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..dialects.np.composite import work_dtype
from ..ir.shapes import is_static
from .drr import Cast, Constant, Many, Native, P, Rule, V, check
from .manager import register_pass
from .rules import DECOMPOSE, RewritePass, RuleSet


def _axis(axis: int) -> tuple[int, ...]:
    return (axis,)


def _trailing(x, axis) -> tuple[int, ...]:
    return tuple(range(axis, x.type.rank))


def _count(shape, axes) -> int:
    return int(np.prod([shape[i] for i in axes], dtype=np.int64))


def _static(x, axes) -> bool | str:
    return is_static(tuple(x.type.shape[i] for i in axes)) or f"it is {x.type}"


def _work(v) -> Cast:
    """`v` in the work dtype of the op's operand $x."""
    return Cast(v, lambda x: work_dtype(x.dtype))


def _back(out) -> Cast:
    """`out` converted back to the dtype of the op's operand $x."""
    return Cast(out, lambda x: x.dtype)


def softmax():
    x = V.x
    e = P.exp(P.sub(x, P.max(x, axes=_axis, keepdims=True)))
    return P.div(e, P.sum(e, axes=_axis, keepdims=True))


def log_softmax():
    x = V.x
    shifted = P.sub(x, P.max(x, axes=_axis, keepdims=True))
    return P.sub(shifted, P.log(P.sum(P.exp(shifted), axes=_axis, keepdims=True)))


def layer_norm(scale: bool, bias: bool):
    x = _work(V.x)
    n = Constant(lambda x, axis: _count(x.type.shape, _trailing(x, axis)), x)
    mean = P.div(P.sum(x, axes=_trailing, keepdims=True), n)
    centered = P.sub(x, mean)
    var = P.div(P.sum(P.mul(centered, centered), axes=_trailing, keepdims=True), n)
    out = P.div(centered, P.sqrt(P.add(var, Constant(lambda eps: eps, x))))
    if scale:
        out = P.mul(out, _work(V.scale))
    if bias:
        out = P.add(out, _work(V.bias))
    return _back(out)


def _layer_norm_rule(name: str, *params: str) -> Rule:
    operands = [V.x] + [getattr(V, p) for p in params]
    return Rule(name, P.layer_norm(*operands, axis=V.axis, eps=V.eps),
                layer_norm("scale" in params, "bias" in params),
                where=[check("the normalized dims of $x to be static (1/N needs N)",
                             lambda x, axis: _static(x, _trailing(x, axis)))],
                doc="(x - mean) / sqrt(var + eps) [* scale] [+ bias] over the trailing dims, in the work dtype")


def batch_norm():
    x = _work(V.x)

    def per_channel(v):
        return P.reshape(v, shape=lambda x, scale: (scale.type.shape[0],) + (1,) * (x.type.rank - 2))

    inv_std = P.div(_work(V.scale), P.sqrt(P.add(_work(V.var), Constant(lambda eps: eps, x))))
    centered = P.sub(x, per_channel(_work(V.mean)))
    return _back(P.add(P.mul(centered, per_channel(inv_std)), per_channel(_work(V.bias))))


def gelu(approximate: str):
    x = _work(V.x)
    if approximate == "tanh":
        cube = P.pow(x, Constant(3.0, x))
        inner = P.mul(Constant(math.sqrt(2 / math.pi), x), P.add(x, P.mul(Constant(0.044715, x), cube)))
        phi = P.tanh(inner)
    else:
        phi = P.erf(P.div(x, Constant(math.sqrt(2), x)))
    return _back(P.mul(P.mul(Constant(0.5, x), x), P.add(Constant(1.0, x), phi)))


def sigmoid():
    x, one = V.x, Constant(1, V.x)
    e = P.exp(P.neg(P.abs(x)))
    denominator = P.add(one, e)
    return P.where(P.greater_equal(x, Constant(0, x)), P.div(one, denominator), P.div(e, denominator))


def mean():
    x = _work(V.x)
    total = P.sum(x, axes=V.axes, keepdims=V.keepdims)
    return _back(P.div(total, Constant(lambda x, axes: _count(x.type.shape, axes), x)))


def stack(rw, xs, axis):
    expanded = [rw.op("np.expand_dims", x, axes=(axis,)) for x in xs]
    return rw.op("np.concatenate", *expanded, axis=axis)


DECOMPOSE.add(
    Rule("softmax", P.softmax(V.x, axis=V.axis), softmax(), doc="exp(x - max) / sum(exp(x - max))"),
    Rule("log-softmax", P.log_softmax(V.x, axis=V.axis), log_softmax(),
         doc="(x - max) - log(sum(exp(x - max)))"),
    _layer_norm_rule("layer-norm"),
    _layer_norm_rule("layer-norm-scale", "scale"),
    _layer_norm_rule("layer-norm-scale-bias", "scale", "bias"),
    Rule("batch-norm", P.batch_norm(V.x, V.scale, V.bias, V.mean, V.var, eps=V.eps), batch_norm(),
         doc="(x - mean) * (scale / sqrt(var + eps)) + bias per channel, in the work dtype"),
    Rule("gelu-erf", P.gelu(V.x, approximate="none"), gelu("none"),
         doc="0.5 * x * (1 + erf(x / sqrt(2))), in the work dtype"),
    Rule("gelu-tanh", P.gelu(V.x, approximate="tanh"), gelu("tanh"),
         doc="0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3))), in the work dtype"),
    Rule("sigmoid", P.sigmoid(V.x), sigmoid(), doc="where(x >= 0, 1 / (1 + e), e / (1 + e)), e = exp(-|x|)"),
    Rule("mean", P.mean(V.x, axes=V.axes, keepdims=V.keepdims), mean(),
         where=[check("the reduced dims of $x to be static (N is a constant)", _static)],
         doc="sum / N, as numpy computes it"),
    Rule("stack", P.stack(Many(V.xs), axis=V.axis), Native(stack), doc="expand_dims of each, then concatenate"),
)


@register_pass
@dataclass
class Decompose(RewritePass):
    name = "decompose"
    summary = "Rewrites composite ops (softmax, layer_norm, gelu, ...) into np primitives."
    rules: ClassVar[RuleSet] = DECOMPOSE

"""Composite ops of the `np` dialect: kept whole while tracing and printing, decomposed
into primitives by the `decompose` pass so fusion sees what they are made of."""

from __future__ import annotations

import math

import numpy as np

from ...ir.attributes import FLOAT as FLOAT_ATTR
from ...ir.attributes import INT, one_of
from ...ir.opdef import Trait, defop
from .common import FLOAT, attr, check_dtype, erf, normalize_axis, quiet, same_dtype

COMPOSITE = (Trait.PURE, Trait.COMPOSITE)


def work_dtype(dtype) -> np.dtype:
    """The dtype a composite computes in: its operands' float dtype, float16 widened to float32
    as numpy's mean sums it. Constants (eps, 0.5, N) take this dtype: a Python scalar is weak
    (NEP 50) and never widens a float32 computation to float64."""
    dtype = np.dtype(dtype)
    return np.dtype(np.float32) if dtype.itemsize < 4 else dtype


def _axis_infer(ctx, types, attrs):
    (t,) = types
    check_dtype(ctx, t, FLOAT, "the operand")
    if normalize_axis(ctx, attrs["axis"], t.rank) != attrs["axis"]:
        raise ctx.error(f"axis must be stored non-negative, got {attrs['axis']}")
    return [t]


def _softmax(x, axis):
    # initial=-inf: an empty axis has no max, and the result is empty anyway.
    e = np.exp(x - np.max(x, axis=axis, keepdims=True, initial=-np.inf))
    return (e / np.sum(e, axis=axis, keepdims=True)).astype(x.dtype)


def _log_softmax(x, axis):
    shifted = x - np.max(x, axis=axis, keepdims=True, initial=-np.inf)
    return (shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))).astype(x.dtype)


defop("np.softmax", attrs={"axis": attr(INT)}, traits=COMPOSITE, infer=_axis_infer,
      reference=quiet(_softmax), operand_names=("x",), doc="exp(x) / sum(exp(x)) along axis, max-subtracted.")
defop("np.log_softmax", attrs={"axis": attr(INT)}, traits=COMPOSITE, infer=_axis_infer,
      reference=quiet(_log_softmax), operand_names=("x",), doc="log(softmax(x)) along axis, computed stably.")


def _layer_norm_infer(ctx, types, attrs):
    x = types[0]
    same_dtype(ctx, types)
    check_dtype(ctx, x, FLOAT, "the operands")
    axis = attrs["axis"]
    if normalize_axis(ctx, axis, x.rank) != axis:
        raise ctx.error(f"axis must be stored non-negative, got {axis}")
    for name, t in zip(("scale", "bias"), types[1:]):
        if t.rank > x.rank - axis or ctx.broadcast(x.shape, t.shape) != x.shape:
            raise ctx.error(f"{name} {t} must broadcast over the normalized dims {list(x.shape[axis:])}")
    return [x]


def _layer_norm(x, *params, axis, eps):
    work = work_dtype(x.dtype)
    axes = tuple(range(axis, x.ndim))
    xw, n = x.astype(work), work.type(math.prod(x.shape[axis:]))
    centered = xw - xw.sum(axis=axes, keepdims=True) / n
    var = (centered * centered).sum(axis=axes, keepdims=True) / n
    out = centered / np.sqrt(var + work.type(eps))
    if params:
        out = out * params[0].astype(work)
    if len(params) > 1:
        out = out + params[1].astype(work)
    return out.astype(x.dtype)


defop("np.layer_norm", operands=(1, 3), attrs={"axis": attr(INT), "eps": attr(FLOAT_ATTR, 1e-5)},
      traits=COMPOSITE, infer=_layer_norm_infer, reference=quiet(_layer_norm),
      operand_names=("x", "scale", "bias"),
      doc="Normalizes over the dims from axis to the end, then scales and shifts.")


def _batch_norm_infer(ctx, types, attrs):
    x = types[0]
    same_dtype(ctx, types)
    check_dtype(ctx, x, FLOAT, "the operands")
    if x.rank < 2:
        raise ctx.error(f"batch_norm takes N,C,... with rank >= 2, got {x}")
    for name, t in zip(("scale", "bias", "mean", "var"), types[1:]):
        if t.rank != 1:
            raise ctx.error(f"{name} must have shape [C], got {t}")
        ctx.equal(t.shape[0], x.shape[1], f"{name} must have one entry per channel")
    return [x]


def _batch_norm(x, scale, bias, mean, var, eps):
    work = work_dtype(x.dtype)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    scale, bias, mean, var = (p.astype(work) for p in (scale, bias, mean, var))
    inv_std = scale / np.sqrt(var + work.type(eps))
    out = (x.astype(work) - mean.reshape(shape)) * inv_std.reshape(shape) + bias.reshape(shape)
    return out.astype(x.dtype)


defop("np.batch_norm", operands=5, attrs={"eps": attr(FLOAT_ATTR, 1e-5)}, traits=COMPOSITE,
      infer=_batch_norm_infer, reference=quiet(_batch_norm),
      operand_names=("x", "scale", "bias", "mean", "var"),
      doc="Inference-mode batch normalization over channel dim 1 with running statistics.")

def _gelu(x, approximate):
    work = work_dtype(x.dtype)
    xw = x.astype(work)
    if approximate == "tanh":
        phi = np.tanh(work.type(math.sqrt(2 / math.pi)) * (xw + work.type(0.044715) * xw ** work.type(3)))
    else:
        phi = erf(xw / work.type(math.sqrt(2))).astype(work)
    return (work.type(0.5) * xw * (work.type(1) + phi)).astype(x.dtype)


def _gelu_infer(ctx, types, attrs):
    check_dtype(ctx, types[0], FLOAT, "the operand")
    return [types[0]]


defop("np.gelu", attrs={"approximate": attr(one_of("none", "tanh"), "none")},
      traits=(Trait.PURE, Trait.ELEMENTWISE, Trait.COMPOSITE), infer=_gelu_infer,
      reference=quiet(_gelu), operand_names=("x",),
      doc="Gaussian error linear unit: x * Phi(x), exactly (erf) or with the tanh approximation.")

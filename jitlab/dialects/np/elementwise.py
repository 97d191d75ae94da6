"""Elementwise ops of the `np` dialect, constants and weights."""

from __future__ import annotations

import numpy as np

from ...errors import InputError
from ...ir.attributes import DENSE, DTYPE, OPT_FLOAT, STR
from ...ir.dtypes import BOOL, real_dtype
from ...ir.opdef import Trait, defop
from ...ir.types import TensorType
from .common import (
    BOOLEAN,
    COMPLEX,
    EQUATABLE,
    FLOAT,
    INEXACT,
    INTEGRAL,
    NUMBER,
    NUMERIC,
    attr,
    binary,
    check_dtype,
    compare,
    erf,
    quiet,
    same_dtype,
    unary,
)


def _sigmoid(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _int_div(x, y):
    """C-style (truncating) integer division, as ONNX Div defines it; x/0 gives 0."""
    safe = np.where(y == 0, 1, y)
    q = np.abs(x) // np.abs(safe) * np.sign(x) * np.sign(safe)
    return np.where(y == 0, 0, q)


def _div(x, y):
    return x / y if x.dtype.kind in "fc" else _int_div(x, y)


def _pow(x, y):
    if x.dtype.kind in "fc":
        return np.power(x, y)
    if y.dtype.kind == "i" and (y < 0).any():
        # the compiled kernels check it too (numba_cpu/helpers.py: _int_pow_checked)
        raise InputError("np.pow: integers to negative integer powers are not allowed (numpy raises ValueError)")
    return np.power(x, y)


for _name, _fn in [("exp", np.exp), ("log", np.log), ("sqrt", np.sqrt), ("reciprocal", np.reciprocal)]:
    unary(_name, _fn, INEXACT, doc=f"Elementwise {_name} of a float or complex tensor.")
for _name, _fn in [("expm1", np.expm1), ("exp2", np.exp2),
                   ("log1p", np.log1p), ("log2", np.log2), ("log10", np.log10),
                   ("rsqrt", lambda x: 1 / np.sqrt(x)), ("tanh", np.tanh), ("erf", erf),
                   ("sin", np.sin), ("cos", np.cos), ("tan", np.tan), ("asin", np.arcsin),
                   ("acos", np.arccos), ("atan", np.arctan), ("sinh", np.sinh), ("cosh", np.cosh),
                   ("asinh", np.arcsinh), ("acosh", np.arccosh), ("atanh", np.arctanh),
                   ("floor", np.floor), ("ceil", np.ceil), ("trunc", np.trunc), ("round", np.round)]:
    unary(_name, _fn, FLOAT, doc=f"Elementwise {_name} of a float tensor.")

unary("sigmoid", _sigmoid, FLOAT, traits=(Trait.COMPOSITE,), doc="1 / (1 + exp(-x)).")
for _name, _fn in [("neg", np.negative), ("square", np.square)]:
    unary(_name, _fn, NUMBER, doc=f"Elementwise {_name}.")
for _name, _fn in [("sign", np.sign), ("relu", lambda x: np.maximum(x, 0))]:
    unary(_name, _fn, NUMERIC, doc=f"Elementwise {_name}.")
unary("abs", np.abs, NUMBER, real_dtype, doc="Elementwise absolute value; the magnitude (real) of a complex.")
unary("real", np.real, COMPLEX, real_dtype, doc="The real part of a complex tensor.")
unary("imag", np.imag, COMPLEX, real_dtype, doc="The imaginary part of a complex tensor.")
unary("angle", np.angle, COMPLEX, real_dtype, doc="The argument of a complex tensor: atan2(imag, real).")
unary("conj", np.conjugate, COMPLEX, doc="The complex conjugate.")
unary("logical_not", np.logical_not, BOOLEAN, doc="Elementwise not of a bool tensor.")
unary("bitwise_not", np.invert, INTEGRAL, doc="Elementwise bitwise not.")
for _name, _fn in [("isnan", np.isnan), ("isinf", np.isinf), ("isfinite", np.isfinite)]:
    unary(_name, _fn, FLOAT, BOOL, doc=f"Elementwise {_name}, giving bool.")

binary("add", np.add, NUMBER, traits=(Trait.COMMUTATIVE,), doc="x + y.")
binary("sub", np.subtract, NUMBER, doc="x - y.")
binary("mul", np.multiply, NUMBER, traits=(Trait.COMMUTATIVE,), doc="x * y.")
binary("div", _div, NUMBER, doc="x / y; truncating for integers (x/0 gives 0).")
binary("floordiv", np.floor_divide, doc="numpy's x // y (x//0 gives 0 for integers).")
binary("mod", np.mod, doc="numpy's x % y: the result takes the divisor's sign.")
binary("fmod", np.fmod, doc="C's fmod: the result takes the dividend's sign.")
binary("pow", _pow, NUMBER, doc="x ** y.")
binary("maximum", np.maximum, traits=(Trait.COMMUTATIVE,), doc="Elementwise max; NaN propagates.")
binary("minimum", np.minimum, traits=(Trait.COMMUTATIVE,), doc="Elementwise min; NaN propagates.")
binary("atan2", np.arctan2, FLOAT, doc="Elementwise arctan(x / y) in the right quadrant.")
for _name, _fn in [("bitwise_and", np.bitwise_and), ("bitwise_or", np.bitwise_or),
                   ("bitwise_xor", np.bitwise_xor)]:
    binary(_name, _fn, INTEGRAL, traits=(Trait.COMMUTATIVE,), doc=f"Elementwise {_name}.")
binary("left_shift", np.left_shift, "iu", doc="x << y.")
binary("right_shift", np.right_shift, "iu", doc="x >> y.")
for _name, _fn in [("logical_and", np.logical_and), ("logical_or", np.logical_or),
                   ("logical_xor", np.logical_xor)]:
    binary(_name, _fn, BOOLEAN, traits=(Trait.COMMUTATIVE,), doc=f"Elementwise {_name} of bools.")
compare("equal", np.equal, EQUATABLE, traits=(Trait.COMMUTATIVE,))
compare("not_equal", np.not_equal, EQUATABLE, traits=(Trait.COMMUTATIVE,))
for _name, _fn in [("less", np.less), ("less_equal", np.less_equal), ("greater", np.greater),
                   ("greater_equal", np.greater_equal)]:
    compare(_name, _fn)


def _where_infer(ctx, types, attrs):
    cond, a, b = types
    check_dtype(ctx, cond, BOOLEAN, "the condition")
    dtype = same_dtype(ctx, [a, b])
    return [TensorType(ctx.broadcast(cond.shape, a.shape, b.shape), dtype)]


defop("np.where", operands=3, traits=(Trait.PURE, Trait.ELEMENTWISE, Trait.BROADCAST),
      infer=_where_infer, reference=lambda c, a, b: np.where(c, a, b),
      operand_names=("cond", "x", "y"), doc="x where cond else y.")


def _clip_infer(ctx, types, attrs):
    (t,) = types
    check_dtype(ctx, t, NUMERIC, "the operand")
    return [t]


def _clip(x, min, max):
    out = x
    if min is not None:
        out = np.maximum(out, np.asarray(min).astype(x.dtype))
    if max is not None:
        out = np.minimum(out, np.asarray(max).astype(x.dtype))
    return out


defop("np.clip", operands=1, attrs={"min": attr(OPT_FLOAT, None), "max": attr(OPT_FLOAT, None)},
      traits=(Trait.PURE, Trait.ELEMENTWISE), infer=_clip_infer, reference=quiet(_clip),
      operand_names=("x",), doc="Limits x to [min, max]; a bound of none is open.")


def _cast_infer(ctx, types, attrs):
    (t,) = types
    return [t.with_dtype(attrs["dtype"])]


def _cast(x, dtype):
    if x.dtype.kind == "c" and dtype.kind in "iuf":
        x = x.real          # numpy drops the imaginary part (with a ComplexWarning)
    if dtype.kind in "iu" and x.dtype.kind == "f":
        # Out-of-range float to int is undefined in C and varies by platform in numpy;
        # defining it as saturation with NaN -> 0 keeps every backend in agreement.
        info = np.iinfo(dtype)
        t = np.trunc(x.astype(np.float64))
        high, low = t >= float(info.max), t <= float(info.min)
        safe = np.where(np.isnan(t) | high | low, 0, t).astype(dtype)
        return np.where(high, info.max, np.where(low, info.min, safe)).astype(dtype)
    return x.astype(dtype)


defop("np.cast", operands=1, attrs={"dtype": attr(DTYPE)}, traits=(Trait.PURE, Trait.ELEMENTWISE),
      infer=_cast_infer, reference=quiet(_cast), operand_names=("x",),
      doc="Converts to another dtype; float to int truncates and saturates (NaN -> 0); complex to real "
          "keeps the real part.")


def _constant_infer(ctx, types, attrs):
    a = attrs["value"].array
    return [TensorType(a.shape, a.dtype)]


defop("np.constant", operands=0, attrs={"value": attr(DENSE)}, traits=(Trait.PURE, Trait.CONSTANT),
      infer=_constant_infer, reference=lambda value: value.array, doc="A constant array.")

defop("np.weight", operands=0, attrs={"name": attr(STR)}, traits=(Trait.PURE,),
      infer=None, reference=None,
      doc="A named weight of the program; its array is kept apart from the graph.")

"""How each elementwise op becomes a numba scalar expression with numpy's semantics.

`SCALAR_RULES` maps an op name to a function of (operand expressions, attributes,
dtype names) returning the expression. Results are wrapped in their dtype's
constructor where numba would otherwise widen (int32 + int32 is int64 in numba), so a
kernel computes exactly what the numpy reference computes. The helper functions the
expressions call (`_maximum`, saturating casts, ...) live in `helpers.py`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...ir.core import Operation
from ...registry import Registry
from ..loopnest import literal
from .fastmath import lookup
from .rows import exp_rule

Rule = Callable[[list[str], dict, "TypeNames"], str]
SCALAR_RULES: Registry[str, Rule] = Registry("scalar rule")


class TypeNames:
    """numba-side names of an op's result dtype and of its first operand's dtype."""

    host_math = True        # CPU-only callees allowed: LLVM's max/min intrinsics, the fastmath table

    def __init__(self, op: Operation):
        self.op = op
        self.op_name = op.name
        self.out = np.dtype(op.results[0].type.dtype).name
        self.arg = np.dtype(op.operands[0].type.dtype).name if op.operands else self.out

    @property
    def out_ctor(self) -> str:
        return f"np.{self.out}" if self.out != "bool" else "np.bool_"


def scalar(*names: str) -> Callable[[Rule], Rule]:
    """Registers the decorated rule for ops `names` (given without the `np.` prefix)."""
    return SCALAR_RULES.register(*(f"np.{name}" for name in names))


def _wrap(t: TypeNames, expr: str) -> str:
    """Keeps integer results in their dtype (numba widens small ints to int64)."""
    return f"{t.out_ctor}({expr})" if t.out not in ("float32", "float64", "complex64", "complex128", "bool") \
        else expr


def _binop(symbol: str) -> Rule:
    return lambda a, attrs, t: _wrap(t, f"({a[0]} {symbol} {a[1]})")


def wrapping(dtype: str, symbol: str, x: str, y: str) -> str:
    """x symbol y (+, - or *) wrapping on overflow as numpy's does. numba marks signed integer
    arithmetic `nsw` (overflow is undefined, so LLVM folds `a + 1 > a` to True); int64 is the one
    signed dtype it does not widen first, so it is computed in uint64 and cast back."""
    if dtype != "int64":
        return f"({x} {symbol} {y})"
    return f"np.int64(np.uint64({x}) {symbol} np.uint64({y}))"


def _arith(symbol: str) -> Rule:
    return lambda a, attrs, t: _wrap(t, wrapping(t.out, symbol, a[0], a[1]))


def _call(fn: str) -> Rule:
    return lambda a, attrs, t: _wrap(t, f"{fn}({', '.join(a)})")


for _name, _symbol in [("add", "+"), ("sub", "-"), ("mul", "*")]:
    scalar(_name)(_arith(_symbol))
for _name, _symbol in [("less", "<"), ("less_equal", "<="), ("greater", ">"), ("greater_equal", ">="),
                       ("equal", "=="), ("not_equal", "!=")]:
    scalar(_name)(_binop(_symbol))
for _name, _symbol in [("bitwise_and", "&"), ("bitwise_or", "|"), ("bitwise_xor", "^"),
                       ("left_shift", "<<"), ("right_shift", ">>")]:
    scalar(_name)(_binop(_symbol))
def fastmath_name(impl) -> str:
    """The name a generated module binds a fastmath implementation to."""
    return "fm_" + impl.op[3:] + (f"_{impl.variant}" if impl.variant else "") + "_" + impl.dtype


def _vectorized(fallback: Rule, variant_of=lambda attrs: "") -> Rule:
    """Calls the vectorizable fastmath implementation when there is one for the dtype."""

    def rule(a, attrs, t):
        impl = lookup(t.op_name, t.out, variant_of(attrs)) if t.host_math and t.out in ("float32", "float64") \
            else None
        return f"{fastmath_name(impl)}({a[0]})" if impl is not None else fallback(a, attrs, t)

    return rule


scalar("exp")(exp_rule(_vectorized(_call("np.exp"))))
for _name in ("expm1", "exp2", "log", "log1p", "log2", "log10", "tanh"):
    scalar(_name)(_vectorized(_call(f"np.{_name}")))
scalar("erf")(_vectorized(_call("_erf")))
scalar("sigmoid")(_vectorized(_call("_sigmoid")))


def _float_pair(name: str, helper: str) -> Rule:
    """NaN-propagating max/min: LLVM's intrinsic for floats (it vectorizes), a select for ints."""
    def rule(a, attrs, t):
        if t.host_math and t.out.startswith("float"):
            return f"{name}({a[0]}, {a[1]})"
        return _wrap(t, f"{helper}({a[0]}, {a[1]})")

    return rule


scalar("maximum")(_float_pair("fmaximum", "_maximum"))
scalar("minimum")(_float_pair("fminimum", "_minimum"))
for _name, _fn in [("sqrt", "np.sqrt"), ("sin", "np.sin"), ("cos", "np.cos"), ("tan", "np.tan"),
                   ("asin", "np.arcsin"), ("acos", "np.arccos"), ("atan", "np.arctan"), ("sinh", "np.sinh"),
                   ("cosh", "np.cosh"), ("asinh", "np.arcsinh"), ("acosh", "np.arccosh"),
                   ("atanh", "np.arctanh"), ("floor", "np.floor"), ("ceil", "np.ceil"), ("trunc", "np.trunc"),
                   ("round", "np.rint"), ("isnan", "np.isnan"), ("isinf", "np.isinf"),
                   ("isfinite", "np.isfinite"), ("atan2", "np.arctan2")]:
    scalar(_name)(_call(_fn))


def _int_or_float(int_form: str, float_form: str) -> Rule:
    """A binary op whose integer form needs numpy's guards (division by zero gives 0). The float
    form gets its operands cast to the result's dtype, as numpy casts an int or bool operand."""
    def rule(a, attrs, t):
        if t.out.startswith(("int", "uint")):
            return _wrap(t, int_form.format(*a))
        return float_form.format(*(f"{t.out_ctor}({x})" for x in a))

    return rule


for _name, _int_form, _float_form in [
        ("div", "_int_div({0}, {1})", "({0} / {1})"),
        ("floordiv", "_int_floor_div({0}, {1})", "_floor_divide({0}, {1})"),
        ("mod", "_int_mod({0}, {1})", "_mod({0}, {1})"),
        ("fmod", "_int_fmod({0}, {1})", "np.fmod({0}, {1})")]:
    scalar(_name)(_int_or_float(_int_form, _float_form))

_unsigned_or_float_pow = _int_or_float("_int_pow({0}, {1})", "np.power({0}, {1})")


@scalar("pow")
def _pow(a, attrs, t):
    if t.out.startswith("int"):       # a signed exponent may be negative, which numpy refuses
        return _wrap(t, f"_int_pow_checked({a[0]}, {a[1]})")
    return _unsigned_or_float_pow(a, attrs, t)


@scalar("neg")
def _neg(a, attrs, t):
    return _wrap(t, wrapping(t.out, "-", "0", a[0]) if t.out == "int64" else f"(-{a[0]})")


@scalar("abs")
def _abs(a, attrs, t):
    if t.arg.startswith("complex"):     # numba's abs calls libm's hypot: 40x slower, and not numpy's loop
        return f"_complex_abs({a[0]})"
    return _wrap(t, f"abs({a[0]})")


@scalar("square")
def _square(a, attrs, t):
    return _wrap(t, wrapping(t.out, "*", a[0], a[0]))


@scalar("sign")
def _sign(a, attrs, t):
    if t.out.startswith("float"):       # numba's sign(-0.0) is -0.0; numpy's is 0.0 (adding +0.0 turns -0.0 into it)
        return f"(np.sign({a[0]}) + {t.out_ctor}(0))"
    return _wrap(t, f"np.sign({a[0]})")


@scalar("relu")
def _relu(a, attrs, t):
    return _float_pair("fmaximum", "_maximum")([a[0], f"{t.out_ctor}(0)"], attrs, t)


@scalar("rsqrt")
def _rsqrt(a, attrs, t):
    return f"({t.out_ctor}(1) / np.sqrt({a[0]}))"


@scalar("reciprocal")
def _reciprocal(a, attrs, t):
    return f"({t.out_ctor}(1) / {a[0]})"


@scalar("logical_not")
def _not(a, attrs, t):
    return f"(not {a[0]})"


@scalar("bitwise_not")
def _invert(a, attrs, t):
    return f"(not {a[0]})" if t.out == "bool" else _wrap(t, f"(~{a[0]})")


for _name, _word in [("logical_and", "and"), ("logical_or", "or")]:
    scalar(_name)(lambda a, attrs, t, w=_word: f"({a[0]} {w} {a[1]})")


@scalar("logical_xor")
def _xor(a, attrs, t):
    return f"({a[0]} != {a[1]})"


@scalar("where")
def _where(a, attrs, t):
    return f"({a[1]} if {a[0]} else {a[2]})"


@scalar("clip")
def _clip(a, attrs, t):
    expr = a[0]
    if attrs["min"] is not None:
        expr = _float_pair("fmaximum", "_maximum")([expr, f"{t.out_ctor}({attrs['min']!r})"], attrs, t)
    if attrs["max"] is not None:
        expr = _float_pair("fminimum", "_minimum")([expr, f"{t.out_ctor}({attrs['max']!r})"], attrs, t)
    return expr


@scalar("real")
def _real(a, attrs, t):
    return f"{a[0]}.real"


@scalar("imag")
def _imag(a, attrs, t):
    return f"{a[0]}.imag"


@scalar("conj")
def _conj(a, attrs, t):
    return f"{a[0]}.conjugate()"


@scalar("angle")
def _angle(a, attrs, t):
    return f"np.arctan2({a[0]}.imag, {a[0]}.real)"


@scalar("cast")
def _cast(a, attrs, t):
    target, x, source = np.dtype(attrs["dtype"]), a[0], t.arg
    if source.startswith("complex") and target.kind in "iuf":
        x, source = f"{x}.real", "float"      # numpy drops the imaginary part
    if target.kind == "c" and source == "bool":
        return f"{t.out_ctor}(np.float32({x}))"
    if target.kind in "iu" and source.startswith("float"):
        info = np.iinfo(target)
        return (f"_float_to_int({x}, {float(info.min)!r}, {float(info.max)!r}, "
                f"{literal(info.min, target)}, {literal(info.max, target)})")
    if target.kind == "b":
        return f"({x} != 0)"
    return f"{t.out_ctor}({x})"


def _gelu_libm(a, attrs, t):
    return f"_gelu_tanh({a[0]})" if attrs["approximate"] == "tanh" else f"_gelu_erf({a[0]})"


scalar("gelu")(_vectorized(_gelu_libm, lambda attrs: "tanh" if attrs["approximate"] == "tanh" else ""))

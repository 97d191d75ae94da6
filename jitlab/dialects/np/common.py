"""Helpers that make each `np` op a one-line definition: dtype classes and inference
rules shared by families of ops."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence

import numpy as np

from ...errors import DTypeError, UnsupportedOp
from ...ir.attributes import Attr
from ...ir.dtypes import BOOL, dtype_name
from ...ir.opdef import InferCtx, OpDef, Trait, defop
from ...ir.types import TensorType

FLOAT = "f"
INT = "iu"
NUMERIC = "iuf"
BOOLEAN = "b"
INTEGRAL = "iub"
ANY = "iufb"
COMPLEX = "c"
INEXACT = "fc"             # float or complex
NUMBER = "iufc"            # numeric, complex included
EQUATABLE = "iufbc"        # any dtype, complex included: what == and != take

_KIND_NAMES = {FLOAT: "a float", INT: "an integer", NUMERIC: "a numeric (int or float)",
               BOOLEAN: "a bool", INTEGRAL: "an int or bool", ANY: "any", COMPLEX: "a complex",
               INEXACT: "a float or complex", NUMBER: "a numeric", EQUATABLE: "any"}
# Why an op refuses complex operands that numpy accepts: numpy orders complex numbers
# lexicographically (real part first), which is rarely what a comparison of them means.
_ORDERING = ("numpy orders complex numbers lexicographically (by real part, then imaginary part); "
             "compare magnitudes (np.abs(z)) or parts (z.real) instead")
COMPLEX_REFUSALS = {f"np.{n}": _ORDERING for n in (
    "less", "less_equal", "greater", "greater_equal", "maximum", "minimum", "max", "min", "argmax",
    "argmin", "clip", "topk", "relu")}


def check_dtype(ctx: InferCtx, t: TensorType, kinds: str, what: str) -> None:
    if t.dtype.kind == "c" and "c" not in kinds:
        why = COMPLEX_REFUSALS.get(ctx.op_name, "jitlab supports complex numbers in arithmetic, abs, angle, "
                                   "real, imag, conj, exp, log, sqrt, ==, !=, where, sum, prod, mean and matmul")
        raise UnsupportedOp(f"{ctx.op_name}: complex dtype {dtype_name(t.dtype)} is not supported for {what}: {why}")
    if t.dtype.kind not in kinds:
        raise DTypeError(f"{ctx.op_name}: {what} must have {_KIND_NAMES[kinds]} dtype, got {dtype_name(t.dtype)}")


def same_dtype(ctx: InferCtx, types: Sequence[TensorType]) -> np.dtype:
    dtypes = {t.dtype for t in types}
    if len(dtypes) > 1:
        names = ", ".join(dtype_name(t.dtype) for t in types)
        raise DTypeError(f"{ctx.op_name}: operands must share one dtype, got {names} "
                         "(insert np.cast to convert)")
    return types[0].dtype


_erf_object = np.frompyfunc(math.erf, 1, 1)


def erf(x: np.ndarray) -> np.ndarray:
    """numpy has no erf; math.erf elementwise, in float64 (a reference needs accuracy, not speed)."""
    return np.asarray(_erf_object(np.asarray(x, dtype=np.float64)), dtype=np.float64)


def quiet(fn: Callable) -> Callable:
    """Wraps a numpy reference so IEEE special cases give inf/nan silently, as compiled code does."""

    def run(*args, **kwargs):
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)   # "mean of empty slice" and the like
            return fn(*args, **kwargs)

    run.__name__ = getattr(fn, "__name__", "reference")
    return run


def unary(name: str, fn: Callable, kinds: str = FLOAT, out_dtype: np.dtype | Callable | None = None,
          traits: Sequence[Trait] = (), doc: str = "") -> OpDef:
    """An elementwise op of one operand: result has the operand's shape. `out_dtype` is the
    result's dtype, or a function of the operand's (the real dtype of a complex one)."""

    def result_dtype(dtype: np.dtype) -> np.dtype:
        if out_dtype is None:
            return dtype
        return out_dtype if isinstance(out_dtype, np.dtype) else out_dtype(dtype)

    def infer(ctx, types, attrs):
        (t,) = types
        check_dtype(ctx, t, kinds, "the operand")
        return [t.with_dtype(result_dtype(t.dtype))]

    def reference(x):
        return np.asarray(fn(x), dtype=result_dtype(x.dtype))

    return defop(f"np.{name}", operands=1, traits=(Trait.PURE, Trait.ELEMENTWISE, *traits),
                 infer=infer, reference=quiet(reference), operand_names=("x",), doc=doc)


def binary(name: str, fn: Callable, kinds: str = NUMERIC, out_dtype: np.dtype | None = None,
           traits: Sequence[Trait] = (), doc: str = "") -> OpDef:
    """An elementwise op of two operands of one dtype, broadcast numpy style."""

    def infer(ctx, types, attrs):
        a, b = types
        dtype = same_dtype(ctx, types)
        check_dtype(ctx, a, kinds, "the operands")
        return [TensorType(ctx.broadcast(a.shape, b.shape), out_dtype or dtype)]

    def reference(x, y):
        return np.asarray(fn(x, y), dtype=out_dtype or x.dtype)

    return defop(f"np.{name}", operands=2,
                 traits=(Trait.PURE, Trait.ELEMENTWISE, Trait.BROADCAST, *traits),
                 infer=infer, reference=quiet(reference), operand_names=("x", "y"), doc=doc)


def compare(name: str, fn: Callable, kinds: str = ANY, traits: Sequence[Trait] = ()) -> OpDef:
    return binary(name, fn, kinds, BOOL, traits, doc=f"Elementwise {name}, giving bool.")


def normalize_axis(ctx: InferCtx, axis: int, rank: int, what: str = "axis") -> int:
    if not -rank <= axis < rank:
        raise ctx.error(f"{what} {axis} is out of range for rank {rank}")
    return axis % rank


def check_axes(ctx: InferCtx, axes: Sequence[int], rank: int) -> tuple[int, ...]:
    """Axes must be given sorted, unique and non-negative (the tracer normalizes them)."""
    for a in axes:
        if not 0 <= a < rank:
            raise ctx.error(f"axis {a} is out of range for rank {rank} (axes are stored non-negative)")
    if list(axes) != sorted(set(axes)):
        raise ctx.error(f"axes {list(axes)} must be sorted and unique")
    return tuple(axes)


def attr(kind, default=..., doc: str = "") -> Attr:
    """Shorthand for an attribute schema entry."""
    from ...ir.attributes import REQUIRED

    return Attr(kind, REQUIRED if default is ... else default, doc)

"""Ufuncs whose numpy loop for some dtypes is not the IR op's: each rule computes numpy's
answer from ops that take those dtypes, so tracing accepts what numpy accepts.

A rule gets the trace context, the operands already cast to numpy's loop dtypes, and the
loop (input dtypes then output dtype); it returns the result, or None where the ufunc's
own op applies.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import DTypeError
from ..ir.core import OpResult
from .tracer import TraceContext, Tracer

Rule = Callable[[TraceContext, list[Tracer], tuple[np.dtype, ...]], "Tracer | None"]


def _cast(x: Tracer, dtype) -> Tracer:
    dtype = np.dtype(dtype)
    return x if x.dtype == dtype else x.ctx.op("np.cast", x.value, dtype=dtype)


def _integers_unchanged(ctx, operands, loop):
    # numpy 2's floor, ceil and trunc have integer and bool loops returning their input
    return operands[0] if loop[0].kind != "f" else None


def _bool_unchanged(ctx, operands, loop):
    return operands[0] if loop[0].kind == "b" else None


def _never_for_integers(ctx, operands, loop):
    # isnan, isinf: an integer or bool is never NaN or infinite
    x = operands[0]
    return np.not_equal(x, x) if loop[0].kind in "iub" else None


def _always_for_integers(ctx, operands, loop):
    x = operands[0]
    return np.equal(x, x) if loop[0].kind in "iub" else None


def _signbit(ctx, operands, loop):
    # the sign bit itself, so -0.0 and -nan count as negative, as in numpy (its loops are float)
    x = operands[0]
    return np.less(ctx.op("np.bitcast", x.value, dtype=np.dtype(f"i{x.dtype.itemsize}")), 0)


def _logical(ufunc: np.ufunc) -> Rule:
    def rule(ctx, operands, loop):
        # numpy's logic loops take numbers as their truth values (x != 0; NaN is true)
        if all(x.dtype.kind == "b" for x in operands):
            return None
        return ufunc(*(_cast(x, np.bool_) for x in operands))

    return rule


def _nan_ignoring(ufunc: np.ufunc) -> Rule:
    def rule(ctx, operands, loop):
        a, b = operands
        best = (np.maximum if ufunc is np.fmax else np.minimum)(a, b)
        if loop[0].kind != "f":
            return best
        return np.where(np.isnan(a), b, np.where(np.isnan(b), a, best))

    return rule


def _bool_matmul(ctx, operands, loop):
    # numpy's bool matmul is an OR of ANDs: count the true products, then test the count
    if loop[0].kind != "b":
        return None
    return np.not_equal(np.matmul(*(_cast(x, np.int64) for x in operands)), 0)


def _integer_reciprocal(ctx, operands, loop):
    # numpy's integer loop computes 1.0 / x and truncates (0 for |x| > 1; 1 / 0 is undefined)
    if loop[0].kind in "fc":
        return None
    return _cast(np.divide(1.0, _cast(operands[0], np.float64)), loop[-1])


def _constant(value) -> np.ndarray | None:
    """The array of a constant, looking through a cast; None for a value known only at run time."""
    if isinstance(value, OpResult) and value.op.name == "np.cast":
        value = value.op.operands[0]
    if isinstance(value, OpResult) and value.op.name == "np.constant":
        return value.op.attrs["value"].array
    return None


def _integer_power(ctx, operands, loop):
    # numpy refuses a negative integer exponent; a constant one is known while tracing
    known = _constant(operands[1].value)
    if loop[0].kind in "iu" and known is not None and (known < 0).any():
        raise DTypeError(f"np.power: integers to negative integer powers are not allowed, as in numpy; "
                         f"make the base a float ({ctx.where()})")
    return None


def _identity(ctx, operands, loop):
    return operands[0]


def _conjugate(ctx, operands, loop):
    return ctx.op("np.conj", operands[0].value) if loop[0].kind == "c" else operands[0]


def _by_parts(test: np.ufunc, either: bool) -> Rule:
    """isnan and isinf of a complex hold if they hold of either part; isfinite, of both."""
    def rule(ctx, operands, loop):
        if loop[0].kind in "iub":
            return (_never_for_integers if either else _always_for_integers)(ctx, operands, loop)
        if loop[0].kind != "c":
            return None
        z = operands[0]
        parts = test(np.real(z)), test(np.imag(z))
        return np.logical_or(*parts) if either else np.logical_and(*parts)

    return rule


RULES: dict[np.ufunc, Rule] = {
    np.floor: _integers_unchanged, np.ceil: _integers_unchanged, np.trunc: _integers_unchanged,
    np.absolute: _bool_unchanged, np.isnan: _by_parts(np.isnan, True), np.isinf: _by_parts(np.isinf, True),
    np.isfinite: _by_parts(np.isfinite, False), np.signbit: _signbit,
    np.logical_and: _logical(np.logical_and), np.logical_or: _logical(np.logical_or),
    np.logical_xor: _logical(np.logical_xor), np.logical_not: _logical(np.logical_not),
    np.fmax: _nan_ignoring(np.fmax), np.fmin: _nan_ignoring(np.fmin), np.matmul: _bool_matmul,
    np.reciprocal: _integer_reciprocal, np.power: _integer_power, np.positive: _identity, np.conjugate: _conjugate,
}

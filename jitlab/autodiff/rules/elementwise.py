"""VJP rules of elementwise ops. Unary ops are a table of derivatives; binary ops give
one partial per operand, summed back to the operand's shape when it was broadcast.

Ties: maximum/minimum split the gradient evenly between equal operands (as JAX does),
clip passes it where min <= x <= max, abs uses sign(x) (0 at 0).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ..emit import scalar_constant, sum_to
from ..registry import Primal, no_gradient, unsupported_gradient, vjp

# d out / d x in terms of the operand x and the result y.
DERIVATIVES = {
    "np.exp": lambda x, y: y,
    "np.expm1": lambda x, y: y + 1,
    "np.exp2": lambda x, y: y * math.log(2),
    "np.log": lambda x, y: 1 / x,
    "np.log1p": lambda x, y: 1 / (x + 1),
    "np.log2": lambda x, y: 1 / (x * math.log(2)),
    "np.log10": lambda x, y: 1 / (x * math.log(10)),
    "np.sqrt": lambda x, y: 0.5 / y,
    "np.rsqrt": lambda x, y: -0.5 * y * y * y,
    "np.tanh": lambda x, y: 1 - y * y,
    "np.erf": lambda x, y: 2 / math.sqrt(math.pi) * np.exp(-x * x),
    "np.sin": lambda x, y: np.cos(x),
    "np.cos": lambda x, y: -np.sin(x),
    "np.tan": lambda x, y: 1 + y * y,
    "np.asin": lambda x, y: 1 / np.sqrt(1 - x * x),
    "np.acos": lambda x, y: -1 / np.sqrt(1 - x * x),
    "np.atan": lambda x, y: 1 / (1 + x * x),
    "np.sinh": lambda x, y: np.cosh(x),
    "np.cosh": lambda x, y: np.sinh(x),
    "np.asinh": lambda x, y: 1 / np.sqrt(x * x + 1),
    "np.acosh": lambda x, y: 1 / np.sqrt(x * x - 1),
    "np.atanh": lambda x, y: 1 / (1 - x * x),
    "np.reciprocal": lambda x, y: -(y * y),
    "np.sigmoid": lambda x, y: y * (1 - y),
    "np.square": lambda x, y: 2 * x,
    "np.abs": lambda x, y: np.sign(x),
}


def _unary(derivative):
    def rule(p: Primal, g):
        return [g * derivative(p.args[0], p.out)]

    return rule


for _name, _derivative in DERIVATIVES.items():
    vjp(_name)(_unary(_derivative))


@vjp("np.neg")
def _neg(p: Primal, g):
    return [-g]


@vjp("np.relu")
def _relu(p: Primal, g):
    return [np.where(p.args[0] > 0, g, 0)]


# Partials of binary ops, each (g, x, y, out) -> the cotangent before un-broadcasting.
PARTIALS = {
    "np.add": (lambda g, x, y, z: g, lambda g, x, y, z: g),
    "np.sub": (lambda g, x, y, z: g, lambda g, x, y, z: -g),
    "np.mul": (lambda g, x, y, z: g * y, lambda g, x, y, z: g * x),
    "np.div": (lambda g, x, y, z: g / y, lambda g, x, y, z: -g * z / y),
    "np.maximum": (lambda g, x, y, z: _share(g, x > y, x == y), lambda g, x, y, z: _share(g, y > x, x == y)),
    "np.minimum": (lambda g, x, y, z: _share(g, x < y, x == y), lambda g, x, y, z: _share(g, y < x, x == y)),
    "np.atan2": (lambda g, x, y, z: g * y / (x * x + y * y), lambda g, x, y, z: -g * x / (x * x + y * y)),
    "np.mod": (lambda g, x, y, z: g, lambda g, x, y, z: -g * np.floor(x / y)),
    "np.fmod": (lambda g, x, y, z: g, lambda g, x, y, z: -g * np.trunc(x / y)),
}


def _share(g, wins, ties):
    """All of g where this operand won, half of it where the operands tie."""
    return np.where(wins, g, np.where(ties, g * 0.5, 0))


def _binary(partials):
    def rule(p: Primal, g):
        x, y = p.args
        return [sum_to(d(g, x, y, p.out), a.shape) if want else None
                for d, a, want in zip(partials, p.args, p.wants)]

    return rule


for _name, _partials in PARTIALS.items():
    vjp(_name)(_binary(_partials))


POW = (lambda g, x, y, z: np.where(y == 0, 0, g * y * np.power(x, y - 1)),
       lambda g, x, y, z: g * z * np.log(np.where(x == 0, 1, x)))


@vjp("np.pow")
def _pow(p: Primal, g):
    x, y = p.args
    c = scalar_constant(y)
    if c is None:
        return _binary(POW)(p, g)
    # A constant exponent (x ** 2 in user code) needs neither the y == 0 guard nor a log.
    d = 2 * x if c == 2 else c * np.power(x, c - 1)
    return [sum_to(g * d, x.shape), None]


@vjp("np.where")
def _where(p: Primal, g):
    cond, x, y = p.args
    return [None, sum_to(np.where(cond, g, 0), x.shape), sum_to(np.where(cond, 0, g), y.shape)]


@vjp("np.clip")
def _clip(p: Primal, g):
    x, lo, hi = p.args[0], p.attrs["min"], p.attrs["max"]
    inside = ([x >= lo] if lo is not None else []) + ([x <= hi] if hi is not None else [])
    return [np.where(functools.reduce(np.logical_and, inside), g, 0) if inside else g]


@vjp("np.cast")
def _cast(p: Primal, g):
    x = p.args[0]
    return [g.astype(x.dtype) if x.dtype.kind == "f" else None]


no_gradient("piecewise constant: the gradient is zero almost everywhere",
            "np.floor", "np.ceil", "np.trunc", "np.round", "np.sign", "np.floordiv")
no_gradient("the result is not a float", "np.isnan", "np.isinf", "np.isfinite", "np.logical_not",
            "np.bitwise_not", "np.bitwise_and", "np.bitwise_or", "np.bitwise_xor", "np.left_shift",
            "np.right_shift", "np.logical_and", "np.logical_or", "np.logical_xor", "np.equal",
            "np.not_equal", "np.less", "np.less_equal", "np.greater", "np.greater_equal")
no_gradient("no operands", "np.constant", "np.weight")
unsupported_gradient("gradients through complex numbers are not supported", "np.real", "np.imag", "np.angle",
                     "np.conj")

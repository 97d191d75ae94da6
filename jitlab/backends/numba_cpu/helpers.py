"""Scalar functions generated kernels call; numba inlines them into the loops."""

import math

import numpy as np

from ...errors import InputError
from ..numba_files import njit_cached
from ..scalar_semantics import (
    complex_abs_with,
    float_divmod_with,
    float_to_int_with,
    int_div,
    int_floor_div,
    int_fmod,
    int_mod,
    int_pow,
    maximum,
    minimum,
)

# forceinline lets LLVM inline them with their own flags kept; numba's inline="always" would
# re-lower them with the kernel's flags instead (see fastmath.py).
_inline = njit_cached(forceinline=True, error_model="numpy")


_maximum, _minimum, _int_div, _int_floor_div, _int_fmod, _int_mod, _int_pow = (
    _inline(fn) for fn in (maximum, minimum, int_div, int_floor_div, int_fmod, int_mod, int_pow))
_floor_divide, _mod = (_inline(fn) for fn in float_divmod_with(np.floor, np.fmod, np.copysign))


@_inline
def _int_pow_checked(a, b):
    """a ** b for integers; a negative b is an InputError, as numpy refuses it (a kernel that calls
    this raises, so it stays a numba dispatcher and runs in order: codegen.RAISING_HELPERS)."""
    if b < 0:
        raise InputError("np.pow: integers to negative integer powers are not allowed (numpy raises ValueError)")
    return _int_pow(a, b)


_float_to_int = _inline(float_to_int_with(np.trunc))
_complex_abs = _inline(complex_abs_with(np.sqrt))


@_inline
def _erf(x):
    return math.erf(x)


@_inline
def _sigmoid(x):
    one = type(x)(1)
    if x >= 0:
        return one / (one + np.exp(-x))
    e = np.exp(x)
    return e / (one + e)


@_inline
def _gelu_erf(x):
    half = type(x)(0.5)
    return half * x * (type(x)(1) + _erf(x * type(x)(0.7071067811865476)))


@_inline
def _gelu_tanh(x):
    half = type(x)(0.5)
    inner = type(x)(0.7978845608028654) * (x + type(x)(0.044715) * x * x * x)
    return half * x * (type(x)(1) + np.tanh(inner))

"""Device functions generated CUDA kernels call: numpy's scalar semantics and block reductions.

Kernels are the same source on a GPU and under numba's simulator; only the primitives
below differ. On a GPU they are `math` and libdevice calls (numba.cuda has no numpy
ufuncs on scalars). The simulator runs kernels as Python, where `math.log(0.0)` raises
and `math.exp(1e3)` overflows, so there the primitives are numpy's own ufuncs.

Block reductions follow the usual shape: each warp combines its 32 values with
shuffles, lane 0 of each warp leaves its partial in shared memory, then warp 0 combines
the partials. The simulator has no shuffles, so `_shfl_down` is emulated there through
shared memory with two barriers per step; every thread calls it the same number of
times, which the barriers need (and which the real shuffles do not mind).

Every function here that holds a barrier (a `cuda.syncthreads`, a shuffle, or a call to one
that does) must be called by all threads of the block together: barriers.py reads this file
to know which they are, and refuses a generated kernel that calls one where some threads may
not. No block vote (`syncthreads_or/and`) is used: numba has compiled one into two barriers
on two paths (issue #9770), which hangs the block; any/all reduce like every other reduction.
"""

from __future__ import annotations

import cmath
import math

import numpy as np
from numba import cuda

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
from .device import simulator_enabled

SIMULATOR = simulator_enabled()
WARP = 32
FULL_MASK = 0xFFFFFFFF
MAX_BLOCK = 1024
# Shared slots for one reduction: a partial per warp, plus (simulator) one slot per thread for shuffles.
REDUCE_SLOTS = WARP + (MAX_BLOCK if SIMULATOR else 0)


def device(fn):
    """A device function, inlined into the kernels that call it.

    The inlining is NVVM's (forceinline), not numba's IR-level inline="always": that one types each
    call site's copy again, and tiny_500 (one kernel of 500 ops, 250 calls) compiled in over 100 s
    on an H100 with it, 5.1 s with forceinline. The simulator has no inlining and takes no such option."""
    if SIMULATOR:
        return cuda.jit(device=True)(fn)
    return cuda.jit(device=True, forceinline=True)(fn)


if SIMULATOR:
    _exp, _expm1, _log, _log1p, _log2, _log10 = np.exp, np.expm1, np.log, np.log1p, np.log2, np.log10
    _exp2, _sqrt, _tanh, _sin, _cos, _tan = np.exp2, np.sqrt, np.tanh, np.sin, np.cos, np.tan
    _arcsin, _arccos, _arctan, _arctan2 = np.arcsin, np.arccos, np.arctan, np.arctan2
    _sinh, _cosh, _arcsinh, _arccosh, _arctanh = np.sinh, np.cosh, np.arcsinh, np.arccosh, np.arctanh
    _floor, _ceil, _trunc, _rint = np.floor, np.ceil, np.trunc, np.rint
    _isnan, _isinf, _isfinite = np.isnan, np.isinf, np.isfinite
    _power, _fmod, _copysign = np.power, np.fmod, np.copysign

    def _erf(x):
        return type(x)(math.erf(x))

    @device
    def _shfl_down(v, delta, scratch):
        t = cuda.threadIdx.x
        scratch[WARP + t] = v
        cuda.syncthreads()
        other = scratch[WARP + t + delta] if t % WARP + delta < WARP else v
        cuda.syncthreads()
        return other

else:
    from numba.cuda import libdevice

    _exp, _expm1, _log, _log1p, _log2, _log10 = math.exp, math.expm1, math.log, math.log1p, math.log2, math.log10
    _sqrt, _tanh, _sin, _cos, _tan = math.sqrt, math.tanh, math.sin, math.cos, math.tan
    _arcsin, _arccos, _arctan, _arctan2 = math.asin, math.acos, math.atan, math.atan2
    _sinh, _cosh, _arcsinh, _arccosh, _arctanh = math.sinh, math.cosh, math.asinh, math.acosh, math.atanh
    _isnan, _isinf, _isfinite, _erf, _fmod = math.isnan, math.isinf, math.isfinite, math.erf, math.fmod
    _copysign = math.copysign

    @device
    def _exp2(x):
        return math.pow(type(x)(2), x)

    # libdevice's double versions are exact for float32 values too.
    @device
    def _floor(x):
        return type(x)(libdevice.floor(x))

    @device
    def _ceil(x):
        return type(x)(libdevice.ceil(x))

    @device
    def _trunc(x):
        return type(x)(libdevice.trunc(x))

    @device
    def _rint(x):
        return type(x)(libdevice.rint(x))

    @device
    def _power(x, y):
        return math.pow(x, y)

    @device
    def _shfl_down(v, delta, scratch):
        return cuda.shfl_down_sync(FULL_MASK, v, delta)


# Complex operands take cmath's functions on the device (math's take only reals); numpy's on the simulator.
if SIMULATOR:
    _cexp, _clog, _csqrt = np.exp, np.log, np.sqrt
else:
    _cexp, _clog, _csqrt = cmath.exp, cmath.log, cmath.sqrt


# One definition for the GPU and the simulator, so that the simulator's tests check the GPU's code.
@device
def _sign(x):
    """numpy's sign: +0.0 for either zero (-0.0 included: 1 / sign(-0.0) is +inf), NaN for NaN."""
    if x > 0:
        return type(x)(1)
    if x < 0:
        return type(x)(-1)
    if x == 0:
        return type(x)(0)
    return x


_maximum, _minimum, _int_div, _int_floor_div, _int_fmod, _int_mod, _int_pow = (
    device(fn) for fn in (maximum, minimum, int_div, int_floor_div, int_fmod, int_mod, int_pow))
_floor_divide, _mod = (device(fn) for fn in float_divmod_with(_floor, _fmod, _copysign))
_complex_abs = device(complex_abs_with(_sqrt))


@device
def _add(a, b):
    return a + b


@device
def _mul(a, b):
    return a * b


_float_to_int = device(float_to_int_with(_trunc))


@device
def _sigmoid(x):
    one = type(x)(1)
    if x >= 0:
        return one / (one + _exp(-x))
    e = _exp(x)
    return e / (one + e)


@device
def _gelu_erf(x):
    half = type(x)(0.5)
    return half * x * (type(x)(1) + type(x)(_erf(x * type(x)(0.7071067811865476))))


@device
def _gelu_tanh(x):
    half = type(x)(0.5)
    inner = type(x)(0.7978845608028654) * (x + type(x)(0.044715) * x * x * x)
    return half * x * (type(x)(1) + _tanh(inner))


@device
def _patch(x, n, c, y, col, valid, zero):
    """A conv input element, or zero in the padding (and outside the GEMM's edges)."""
    if valid and 0 <= y < x.shape[2] and 0 <= col < x.shape[3]:
        return x[n, c, y, col]
    return zero


def _reducer(combine):
    """A block-wide reduction with `combine`; every thread of the block gets the result."""

    @device
    def warp(v, scratch):
        delta = WARP // 2
        while delta > 0:
            v = combine(v, _shfl_down(v, delta, scratch))
            delta //= 2
        return v

    @device
    def block(v, shared, identity):
        t = cuda.threadIdx.x
        v = warp(v, shared)
        if t % WARP == 0:
            shared[t // WARP] = v
        cuda.syncthreads()
        v = shared[t] if t < (cuda.blockDim.x + WARP - 1) // WARP else identity
        v = warp(v, shared)            # all threads call it; only warp 0's result is kept
        if t == 0:
            shared[0] = v
        cuda.syncthreads()
        v = shared[0]
        cuda.syncthreads()             # the next reduction may overwrite the slots
        return v

    return block


_block_sum = _reducer(_add)
_block_prod = _reducer(_mul)
_block_max = _reducer(_maximum)
_block_min = _reducer(_minimum)


# any/all reduce as int32 maxima and minima through the same shuffles and shared slots: a
# syncthreads_or/and vote is a barrier the compiler may duplicate onto thread-dependent paths
# (numba issue #9770: threads wait at different barriers and the block hangs).
@device
def _block_any(v, shared, identity):
    return _block_max(np.int32(v), shared, np.int32(0)) != 0


@device
def _block_all(v, shared, identity):
    return _block_min(np.int32(v), shared, np.int32(1)) != 0


NAMES = sorted(n for n in list(globals()) if n.startswith("_") and not n.startswith("__")
               and n not in ("_reducer",))

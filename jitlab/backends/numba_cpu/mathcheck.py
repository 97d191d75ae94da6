"""Checks the fastmath table: error in ulps against higher-precision references, on samples of
every binade, special values and threshold points; whether a numba loop calling each function
vectorizes; and its time per element against numpy and numba's default libm call.

`python -m jitlab.backends.numba_cpu.mathcheck` prints the table.
"""

from __future__ import annotations

import math
import platform
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from .fastmath import TABLE, MathImpl

SQRT1_2 = 1 / math.sqrt(2)
GELU_K1 = 2 * math.sqrt(2 / math.pi)


def _sigmoid_ref(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1, e) / (1 + e)


def _gelu_tanh_ref(x):
    w = x * (GELU_K1 + GELU_K1 * 0.044715 * x * x)
    return x * _sigmoid_ref(w)


_erf, _erfc = np.frompyfunc(math.erf, 1, 1), np.frompyfunc(math.erfc, 1, 1)


@njit(error_model="numpy")
def _libm_sigmoid(x):
    return 1 / (1 + np.exp(-x))


@njit(error_model="numpy")
def _libm_gelu(x):
    return 0.5 * x * (1 + math.erf(x * SQRT1_2))


@njit(error_model="numpy")
def _libm_gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


@njit(error_model="numpy")
def _scalar_sigmoid(x):
    e = np.exp(-abs(x))
    return (1.0 if x >= 0 else e) / (1 + e)


@njit(error_model="numpy")
def _scalar_gelu(x):
    return 0.5 * x * math.erfc(-x * SQRT1_2)


@njit(error_model="numpy")
def _scalar_gelu_tanh(x):
    return x * _scalar_sigmoid(x * (GELU_K1 + GELU_K1 * 0.044715 * x * x))


@dataclass(frozen=True)
class Oracle:
    """What an implementation is checked and timed against."""

    reference: Callable      # accurate y for an array x in float64 (long double for float64 functions)
    libm: Callable           # the scalar numba function a kernel would call without fastmath
    critical: Callable       # finfo -> inputs where the result crosses a threshold
    scalar: Callable | None = None   # numba float64 reference for the exhaustive sweep; None: libm's

    @property
    def exact(self) -> Callable:
        return self.scalar or self.libm


def _exp_critical(fi):
    return [math.log(float(fi.max)), math.log(float(fi.tiny)), math.log(float(fi.smallest_subnormal)),
            math.log(float(fi.smallest_subnormal)) - math.log(2)]


def _log_critical(fi):
    return [1.0, float(fi.tiny), float(fi.smallest_subnormal), float(fi.max), math.sqrt(2), math.sqrt(0.5), 10.0]


def _ufunc(f: Callable, critical: Callable) -> Oracle:
    """An op numpy has as a ufunc: numpy on the wide dtype is the reference, numba's call is libm's."""
    return Oracle(f, njit(lambda x: f(x)), critical)


ORACLES: dict[tuple[str, str], Oracle] = {
    ("np.exp", ""): _ufunc(np.exp, _exp_critical),
    ("np.exp2", ""): _ufunc(np.exp2, lambda fi: [v / math.log(2) for v in _exp_critical(fi)]),
    ("np.expm1", ""): _ufunc(np.expm1, lambda fi: _exp_critical(fi) + [-17.33, -36.74, 0.3466]),
    ("np.log", ""): _ufunc(np.log, _log_critical),
    ("np.log2", ""): _ufunc(np.log2, _log_critical),
    ("np.log10", ""): _ufunc(np.log10, _log_critical),
    ("np.log1p", ""): _ufunc(np.log1p, lambda fi: [-1.0, float(fi.eps) / 2, float(fi.eps) / 4, float(fi.max)]),
    ("np.tanh", ""): _ufunc(np.tanh, lambda fi: [0.0004, 7.90531110763549805, 9.01, 19.06, 22.0]),
    ("np.sigmoid", ""): Oracle(_sigmoid_ref, _libm_sigmoid, lambda fi: _exp_critical(fi) + [-2.7357633977066067],
                               _scalar_sigmoid),
    ("np.erf", ""): Oracle(lambda x: _erf(x).astype(x.dtype), njit(lambda x: math.erf(x)),
                           lambda fi: [1.0, 3.92, 4.0]),
    ("np.gelu", ""): Oracle(lambda x: (0.5 * x * _erfc(-x * SQRT1_2)).astype(x.dtype), _libm_gelu,
                            lambda fi: [1.4142, 13.2, 14.9, 5.4], _scalar_gelu),
    ("np.gelu", "tanh"): Oracle(_gelu_tanh_ref, _libm_gelu_tanh, lambda fi: [5.0, 11.5, 12.0, 26.0],
                                _scalar_gelu_tanh),
}


def oracle(impl: MathImpl) -> Oracle:
    return ORACLES[impl.op, impl.variant]


def numpy_eager(impl: MathImpl) -> Callable:
    """The op's numpy reference implementation (what jitlab's O0 runs)."""
    from ...ir.opdef import get_opdef

    reference = get_opdef(impl.op).reference
    attrs = {"approximate": impl.variant} if impl.op == "np.gelu" else {}
    return lambda x: reference(x, **attrs) if attrs else reference(x)


def wide(dtype) -> type:
    """The dtype references are computed in: float64 for float32, long double for float64."""
    return np.float64 if np.dtype(dtype) == np.float32 else np.longdouble


def _bits_type(dtype):
    return np.uint32 if np.dtype(dtype) == np.float32 else np.uint64


def binade_sample(dtype, per_binade: int, seed: int = 0) -> np.ndarray:
    """per_binade random values from every binade of both signs, subnormals as binade 0."""
    fi = np.finfo(dtype)
    mant, ebits = fi.nmant, fi.nexp
    uint = _bits_type(dtype)
    rng = np.random.default_rng(seed)
    exponents = np.repeat(np.arange((1 << ebits) - 1, dtype=np.uint64), per_binade)
    signs = rng.integers(0, 2, exponents.size, dtype=np.uint64)
    mantissas = rng.integers(0, 1 << mant, exponents.size, dtype=np.uint64)
    bits = (signs << np.uint64(mant + ebits)) | (exponents << np.uint64(mant)) | mantissas
    return bits.astype(uint).view(dtype)


def special_values(dtype) -> np.ndarray:
    """Zeros, subnormal edges, normal edges, infinities and NaNs of both signs."""
    fi = np.finfo(dtype)
    edges = [0.0, float(fi.smallest_subnormal), float(fi.tiny) - float(fi.smallest_subnormal), float(fi.tiny),
             float(fi.max), np.inf, 1.0, 0.5, 2.0]
    values = np.array(edges + [-v for v in edges] + [np.nan], dtype=dtype)
    neg_nan = np.array([np.nan], dtype=dtype).view(_bits_type(dtype)) | _bits_type(dtype)(1 << (fi.bits - 1))
    return np.concatenate([values, neg_nan.view(dtype)])


def around(points, dtype, steps: int = 4) -> np.ndarray:
    """Each point and its `steps` neighbours on either side in dtype, both signs."""
    base = np.array(points, dtype=dtype)
    base = np.concatenate([base, -base])
    out = [base]
    up, down = base.copy(), base.copy()
    with np.errstate(over="ignore"):
        for _ in range(steps):
            up, down = np.nextafter(up, np.inf), np.nextafter(down, -np.inf)
            out += [up, down]
    return np.concatenate(out)


def ulp_error(got: np.ndarray, reference: np.ndarray, dtype) -> np.ndarray:
    """|got - reference| in ulps of dtype at the reference; NaN against non-NaN (or the reverse)
    and a wrong infinity are infinitely wrong."""
    fi = np.finfo(dtype)
    with np.errstate(all="ignore"):
        rounded = reference.astype(dtype)
        unit = np.spacing(np.minimum(np.abs(rounded), fi.max)).astype(reference.dtype)
        err = np.abs(got.astype(reference.dtype) - reference) / unit
    same = (got == rounded) | (np.isnan(got) & np.isnan(reference))
    err = np.where(same, 0.0, err)
    return np.where(np.isnan(err), np.inf, err)


_loops: dict[Callable, Callable] = {}     # keyed by the function itself, which the key keeps alive


def loop_for(fn: Callable) -> Callable:
    """A numba loop applying scalar fn to every element (one per fn, compiled on first use)."""
    if fn not in _loops:
        @njit(error_model="numpy")
        def apply(x, out):
            for i in range(x.size):
                out[i] = fn(x[i])

        _loops[fn] = apply
    return _loops[fn]


def evaluate(fn: Callable, x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    loop_for(fn)(x, out)
    return out


def max_error(impl: MathImpl, x: np.ndarray) -> tuple[float, float]:
    """The largest error in ulps of impl over x, and the input where it occurs."""
    got = evaluate(impl.fn, x)
    with np.errstate(all="ignore"):
        reference = oracle(impl).reference(x.astype(wide(impl.dtype)))
    err = ulp_error(got, reference, impl.dtype)
    worst = int(np.argmax(err))
    return float(err[worst]), float(x[worst])


_F32_MAX, _F32_TINY = float(np.finfo(np.float32).max), float(np.finfo(np.float32).tiny)


@njit(error_model="numpy")
def _ulps32(got, ref):
    """ulp_error for one float32 result against a float64 reference."""
    if got != got or ref != ref:
        return 0.0 if (got != got) == (ref != ref) else np.inf
    rounded = np.float32(ref)
    if got == rounded:
        return 0.0
    a = min(abs(np.float64(rounded)), _F32_MAX)
    unit = 2.0 ** -149 if a < _F32_TINY else math.ldexp(1.0, math.frexp(a)[1] - 24)
    return abs(np.float64(got) - ref) / unit


_sweeps: dict[tuple[Callable, Callable], Callable] = {}


def sweep_for(fn: Callable, exact: Callable) -> Callable:
    """A parallel numba loop over float32 bit patterns [first << 16, (first + chunks) << 16)
    returning each 2**16 chunk's worst error and where it was."""
    if (fn, exact) not in _sweeps:
        @njit(parallel=True, error_model="numpy")
        def sweep(first, chunks):
            worst, where = np.zeros(chunks), np.zeros(chunks, np.float32)
            for c in prange(chunks):
                x = np.arange((first + c) << 16, (first + c + 1) << 16).astype(np.uint32).view(np.float32)
                y = np.empty_like(x)
                for i in range(x.size):         # a vectorized pass, as in a kernel
                    y[i] = fn(x[i])
                for i in range(x.size):
                    ref = exact(np.float64(x[i]))
                    if y[i] != np.float32(ref):
                        e = _ulps32(y[i], ref)
                        if e > worst[c]:
                            worst[c], where[c] = e, x[i]
            return worst, where

        _sweeps[fn, exact] = sweep
    return _sweeps[fn, exact]


def exhaustive_error(impl: MathImpl) -> tuple[float, float]:
    """The largest error of a float32 implementation over all 2**32 inputs, and where."""
    sweep = sweep_for(impl.fn, oracle(impl).exact)
    worst, where = sweep(0, 1 << 16)
    i = int(np.argmax(worst))
    return float(worst[i]), float(where[i])


_PACKED = re.compile(r"\bv?(?:fn?madd\w*|fn?msub\w*|mul|add|sub|div|max|min|blendv|blendm|cmp\w*|sqrt|rndscale|round)"
                     r"p[sd]\s.*%([xyz])mm")


def vector_width(fn: Callable, dtype) -> str:
    """The widest register of packed float arithmetic in a numba loop calling fn: "zmm", "ymm",
    "xmm", or "" where the loop stays scalar."""
    evaluate(fn, np.zeros(4, dtype))
    return vector_width_of(loop_for(fn))


def vector_width_of(dispatcher) -> str:
    """The widest register of packed float arithmetic in a compiled (serial) numba function."""
    asm = dispatcher.inspect_asm(dispatcher.signatures[-1])
    found = {m.group(1) for m in _PACKED.finditer(asm)}
    return next((f"{r}mm" for r in "zyx" if r in found), "")


def is_x86() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64")


def speed_row(impl: MathImpl, n: int = 1 << 22, repeats: int = 11) -> dict:
    """ns per element over n values in [-4, 4] (|x| for logarithms) for the fastmath loop, the loop
    numba compiles with its libm call, and numpy eager; interleaved medians."""
    from ...timing import interleaved_medians

    x = np.random.default_rng(1).uniform(-4, 4, n).astype(impl.dtype)
    if impl.op.startswith("np.log"):
        x = np.abs(x)
    out = np.empty_like(x)
    fast, libm, eager = loop_for(impl.fn), loop_for(oracle(impl).libm), numpy_eager(impl)
    fast(x, out), libm(x, out)
    medians = interleaved_medians({"fastmath": lambda: fast(x, out), "libm": lambda: libm(x, out),
                                   "numpy": lambda: eager(x)}, repeats)
    return {name: seconds / n * 1e9 for name, seconds in medians.items()}


def report(per_binade: int = 4096) -> str:
    """The markdown table of every implementation: ulps, vector width, ns per element."""
    rows = ["| op | dtype | bound | measured ulps (worst x) | vector | fastmath ns | libm ns | numpy ns |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for impl in TABLE.values():
        x = np.concatenate([binade_sample(impl.dtype, per_binade if impl.dtype == "float32" else per_binade // 16),
                            special_values(impl.dtype),
                            around(oracle(impl).critical(np.finfo(impl.dtype)), impl.dtype)])
        err, at = max_error(impl, x)
        speed = speed_row(impl)
        name = impl.op + (f"[{impl.variant}]" if impl.variant else "")
        rows.append(f"| {name} | {impl.dtype} | {impl.ulps} | {err:.2f} ({at:.6g}) | "
                    f"{vector_width(impl.fn, impl.dtype) or 'no'} | {speed['fastmath']:.2f} | "
                    f"{speed['libm']:.2f} | {speed['numpy']:.2f} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(report())

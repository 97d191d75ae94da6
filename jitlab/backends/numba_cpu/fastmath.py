"""Vectorizable float32/float64 math for generated numba kernels.

numba lowers np.exp, np.tanh, math.erf ... to scalar libm calls, which stop LLVM from
vectorizing the kernel loop (SVML is not available in the PyPI llvmlite). The functions
here are straight-line float code (polynomials, a division, selects and bit tricks from
`bits`) that LLVM inlines into the caller's loop and vectorizes. `lookup(op, dtype)` gives
the code generator the implementation of an `np` op with its tested error bound.

Error bounds are in units in the last place of the result's dtype against a float64
(float32 functions) or long double (float64 functions) reference, over all inputs,
special values included; tests/backends/test_fastmath.py checks every bound.

Calling them from a kernel: they are compiled with their own flags and `forceinline`, so
LLVM inlines them with their flags kept whatever flags the kernel uses (fastmath=True on
the kernel does not reach inside them). numba's `inline="always"` would instead re-lower
them with the kernel's flags and error model, losing both accuracy and vectorization.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, localcontext

import numpy as np

from ...registry import Registry
from ..numba_files import njit_cached
from .bits import exponent, mantissa, pow2

# FMA contraction only: no-NaN / no-inf / reassociation flags would break the IEEE special
# values these functions promise. The numpy error model keeps divisions free of zero checks,
# whose raising branch would stop vectorization.
JIT_OPTIONS = {"fastmath": {"contract"}, "error_model": "numpy", "forceinline": True}
jit = njit_cached(**JIT_OPTIONS)
FLOATS = (np.float32, np.float64)


@jit
def poly(x, coeffs):
    """Horner evaluation of a polynomial given highest-degree coefficient first."""
    p = coeffs[0]
    for i in range(1, len(coeffs)):
        p = p * x + coeffs[i]
    return p


def _consts(F, *values) -> tuple:
    return tuple(F(v) for v in values)


def _taylor(F, first: int, last: int, scale: float = 1.0) -> tuple:
    """scale**n / n! for n from `last` down to `first`: exp's series, highest degree first."""
    return tuple(F(scale ** n / math.factorial(n)) for n in range(last, first - 1, -1))


def _split(value: Decimal, F, keep: int) -> tuple:
    """value = hi + lo, hi keeping `keep` significant bits so small-integer multiples of hi are exact."""
    m, e = math.frexp(float(value))
    hi = math.ldexp(math.floor(m * 2 ** keep), e - keep)
    return F(hi), F(float(value - Decimal(hi)))


def _ln(x: int) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = 40
        return Decimal(x).ln()


LN2, LN10 = _ln(2), _ln(10)
# Bits kept in the high part of ln 2: exponents k up to 2^8 (float32) / 2^11 (float64) times
# ln2_hi must be exact for the Cody-Waite range reduction x - k ln 2.
_KEEP = {np.float32: 16, np.float64: 40}
_MANT = {np.float32: 23, np.float64: 52}
# exp's clamp: past hi the result overflows; below lo it is 0 even times a factor up to e**5.
_EXP_RANGE = {np.float32: (-110.0, 89.0), np.float64: (-750.0, 710.0)}
# Taylor degree that keeps the truncation of exp on [-ln2/2, ln2/2] under a quarter ulp.
_EXP_DEGREE = {np.float32: 7, np.float64: 13}


def _clamp(F, lo: float, hi: float) -> Callable:
    lo, hi = F(lo), F(hi)

    @jit
    def clamp(x):
        """x limited to [lo, hi]; NaN gives lo (callers restore NaN at the end)."""
        y = x if x > lo else lo
        return y if y < hi else hi

    return clamp


def _make_exp_scaled(F) -> Callable:
    """p * 2**k for integral float k in the clamped exp range, without overflowing 2**k itself."""
    half = F(0.5)

    @jit
    def scaled(p, k):
        k1 = np.floor(k * half)
        return p * pow2(k1) * pow2(k - k1)

    return scaled


def _exp_clamps(F, nonpositive: bool) -> tuple[Callable, Callable]:
    """Two clamps of exp's argument to its range (no upper limit for a nonpositive x): one for k,
    where NaN gives lo, as converting NaN to an integer is undefined; one for r, where NaN passes,
    so that a NaN x gives a NaN polynomial and no select has to restore it. With no upper limit
    each is one vmaxps (exp_nonpositive's loop: 33 -> 27 instructions)."""
    lo, hi = (F(v) for v in _EXP_RANGE[F])

    @jit
    def for_k(x):
        y = x if x > lo else lo
        return y if nonpositive else (y if y < hi else hi)

    @jit
    def for_r(x):
        y = lo if x < lo else x
        return y if nonpositive else (hi if y > hi else y)

    return for_k, for_r


def make_exp_parts(F, nonpositive: bool = False) -> Callable:
    """A jitted `exp_parts(x)` for float type F, e**x as p 2**k; `nonpositive`: x is never above 0 (one clamp less)."""
    clamp_k, clamp_r = _exp_clamps(F, nonpositive)
    log2e, (ln2_hi, ln2_lo) = F(1 / math.log(2)), _split(LN2, F, _KEEP[F])
    coeffs = _taylor(F, 0, _EXP_DEGREE[F])

    @jit
    def exp_parts(x):
        """(p, k) with e**x = p 2**k: x = k ln2 + r, |r| <= ln2/2, p = e**r by its Taylor polynomial
        (NaN for a NaN x). Callers multiply into p before applying 2**k so that a subnormal result
        rounds only once."""
        k = np.rint(clamp_k(x) * log2e)
        r = clamp_r(x) - k * ln2_hi - k * ln2_lo
        return poly(r, coeffs), k

    return exp_parts


def _make_exp(F) -> Callable:
    parts, scaled = make_exp_parts(F), _make_exp_scaled(F)

    @jit
    def exp(x):
        """e**x (NaN stays NaN through p; the clamps make +-inf give inf and 0)."""
        p, k = parts(x)
        return scaled(p, k)

    return exp


def _make_exp2(F) -> Callable:
    lo, hi = _EXP_RANGE[F]
    clamp, scaled = _clamp(F, lo / math.log(2), hi / math.log(2)), _make_exp_scaled(F)
    coeffs = _taylor(F, 0, _EXP_DEGREE[F], math.log(2))

    @jit
    def exp2(x):
        """2**x: 2**k times 2**r for r = x - round(x), exactly reduced."""
        xc = clamp(x)
        k = np.rint(xc)
        y = scaled(poly(xc - k, coeffs), k)
        return y if x == x else x

    return exp2


def _make_expm1_parts(F) -> Callable:
    # Below lo, e**x - 1 rounds to -1.
    clamp = _clamp(F, -20.0 if F is np.float32 else -40.0, _EXP_RANGE[F][1])
    log2e, (ln2_hi, ln2_lo) = F(1 / math.log(2)), _split(LN2, F, _KEEP[F])
    coeffs = _taylor(F, 2, _EXP_DEGREE[F] + 1)
    zero = F(0.0)

    @jit
    def expm1_parts(x):
        """(q, k) with e**x = 2**k (1 + q): x = k ln2 + r, q = expm1(r) (r = x exactly when k is 0)."""
        xc = clamp(x)
        k = np.rint(xc * log2e)
        r = xc - k * ln2_hi - k * ln2_lo
        r = xc if k == zero else r          # keeps tiny x exact
        return r + r * r * poly(r, coeffs), k

    return expm1_parts


def _make_expm1_finish(F) -> Callable:
    half, one, two, zero = F(0.5), F(1.0), F(2.0), F(0.0)

    @jit
    def finish(x, q, k):
        """e**x - 1 = 2 (h q + (h - 1/2)) with h = 2**(k-1), so that neither 2**k overflows nor the
        subtraction cancels."""
        h = pow2(k - one)
        y = two * (h * q + (h - half))
        y = q if k == zero else y           # halving would round a subnormal q
        y = x if x == zero else y           # -0.0 stays -0.0
        return y if x == x else x

    return finish


def _make_expm1(F) -> Callable:
    parts, finish = _make_expm1_parts(F), _make_expm1_finish(F)

    @jit
    def expm1(x):
        """e**x - 1 from the reduction (q, k)."""
        q, k = parts(x)
        return finish(x, q, k)

    return expm1


# Terms of the atanh series of log(1+f) for |s| <= 0.1716 that keep truncation under a quarter ulp.
_LOG_TERMS = {np.float32: 5, np.float64: 10}


def _make_log_parts(F) -> Callable:
    tiny, up, shift = F(np.finfo(F).tiny), F(2.0 ** _MANT[F]), F(_MANT[F])
    zero, half, one, two, sqrt2 = F(0.0), F(0.5), F(1.0), F(2.0), F(math.sqrt(2))
    series = tuple(F(2 / (2 * n + 1)) for n in range(_LOG_TERMS[F], 0, -1))

    @jit
    def log_parts(x):
        """(e, log m) with x = m 2**e and m in (sqrt(1/2), sqrt(2)], for finite x > 0; log m is
        f - s (f - R(s*s)) with f = m - 1 exact and s = f / (2 + f), as in fdlibm."""
        sub = x < tiny
        xs = x * up if sub else x
        m, e = mantissa(xs), exponent(xs) - (shift if sub else zero)
        big = m > sqrt2
        m = m * half if big else m
        e = e + one if big else e
        f = m - one
        s = f / (two + f)
        z = s * s
        return e, f - s * (f - z * poly(z, series))

    return log_parts


def _make_log_edges(F, pole: float) -> Callable:
    pole, nan, inf = F(pole), F(np.nan), F(np.inf)

    @jit
    def edges(x, y):
        """y with numpy's special values of a logarithm whose pole is at `pole`."""
        y = -inf if x == pole else y
        y = nan if x < pole else y
        return y if x < inf else x

    return edges


def _make_log(F) -> Callable:
    parts, edges = _make_log_parts(F), _make_log_edges(F, 0.0)
    ln2_hi, ln2_lo = _split(LN2, F, _KEEP[F])

    @jit
    def log(x):
        """Natural log: e ln2 + log m, ln2 split so that e ln2_hi is exact."""
        e, lm = parts(x)
        return edges(x, e * ln2_hi + (lm + e * ln2_lo))

    return log


def _make_log2(F) -> Callable:
    parts, edges = _make_log_parts(F), _make_log_edges(F, 0.0)
    inv_hi, inv_lo = _split(1 / LN2, F, _MANT[F] + 1)

    @jit
    def log2(x):
        """Base-2 log: e + log m / ln 2 (exact at powers of two)."""
        e, lm = parts(x)
        return edges(x, e + (lm * inv_hi + lm * inv_lo))

    return log2


def _make_log10(F) -> Callable:
    parts, edges = _make_log_parts(F), _make_log_edges(F, 0.0)
    l2_hi, l2_lo = _split(LN2 / LN10, F, _KEEP[F])
    inv_hi, inv_lo = _split(1 / LN10, F, _MANT[F] + 1)

    @jit
    def log10(x):
        """Base-10 log: e log10(2) + log m / ln 10, both constants split hi + lo."""
        e, lm = parts(x)
        return edges(x, e * l2_hi + (lm * inv_hi + (lm * inv_lo + e * l2_lo)))

    return log10


def _make_log1p(F) -> Callable:
    parts, edges = _make_log_parts(F), _make_log_edges(F, -1.0)
    ln2_hi, ln2_lo = _split(LN2, F, _KEEP[F])
    one = F(1.0)

    @jit
    def log1p(x):
        """log(1 + x): log of u = 1 + x plus the first-order correction for the rounding of u."""
        u = one + x
        c = (x - (u - one)) / u
        e, lm = parts(u)
        y = e * ln2_hi + (lm + (e * ln2_lo + c))
        return edges(x, x if u == one else y)

    return log1p


# Eigen's and XLA's float32 tanh: odd rational minimax p(x)/q(x) of degree 13/6 on the clamp
# range; past _TANH_ONE (13 ln 2), 1 - tanh(x) < 2**-25 and tanh rounds to +-1.
_TANH_ALPHA = (-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11, 5.12229709037114e-08,
               1.48572235717979e-05, 6.37261928875436e-04, 4.89352455891786e-03)
_TANH_BETA = (1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03, 4.89352518554385e-03)
_TANH_CLAMP, _TANH_ONE = 7.90531110763549805, 13 * math.log(2)


def _tanh_far(F) -> Callable:
    one, two = F(1.0), F(2.0)

    @jit
    def far(x, e):
        """tanh(x) = +-(1 - 2e / (1 + e)) for e = e**-2|x|: one rounding where it reaches +-1."""
        return np.copysign(one - two * e / (one + e), x)

    return far


def _make_tanh_rational(F) -> Callable:
    alpha, beta = _consts(F, *_TANH_ALPHA), _consts(F, *_TANH_BETA)
    edge, saturated, one = F(_TANH_CLAMP), F(_TANH_ONE), F(1.0)

    @jit
    def tanh(x):
        """tanh by Eigen's rational approximation (float32) on x clamped to its range, where it stays
        at 0.99999976 (within 4 ulps of tanh up to _TANH_ONE), and +-1 past _TANH_ONE, where tanh
        rounds to it. A NaN passes the clamp and the rational. x (p/q) rather than x p / q: p/q is
        1 - 1.3e-7 at 0, so tiny and subnormal x round to x with no select of their own. This
        replaced a far side 1 - 2e**-2|x| and a tiny-x select: 30% off tanh, 23% off tanh_gelu's
        kernel (docs/performance.md)."""
        a = abs(x)
        xc = np.copysign(edge, x) if a > edge else x
        x2 = xc * xc
        y = xc * (poly(x2, alpha) / poly(x2, beta))
        return np.copysign(one, x) if a > saturated else y

    return tanh


def _make_tanh_expm1(F) -> Callable:
    parts, finish, scaled, far = _make_expm1_parts(F), _make_expm1_finish(F), _make_exp_scaled(F), _tanh_far(F)
    # Where 2**k is below half the precision, forming e**-2|x| as 2**k (1 + q) loses nothing.
    one, two, m_two, edge = F(1.0), F(2.0), F(-2.0), F(-(_MANT[F] // 2 + 1))

    @jit
    def tanh(x):
        """tanh(|x|) = -t / (t + 2) with t = expm1(-2|x|): no overflow, no cancellation near 0. Far
        out, t's rounding near -1 is as large as e**-2|x| itself: there from e**-2|x| = 2**k (1 + q)."""
        w = m_two * abs(x)
        q, k = parts(w)
        t = finish(w, q, k)
        y = np.copysign(-t / (t + two), x)
        y = far(x, scaled(one + q, k)) if k <= edge else y
        return y if x == x else x

    return tanh


def _make_sigmoid(F) -> Callable:
    exp = _make_exp(F)
    zero, one = F(0.0), F(1.0)

    @jit
    def sigmoid(x):
        """1 - e / (1 + e) for x >= 0, e / (1 + e) below, e = e**-|x|: e never overflows, and above 0
        one rounding of 1 - (a small exact-ish quotient) reaches 1 only where sigmoid rounds to it
        (1 / (1 + e) did wherever 1 + e rounded to 1, a whole ulp early)."""
        e = exp(-abs(x))
        y = e / (one + e)
        return one - y if x >= zero else y

    return sigmoid


# Fitted by scripts/fit_fastmath.py (relative error 1e-9 .. 3e-9, far under float32's 6e-8):
# erf(x) / x in s = x*x for |x| < 1; e**(a*a) erfc(a) in 2a - 1 for a in [0, 1];
# a e**(a*a) erfc(a) in 2/a - 1 for a in [1, 10.5], past which erfc(a) a is below float32's range.
_ERF_SMALL = (7.84725919207179e-05, -0.0008008189344527739, 0.005188098892034627, -0.02685369110121715,
              0.11283582248031508, -0.3761262556740276, 1.1283791656893232)
_ERFC_NEAR = (-5.027883927789269e-06, 2.5643036380473827e-05, -0.00010845874368562587, 0.0004780110380364272,
              -0.0019989400858104857, 0.007761394068727908, -0.027751377775326366, 0.08983639172060652,
              -0.2563444063543956, 0.615690345951733)
_ERFC_TAIL = (-3.873763302090559e-05, 0.00010535591029825486, -4.353110709611623e-05, -0.0001948943471266918,
              0.000507277273674278, -0.0008042396999280938, 0.000624109194998712, 0.0013257858790524208,
              -0.006795523163842741, 0.014870543525644767, -0.009158412728675338, -0.08360551148304385,
              0.5107913534799313)


def _make_exp_neg_square(F) -> Callable:
    exp = _make_exp(F)
    one, scale_floor = F(1.0), -200.0

    @jit
    def exp_neg_square(x, scale):
        """e**(-scale x*x) for float32 x: x*x is exact in float64, and its rounding to float32
        (hi + lo) is put back as the factor 1 - lo, so the tail keeps full relative accuracy."""
        w = -(np.float64(x) * np.float64(x)) * scale
        w = w if w > scale_floor else scale_floor
        hi = F(w)
        return exp(hi) * (one + F(w - np.float64(hi)))

    return exp_neg_square


def _make_erfc_scaled(F) -> Callable:
    near, tail = _consts(F, *_ERFC_NEAR), _consts(F, *_ERFC_TAIL)
    one, two = F(1.0), F(2.0)

    @jit
    def erfc_scaled(a):
        """e**(a*a) erfc(a) for a >= 0 (two fitted pieces, joined at 1)."""
        t = one / a
        far = poly(two * t - one, tail) * t
        return poly(two * a - one, near) if a < one else far

    return erfc_scaled


def _make_erf(F) -> Callable:
    small, exp_neg_square, erfc_scaled = _consts(F, *_ERF_SMALL), _make_exp_neg_square(F), _make_erfc_scaled(F)
    one, four = F(1.0), F(4.0)

    @jit
    def erf(x):
        """x P(x*x) below 1; 1 - erfc(|x|) above, with erf = +-1 past 4 where it rounds to it."""
        a = abs(x)
        a = a if a < four else four
        big = np.copysign(one - exp_neg_square(a, 1.0) * erfc_scaled(a), x)
        y = x * poly(x * x, small) if abs(x) < one else big
        return y if x == x else x

    return erf


def _make_gelu_erf(F) -> Callable:
    exp_neg_square, erfc_scaled = _make_exp_neg_square(F), _make_erfc_scaled(F)
    zero, half, two, rsqrt2 = F(0.0), F(0.5), F(2.0), F(1 / math.sqrt(2))

    @jit
    def gelu(x):
        """x Phi(x) = x erfc(-x / sqrt 2) / 2: through erfc, so the negative tail keeps its digits."""
        e, r = exp_neg_square(x, 0.5), erfc_scaled(abs(x) * rsqrt2)
        return half * x * (two - e * r) if x >= zero else (half * x * r) * e

    return gelu


def _make_gelu_tanh(F) -> Callable:
    parts, scaled = make_exp_parts(F), _make_exp_scaled(F)
    zero, one = F(0.0), F(1.0)
    cut = F(-12.0)        # below, x sigmoid(2u) < 12 e**-142 underflows to -0 (and -inf gives NaN, as numpy)
    k1 = 2 * math.sqrt(2 / math.pi)
    k3, floor = k1 * 0.044715, _EXP_RANGE[F][0]

    @jit
    def gelu(x):
        """x (1 + tanh u) / 2 = x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x**3); 2u is formed in
        float64 and e**-|2u| keeps its rounding, so the negative tail does not cancel."""
        x64 = np.float64(x)
        w = -abs(x64 * (k1 + k3 * x64 * x64))
        w = w if w > floor else floor
        hi = F(w)
        p, k = parts(hi)
        p = p * (one + F(w - np.float64(hi)))
        q = x / (one + scaled(p, k))
        return q if x >= zero else (scaled(q * p, k) if x > cut else x * zero)

    return gelu


@dataclass(frozen=True)
class MathImpl:
    """A scalar numba implementation of an `np` op for one dtype, with its tested accuracy."""

    op: str               # np dialect op name, e.g. "np.exp"
    variant: str          # the value of the attribute telling forms apart ("tanh" for gelu), else ""
    dtype: str            # "float32" or "float64"
    fn: Callable          # numba dispatcher: call it from a numba kernel with a scalar of `dtype`
    ulps: float           # max error, in ulps of dtype, over all inputs (tests check it)
    vectorizes: bool      # LLVM vectorizes a numba loop calling fn (tests check it on x86-64)
    method: str           # how it computes, for the report


TABLE: Registry[tuple[str, str, str], MathImpl] = Registry(
    "fastmath implementation", describe=lambda k: f"{k[0]}{'[' + k[1] + ']' if k[1] else ''} for {k[2]}")


def implements(op: str, dtype, ulps: float, method: str, variant: str = "", vectorizes: bool = True):
    """Registers the decorated numba function as the implementation of `op` for `dtype`."""
    key = (op, variant, np.dtype(dtype).name)

    def register(fn):
        TABLE.add(key, MathImpl(op, variant, key[2], fn, ulps, vectorizes, method))
        return fn

    return register


def lookup(op: str, dtype, variant: str = "") -> MathImpl | None:
    """The vectorizable implementation of `op` for `dtype`, or None where the kernel should
    call numba's own (libm) function or select a library kernel."""
    return TABLE.get((op, variant, np.dtype(dtype).name))


def _both(make: Callable, ulps32: float, ulps64: float, make64: Callable | None = None) -> dict:
    return {np.float32: (make, ulps32), np.float64: (make64 or make, ulps64)}


# op, variant, {dtype: (factory, bound in ulps)}, method. float32 bounds cover the maximum of an
# exhaustive sweep of all 2**32 inputs; float64 bounds the maxima of 1M-value binade samples. A dtype left out has no
# vectorizable version: the kernel calls numba's own (libm) function instead.
_SPECS = [
    ("np.exp", "", _both(_make_exp, 1, 1), "Cody-Waite reduction, Taylor polynomial, 2**k from bits"),
    ("np.exp2", "", _both(_make_exp2, 1, 1), "exact reduction, Taylor polynomial, 2**k from bits"),
    ("np.expm1", "", _both(_make_expm1, 2, 2), "reduction as exp, 2 (h expm1(r) + h - 1/2) with h = 2**(k-1)"),
    ("np.log", "", _both(_make_log, 1, 1.5), "mantissa and exponent from bits, atanh series"),
    ("np.log2", "", _both(_make_log2, 2, 2), "as log, times 1/ln2 split hi + lo"),
    ("np.log10", "", _both(_make_log10, 2, 2), "as log, constants split hi + lo"),
    ("np.log1p", "", _both(_make_log1p, 2, 2), "log of 1 + x plus the rounding correction of 1 + x"),
    ("np.tanh", "", _both(_make_tanh_rational, 5, 3, _make_tanh_expm1),
     "float32: Eigen/XLA rational 13/6, +-1 past 13 ln 2; float64: -t / (t + 2), t = expm1(-2|x|), "
     "far out 1 - 2e / (1 + e), e = e**-2|x|"),
    # float64's 2 did not hold below 0 (2.28 ulps at -2.7357633977066067): e's ulp, then two roundings.
    ("np.sigmoid", "", _both(_make_sigmoid, 3, 2.5), "stable: e**-|x| / (1 + e**-|x|) below 0, 1 minus it above"),
    ("np.erf", "", {np.float32: (_make_erf, 3)}, "fitted polynomial below 1, 1 - e**(-x*x) R(x) above"),
    ("np.gelu", "", {np.float32: (_make_gelu_erf, 7)}, "x erfc(-x / sqrt 2) / 2, erfc fitted as e**(-a*a) R(a)"),
    # float64 would need 2u in double-double: its rounding costs up to |2u| ulps in the tail.
    ("np.gelu", "tanh", {np.float32: (_make_gelu_tanh, 5)}, "x sigmoid(2u) with 2u formed in float64"),
]

for _op, _variant, _impls, _method in _SPECS:
    for _F, (_make, _ulps) in _impls.items():
        implements(_op, _F, _ulps, _method, _variant)(_make(_F))

"""Fits the float32 erf/erfc polynomials of jitlab/backends/numba_cpu/fastmath.py and prints them.

Relative-error weighted least squares on Chebyshev nodes (close to minimax), against
math.erf / math.erfc in float64, which are far more accurate than float32 needs.
Run: python scripts/fit_fastmath.py
"""

from __future__ import annotations

import math

import numpy as np


def fit(f, lo: float, hi: float, degree: int, var=lambda a: a, nodes: int = 4000):
    """Monomial coefficients (highest first) of a polynomial in var(a) approximating f on [lo, hi]."""
    k = np.arange(nodes)
    a = (lo + hi) / 2 + (hi - lo) / 2 * np.cos(np.pi * (k + 0.5) / nodes)
    y = np.array([f(v) for v in a])
    weights = 1 / np.abs(y)
    coeffs = np.linalg.lstsq(np.vander(var(a), degree + 1) * weights[:, None], y * weights, rcond=None)[0]
    dense = np.linspace(lo, hi, 100_001)
    exact = np.array([f(v) for v in dense])
    error = np.max(np.abs(np.polyval(coeffs, var(dense)) - exact) / np.abs(exact))
    return coeffs, error


def erf_over_x(s: float) -> float:
    """erf(x) / x as a function of s = x**2."""
    return math.erf(math.sqrt(s)) / math.sqrt(s) if s > 0 else 2 / math.sqrt(math.pi)


FITS = {
    # Variables are centred on their interval so that float32 Horner evaluation does not cancel.
    "ERF_SMALL": (erf_over_x, 0.0, 1.0, 6, lambda s: s),                               # s = x*x, |x| < 1
    "ERFC_NEAR": (lambda a: math.exp(a * a) * math.erfc(a), 0.0, 1.0, 9, lambda a: 2 * a - 1),
    "ERFC_TAIL": (lambda a: a * math.exp(a * a) * math.erfc(a), 1.0, 10.5, 12, lambda a: 2 / a - 1),
}

if __name__ == "__main__":
    for name, (f, lo, hi, degree, var) in FITS.items():
        coeffs, error = fit(f, lo, hi, degree, var)
        print(f"# max relative error {error:.2e} on [{lo}, {hi}]")
        print(f"{name} = ({', '.join(repr(float(c)) for c in coeffs)})")

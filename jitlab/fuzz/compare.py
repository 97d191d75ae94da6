"""The fuzzer's verdict on one program: do jitlab's outputs equal numpy's?

Every output's dtype and shape must be numpy's exactly. Integers and bools must be equal.
Floats the generator marked exact (rtol 0, see generate.py) must be equal bit for bit but for
NaN payloads, the sign of zero included. Floats marked inexact (they went through a
transcendental, a float sum or mean, a matmul or a float power) must have NaN and inf at
the same places and the rest within |got - want| <= rtol * (|want| + scale), rtol being
`RTOL` of the least precise dtype an inexact step computed in, and scale the largest finite
|value| numpy gives in that output (a float sum of mixed magnitudes is exact only up to the
rounding of its largest terms).
"""

from __future__ import annotations

import numpy as np

RTOL = {np.dtype(np.float32): 1e-3, np.dtype(np.float64): 1e-9}


def differences(got, want, rtols: list[float]) -> list[str]:
    """What differs between jitlab's outputs `got` and numpy's `want`, one line each; empty when equal."""
    if len(got) != len(want):
        return [f"{len(got)} outputs, numpy gives {len(want)}"]
    problems = []
    for i, (g, w, rtol) in enumerate(zip(got, want, rtols)):
        problem = _difference(np.asarray(g), np.asarray(w), rtol)
        if problem:
            problems.append(f"output {i}: {problem}")
    return problems


def _difference(g: np.ndarray, w: np.ndarray, rtol: float) -> str:
    if g.dtype != w.dtype:
        return f"dtype {g.dtype}, numpy gives {w.dtype}"
    if g.shape != w.shape:
        return f"shape {g.shape}, numpy gives {w.shape}"
    if w.dtype.kind != "f":
        bad = g != w
        return _where(bad, g, w) if bad.any() else ""
    nan = np.isnan(w)
    if (np.isnan(g) != nan).any():
        return _where(np.isnan(g) != nan, g, w, "NaN at different places")
    if rtol == 0.0:
        bad = ~nan & ((g != w) | (np.signbit(g) != np.signbit(w)))
        return _where(bad, g, w) if bad.any() else ""
    inf = np.isinf(w)
    if (g[inf] != w[inf]).any() or np.isinf(g[~inf]).any():
        return _where(np.isinf(g) != inf | (inf & (g != w)), g, w, "inf at different places")
    finite = ~nan & ~inf
    scale = float(np.max(np.abs(w[finite]), initial=0.0))
    with np.errstate(over="ignore", invalid="ignore"):
        error = np.abs(g.astype(np.float64) - w.astype(np.float64))
        bad = finite & ~(error <= rtol * (np.abs(w.astype(np.float64)) + scale))
    return _where(bad, g, w, f"beyond rtol {rtol}") if bad.any() else ""


def _where(bad: np.ndarray, g: np.ndarray, w: np.ndarray, what: str = "values differ") -> str:
    index = tuple(int(i) for i in np.argwhere(bad)[0]) if bad.ndim else ()
    return (f"{what} at {int(np.count_nonzero(bad))} of {bad.size} places; first {list(index)}: "
            f"jitlab {g[index]!r}, numpy {w[index]!r}")

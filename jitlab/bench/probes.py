"""Probes for how generated kernels should be written on this machine (PERF-NOTES 3 and 4):
how a row reduction vectorizes, and which numba threading layer coexists with BLAS.

`python -m jitlab.bench.probes [reduction|threading]` prints the measurements.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np

LANES = 16


def median_ms(fn: Callable, *args, repeats: int = 11) -> float:
    fn(*args)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e3


def _reduction_kernels() -> dict[str, Callable]:
    """Row max and row sum over a contiguous float32 row, written the ways a generator could."""
    from numba import njit, prange

    @njit(parallel=True, error_model="numpy")
    def max_naive(x, out):
        for i in prange(x.shape[0]):
            m = x[i, 0]
            for j in range(x.shape[1]):
                v = x[i, j]
                m = v if (v > m or v != v) else m
            out[i] = m

    @njit(parallel=True, error_model="numpy", fastmath=True)
    def max_fastmath(x, out):
        for i in prange(x.shape[0]):
            m = x[i, 0]
            for j in range(x.shape[1]):
                m = max(m, x[i, j])
            out[i] = m

    @njit(parallel=True, error_model="numpy")
    def max_lanes(x, out):
        n = x.shape[1]
        for i in prange(x.shape[0]):
            acc = np.full(LANES, -np.inf, dtype=x.dtype)
            for j0 in range(0, n - n % LANES, LANES):
                for k in range(LANES):
                    v, m = x[i, j0 + k], acc[k]
                    acc[k] = v if (v > m or v != v) else m
            m = acc[0]
            for k in range(1, LANES):
                m = acc[k] if (acc[k] > m or acc[k] != acc[k]) else m
            for j in range(n - n % LANES, n):
                m = x[i, j] if (x[i, j] > m or x[i, j] != x[i, j]) else m
            out[i] = m

    @njit(parallel=True, error_model="numpy")
    def sum_naive(x, out):
        for i in prange(x.shape[0]):
            s = np.float32(0)
            for j in range(x.shape[1]):
                s += x[i, j]
            out[i] = s

    @njit(parallel=True, error_model="numpy", fastmath={"reassoc", "contract"})
    def sum_reassoc(x, out):
        for i in prange(x.shape[0]):
            s = np.float32(0)
            for j in range(x.shape[1]):
                s += x[i, j]
            out[i] = s

    @njit(parallel=True, error_model="numpy")
    def sum_lanes(x, out):
        n = x.shape[1]
        for i in prange(x.shape[0]):
            acc = np.zeros(LANES, dtype=x.dtype)
            for j0 in range(0, n - n % LANES, LANES):
                for k in range(LANES):
                    acc[k] += x[i, j0 + k]
            s = acc.sum()
            for j in range(n - n % LANES, n):
                s += x[i, j]
            out[i] = s

    return {"max naive (NaN-propagating select)": max_naive, "max fastmath=True (max())": max_fastmath,
            f"max {LANES} partial maxima": max_lanes, "sum naive (strict order)": sum_naive,
            "sum fastmath reassoc": sum_reassoc, f"sum {LANES} partial sums": sum_lanes}


def reduction(rows: int = 4096, cols: int = 1024) -> list[dict]:
    """ms per variant for row max / row sum of a rows x cols float32 matrix, checked against numpy."""
    from ..backends.numba_cpu.mathcheck import _PACKED

    x = np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32)
    out = np.empty(rows, np.float32)
    results = [{"variant": "numpy x.max(axis=1)", "ms": median_ms(lambda: x.max(axis=1)), "vector": "-"},
               {"variant": "numpy x.sum(axis=1)", "ms": median_ms(lambda: x.sum(axis=1)), "vector": "-"}]
    for label, kernel in _reduction_kernels().items():
        kernel(x, out)
        expected = x.max(axis=1) if label.startswith("max") else x.sum(axis=1, dtype=np.float64)
        assert np.allclose(out, expected, rtol=1e-4, atol=1e-3), label
        asm = kernel.inspect_asm(kernel.signatures[0])
        widths = {m.group(1) for m in _PACKED.finditer(asm)}
        vector = next((f"{r}mm" for r in "zyx" if r in widths), "no")
        results.append({"variant": label, "ms": median_ms(kernel, x, out), "vector": vector})
    return results


def _mlp_inputs():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 1024), dtype=np.float32)
    w1 = rng.standard_normal((1024, 4096), dtype=np.float32) / 32
    w2 = rng.standard_normal((4096, 1024), dtype=np.float32) / 64
    return x, w1, rng.standard_normal(4096, dtype=np.float32), w2, rng.standard_normal(1024, dtype=np.float32)


def threading_child(epilogue: str) -> dict:
    """One configuration, in this process: median ms of the MLP block with the given epilogue."""
    import numba
    from numba import njit, prange

    @njit(parallel=epilogue == "prange", error_model="numpy")
    def bias_relu(h, b):
        for i in prange(h.shape[0]):
            for j in range(h.shape[1]):
                v = h[i, j] + b[j]
                h[i, j] = v if v > 0 else np.float32(0)

    @njit(parallel=epilogue == "prange", error_model="numpy")
    def bias(h, b):
        for i in prange(h.shape[0]):
            for j in range(h.shape[1]):
                h[i, j] += b[j]

    x, w1, b1, w2, b2 = _mlp_inputs()

    def block():
        h = x @ w1
        bias_relu(h, b1)
        y = h @ w2
        bias(y, b2)
        return y

    expected = np.maximum(x @ w1 + b1, 0) @ w2 + b2
    assert np.allclose(block(), expected, rtol=1e-3, atol=1e-2)
    layer = numba.threading_layer() if epilogue == "prange" else "-"
    return {"ms": median_ms(block), "numpy_ms": median_ms(lambda: np.maximum(x @ w1 + b1, 0) @ w2 + b2),
            "layer": layer}


_THREADING_CONFIGS = [
    ("serial epilogue", "serial", {}),
    ("prange, workqueue", "prange", {"NUMBA_THREADING_LAYER": "workqueue"}),
    ("prange, omp", "prange", {"NUMBA_THREADING_LAYER": "omp"}),
    ("prange, omp, OMP_WAIT_POLICY=passive", "prange", {"NUMBA_THREADING_LAYER": "omp", "OMP_WAIT_POLICY": "passive"}),
    ("prange, default layer", "prange", {}),
]


def threading() -> list[dict]:
    """Each configuration in a fresh process: the threading layer is fixed at numba's first launch."""
    results = []
    for label, epilogue, env in _THREADING_CONFIGS:
        proc = subprocess.run([sys.executable, "-m", "jitlab.bench.probes", "--child", epilogue],
                              env={**os.environ, **env}, capture_output=True, text=True, timeout=600)
        if proc.returncode:
            results.append({"config": label, "error": proc.stderr.strip().splitlines()[-1]})
            continue
        results.append({"config": label, **json.loads(proc.stdout.strip().splitlines()[-1])})
    return results


def _table(rows: list[dict]) -> str:
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + " --- |" * len(keys)]
    for row in rows:
        lines.append("| " + " | ".join(f"{row.get(k, ''):.3f}" if isinstance(row.get(k), float) else str(row.get(k, ""))
                                      for k in keys) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        print(json.dumps(threading_child(argv[1])))
        return 0
    which = argv[0] if argv else "all"
    if which in ("reduction", "all"):
        print(_table(reduction()))
    if which in ("threading", "all"):
        from threadpoolctl import threadpool_info

        print("BLAS:", [(i["internal_api"], i.get("architecture"), i["num_threads"]) for i in threadpool_info()])
        print(_table(threading()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

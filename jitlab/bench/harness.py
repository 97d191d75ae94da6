"""Measuring: memory bandwidth, and what machine and BLAS ran (interleaved medians: jitlab/timing.py)."""

from __future__ import annotations

import os
import platform
import threading
import time

import numpy as np


def _copy_seconds(src: np.ndarray, dst: np.ndarray, threads: int) -> float:
    """Seconds to copy src into dst split over `threads` Python threads (numpy drops the GIL)."""
    parts = np.array_split(np.arange(src.size), threads)
    bounds = [(p[0], p[-1] + 1) for p in parts if p.size]

    def copy(lo, hi):
        np.copyto(dst[lo:hi], src[lo:hi])

    workers = [threading.Thread(target=copy, args=b) for b in bounds]
    start = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return time.perf_counter() - start


def bandwidth(nbytes: int, threads: int, repeats: int = 5) -> float:
    """Copy bandwidth in bytes per second (read + write counted), best of `repeats`."""
    src = np.ones(nbytes // 4, np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)                      # fault in the pages first
    best = min(_copy_seconds(src, dst, threads) for _ in range(repeats))
    return 2 * src.nbytes / best


def blas_info() -> list[dict]:
    """The BLAS libraries loaded, whose each is (numpy's, or scipy's that numba's np.dot may load),
    and the kernel each selected (threadpoolctl)."""
    from threadpoolctl import threadpool_info

    np.ones((2, 2)) @ np.ones((2, 2))
    keys = ("internal_api", "version", "architecture", "num_threads", "threading_layer")
    return [{**{k: info.get(k) for k in keys},
             "owner": os.path.basename(os.path.dirname(info.get("filepath") or "")).removesuffix(".libs")}
            for info in threadpool_info() if info.get("user_api") == "blas"]


def machine() -> dict:
    """What the numbers were measured on."""
    import numba

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "load_average": os.getloadavg()[0],
            "python": platform.python_version(), "numpy": np.__version__, "numba": numba.__version__,
            "blas": blas_info(),
            "env": {k: os.environ[k] for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OMP_NUM_THREADS",
                                               "NUMBA_THREADING_LAYER", "OMP_WAIT_POLICY") if k in os.environ}}

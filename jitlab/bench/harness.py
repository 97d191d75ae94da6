"""Measuring: interleaved repeats with medians, memory bandwidth, and what machine and BLAS ran."""

from __future__ import annotations

import os
import platform
import threading
import time
from collections.abc import Callable

import numpy as np


def _calls_per_sample(call: Callable[[], object], sample: float) -> int:
    """How many back-to-back calls make one sample last at least `sample` seconds."""
    start = time.perf_counter()
    call()
    once = time.perf_counter() - start
    return max(1, min(10_000, int(sample / max(once, 1e-7))))


def interleaved_medians(calls: dict[str, Callable[[], object]], repeats: int, pause: float = 0.02,
                        sample: float = 0.002) -> dict[str, float]:
    """Median seconds per call of each callable, running them in turn `repeats` times so that
    machine noise (other processes, frequency) spreads over all of them alike. Each round starts
    one further along, and a short pause precedes each sample: runtimes whose worker threads spin
    after a call (OpenMP, XLA's pool) would otherwise always slow the same next runner. A sample
    is as many back-to-back calls as fill `sample` seconds, so microsecond calls are timed warm
    (as timeit does) rather than each one just after the pause."""
    names = list(calls)
    counts = {name: _calls_per_sample(calls[name], sample) for name in names}
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(repeats):
        for name in names[r % len(names):] + names[:r % len(names)]:
            time.sleep(pause)
            call, n = calls[name], counts[name]
            start = time.perf_counter()
            for _ in range(n):
                call()
            times[name].append((time.perf_counter() - start) / n)
    return {name: float(np.median(t)) for name, t in times.items()}


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

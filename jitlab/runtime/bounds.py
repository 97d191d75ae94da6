"""The machine's measured bounds for the roofline: the copy bandwidth (bytes read + written per
second) and the peak FLOP/s of a float32 matrix product, on the host or on the target's device.

Each is measured once per machine and kept in the kernel cache's folder (`bounds.json`, keyed
by the device and the library versions); delete the file to measure again."""

from __future__ import annotations

import functools
import json
import os
import pathlib
import platform
import threading
import time

import numpy as np

GEMM = 1024                    # the float32 product the host's peak is measured on (2 GFLOP)
COPY_BYTES = 1 << 26


def _copy_seconds(src: np.ndarray, dst: np.ndarray, threads: int) -> float:
    """Seconds to copy src into dst split over `threads` Python threads (numpy drops the GIL)."""
    bounds = [(p[0], p[-1] + 1) for p in np.array_split(np.arange(src.size), threads) if p.size]
    workers = [threading.Thread(target=np.copyto, args=(dst[lo:hi], src[lo:hi])) for lo, hi in bounds]
    start = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return time.perf_counter() - start


def bandwidth(nbytes: int, threads: int, repeats: int = 5) -> float:
    """Host copy bandwidth in bytes per second (read + write counted), best of `repeats`."""
    src = np.ones(nbytes // 4, np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)                      # fault in the pages first
    best = min(_copy_seconds(src, dst, threads) for _ in range(repeats))
    return 2 * src.nbytes / best


def gemm_flops(n: int = GEMM, repeats: int = 3) -> float:
    """FLOP/s of numpy's float32 n x n matrix product (its BLAS), best of `repeats`."""
    a = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32)
    a @ a
    best = min(_seconds(lambda: a @ a) for _ in range(repeats))
    return 2 * n ** 3 / best


def _seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def cpu_name() -> str:
    """The processor's model name (Linux's /proc/cpuinfo), else what platform says."""
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")),
                        platform.processor() or platform.machine())
    except OSError:
        return platform.processor() or platform.machine()


def host() -> dict:
    """The host's bounds, measured now."""
    threads = os.cpu_count() or 1
    bw = max(bandwidth(COPY_BYTES, 1), bandwidth(COPY_BYTES, threads)) if threads > 1 else bandwidth(COPY_BYTES, 1)
    return {"device": cpu_name(), "bandwidth": bw, "flops": gemm_flops(),
            "how": f"numpy copy of {COPY_BYTES >> 20} MiB (best of 1 and {threads} threads); "
                   f"numpy float32 {GEMM}x{GEMM} matmul (BLAS)"}


def _key(target: str) -> str:
    from .. import version

    return f"{target}|{platform.node()}|{cpu_name()}|np{np.__version__}|" \
           f"jl{version.__version__}|sim{os.environ.get('NUMBA_ENABLE_CUDASIM', '0')}"


def _file() -> pathlib.Path:
    from ..backends.kernel_cache import default_directory

    return pathlib.Path(default_directory()) / "bounds.json"


def _measure(target: str) -> dict:
    if target == "cpu":
        return host()
    from ..backends.base import backend_for_target

    return backend_for_target(target).measured_bounds() or host()


@functools.cache
def for_target(target: str) -> dict:
    """The bounds of `target`'s device ({"device", "bandwidth", "flops" (None: unknown), "how"}), from the
    cache file when this machine measured them before."""
    path, key = _file(), _key(target)
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    if key not in known:
        known[key] = _measure(target)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(known, indent=1))
        except OSError:
            pass                              # a read-only cache: measured again next process
    return known[key]

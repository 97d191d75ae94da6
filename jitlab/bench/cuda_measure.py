"""What the selfcheck measures on the device itself: its copy bandwidth (the streaming bound's
rate) and the cost of a cached call of `x + 1` on one element, jitlab's and jax.jit's."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy as np

COPY_BYTES = 1 << 30
CALLS = 2000


def median_us(call: Callable[[], object], repeats: int = CALLS) -> float:
    call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def jitlab_calls(level: str, repeats: int = CALLS) -> dict[str, float]:
    """Microseconds of a cached jitted x + 1: numpy in and out; device arrays in and out, then synchronized."""
    from numba import cuda

    import jitlab as jl

    host = jl.jit(lambda x: x + 1.0, level=level, target="cuda")
    dev = jl.jit(lambda x: x + 1.0, level=level, target="cuda", device_outputs=True)
    x = np.ones(1, np.float32)
    d = cuda.to_device(x)
    return {"numpy arrays": median_us(lambda: host(x), repeats), "device arrays": median_us(lambda: dev(d), repeats),
            "device arrays, synchronized": median_us(lambda: (dev(d), cuda.synchronize()), repeats)}


def jax_calls(repeats: int = CALLS) -> dict[str, float] | None:
    """The same for jax.jit, where jax is installed with a GPU."""
    try:
        import jax
    except ImportError:
        return None
    if jax.default_backend() != "gpu":
        return None
    f = jax.jit(lambda x: x + 1.0)
    x = np.ones(1, np.float32)
    d = jax.device_put(x)
    return {"numpy arrays": median_us(lambda: np.asarray(f(x)), repeats),
            "device arrays": median_us(lambda: f(d), repeats),
            "device arrays, synchronized": median_us(lambda: f(d).block_until_ready(), repeats)}


def measure(repeats: int = CALLS, copy_bytes: int = COPY_BYTES) -> dict:
    """The device, its copy rate and the cached-call figures, as plain data."""
    from ..backends.numba_cuda import device
    from ..backends.numba_cuda.measure import copy_bandwidth

    info = device.info()
    calls = {f"jitlab {level}": jitlab_calls(level, repeats) for level in ("O1", "O2")}
    jax = jax_calls(repeats)
    if jax is not None:
        calls["jax.jit"] = jax
    return {"device": info.name, "sm_count": info.sm_count, "peak_bytes_per_s": info.peak_bytes_per_second,
            "copy_bytes_per_s": copy_bandwidth(copy_bytes), "cached_call_us": calls}

"""What the selfcheck measures on the device itself: its copy bandwidth (the streaming bound's
rate), the cost of a cached call of `x + 1` on one element, jitlab's and jax.jit's, and the cost of
an iteration of a loop run from the host (a counted loop's body queued without a synchronisation; a
while loop's condition read back every iteration)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy as np

COPY_BYTES = 1 << 30
CALLS = 2000
LOOP_POINTS, LOOP_STEPS = 1 << 20, 100


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


def _heat(u, n):
    import jitlab as jl

    return jl.fori_loop(0, n, lambda i, u: u + 0.25 * (np.roll(u, 1) - 2 * u + np.roll(u, -1)), u)


def _count(u, n):
    import jitlab as jl

    return jl.while_loop(lambda c: c[0] < n, lambda c: c + 1.0, u)


def loop_figures(points: int = LOOP_POINTS, steps: int = LOOP_STEPS, repeats: int = 5) -> dict:
    """Microseconds per iteration of a heat-stencil `jl.fori_loop` and a counting `jl.while_loop` over
    `points` float32 values, at O1 and O2 with device arrays in and out (median of `repeats` calls, each
    synchronised), numpy's per step of the stencil run eagerly, and whether every result matched numpy's."""
    u, n = np.sin(np.linspace(0, 3, points)).astype(np.float32), np.int64(steps)
    start = time.perf_counter()
    expected = {"fori_loop heat": _heat(u, n)}
    numpy_us = (time.perf_counter() - start) * 1e6 / steps
    expected["while_loop"] = _count(np.zeros(points, np.float32), n)
    cases = {"fori_loop heat": (_heat, (u, n)), "while_loop": (_count, (np.zeros(points, np.float32), n))}
    figures: dict = {"points": points, "steps": steps, "numpy heat us per step": numpy_us, "matches": True}
    for level in ("O1", "O2"):
        figures[f"jitlab {level}"] = {}
        for name, (fn, args) in cases.items():
            got, us = _timed_loop(fn, args, level, repeats)
            figures["matches"] &= bool(np.allclose(got, expected[name], rtol=1e-4, atol=1e-5))
            figures[f"jitlab {level}"][name] = us / steps
    return figures


def _timed_loop(fn, args: tuple, level: str, repeats: int) -> tuple[np.ndarray, float]:
    """`fn` compiled for cuda at `level`: its result on `args` and the median µs of a synchronised call."""
    from numba import cuda

    import jitlab as jl

    exe = jl.compile(jl.trace(fn, *args), level=level, target="cuda", device_outputs=True)
    on_device = [cuda.to_device(a) for a in args]
    (got,) = exe(*on_device)
    return got.copy_to_host(), median_us(lambda: (exe(*on_device), cuda.synchronize()), repeats)


def host_profile(call: Callable[[], object], calls: int, top: int = 12) -> list[dict]:
    """Where the host's time goes in `call`: cProfile's functions by own time, per call (µs), the most first."""
    import cProfile
    import pstats

    call()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        call()
    profiler.disable()
    stats = pstats.Stats(profiler).stats
    rows = sorted(stats.items(), key=lambda item: -item[1][2])[:top]
    return [{"function": f"{file.rsplit('/', 2)[-1] if '/' in file else file}:{line}({name})",
             "calls": round(nc / calls, 2), "own_us": tt / calls * 1e6, "cumulative_us": ct / calls * 1e6}
            for (file, line, name), (_, nc, tt, ct, _) in rows]


def host_profiles(calls: int = 200, loop_points: int = LOOP_POINTS, loop_steps: int = LOOP_STEPS) -> dict:
    """cProfile of a cached O1 call with device arrays in and out, and of one O1 heat-loop call."""
    from numba import cuda

    import jitlab as jl

    dev = jl.jit(lambda x: x + 1.0, level="O1", target="cuda", device_outputs=True)
    d = cuda.to_device(np.ones(1, np.float32))
    u = cuda.to_device(np.ones(loop_points, np.float32))
    n = cuda.to_device(np.int64(loop_steps))
    loop = jl.jit(_heat, level="O1", target="cuda", device_outputs=True)
    return {"x + 1, device arrays": host_profile(lambda: dev(d), calls),
            f"heat fori_loop, {loop_steps} iterations": host_profile(lambda: (loop(u, n), cuda.synchronize()),
                                                                     max(calls // 50, 2))}


def measure(repeats: int = CALLS, copy_bytes: int = COPY_BYTES, loop_points: int = LOOP_POINTS,
            loop_steps: int = LOOP_STEPS) -> dict:
    """The device, its copy rate, the cached-call and the loop figures, as plain data."""
    from ..backends.numba_cuda import device
    from ..backends.numba_cuda.measure import copy_bandwidth

    info = device.info()
    calls = {f"jitlab {level}": jitlab_calls(level, repeats) for level in ("O1", "O2")}
    jax = jax_calls(repeats)
    if jax is not None:
        calls["jax.jit"] = jax
    return {"device": info.name, "sm_count": info.sm_count, "peak_bytes_per_s": info.peak_bytes_per_second,
            "copy_bytes_per_s": copy_bandwidth(copy_bytes), "cached_call_us": calls,
            "loops": loop_figures(loop_points, loop_steps, min(repeats, 5)),
            "host_profiles": host_profiles(min(repeats, 200), loop_points, loop_steps)}

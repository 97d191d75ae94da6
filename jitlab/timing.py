"""Timing calls against each other: interleaved repeats with medians (the bench and the
backends' own checks, such as numba_cpu/mathcheck.py, time this way)."""

from __future__ import annotations

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
                        sample: float = 0.025) -> dict[str, float]:
    """Median seconds per call of each callable, running them in turn `repeats` times so that
    machine noise (other processes, frequency) spreads over all of them alike. Each round starts
    one further along, and a short pause precedes each sample: runtimes whose worker threads spin
    after a call (OpenMP, XLA's pool) would otherwise always slow the same next runner. A sample
    is as many back-to-back calls as fill `sample` seconds, so short calls are timed warm (as
    timeit does) rather than each one just after the pause: on these VMs a core idle for the pause
    takes about a millisecond to come back, so a 2 ms sample timed a 1.8 ms softmax at 3.3-4.9 ms
    and a 25 ms one at 1.9-2.0 ms (numpy's 22 ms softmax the same either way)."""
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

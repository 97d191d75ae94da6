"""How many cores other processes leave this one: what a large matrix product should run on.

OpenBLAS splits a GEMM statically between its threads and waits for the slowest. With another
process holding one of two cores, numpy's two-thread products ran at 34 GFLOP/s against 95 on
one thread (issue 33): a thread on the busy core holds the rest back. So a product runs on as
many BLAS threads as there are cores the machine is not spending elsewhere, measured from
/proc/stat's busy time less this process's own CPU time over the last interval. Reading it
costs tens of microseconds, so it is read at most every `INTERVAL` seconds; in between, the
last answer stands. Where /proc/stat is missing (not Linux) every core counts as free.
"""

from __future__ import annotations

import os
import threading
import time

# /proc/stat counts in ticks of 10 ms: an interval of 0.2 s measures a core's share to 5%.
INTERVAL = 0.2
# A core counts as free when less than this share of it went to other processes.
BUSY_SHARE = 0.5
_BUSY_FIELDS = (0, 1, 2, 5, 6, 7)       # user, nice, system, irq, softirq, steal (not idle, iowait)
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def allowed_cpus() -> list[int]:
    """The cores this process may run on."""
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:
        return list(range(os.cpu_count() or 1))


def busy_seconds(cpus: list[int], stat: str = "/proc/stat") -> float | None:
    """CPU seconds the given cores have spent busy since boot, or None where /proc/stat is unreadable."""
    wanted = {f"cpu{c}" for c in cpus}
    try:
        with open(stat) as f:
            lines = [line.split() for line in f if line.startswith("cpu")]
    except OSError:
        return None
    ticks = sum(int(fields[1 + k]) for fields in lines if fields[0] in wanted for k in _BUSY_FIELDS)
    return ticks / _TICK


def free_cores(cores: int, busy: float, own: float, seconds: float) -> int:
    """Cores (at least one) left when `busy` CPU seconds were spent over `seconds` of wall time on
    `cores` cores, `own` of them by this process."""
    others = max(0.0, busy - own) / seconds
    return max(1, min(cores, int(cores - others + BUSY_SHARE)))


class CoreGauge:
    """The cores other processes left free over the last interval, measured at most every INTERVAL s."""

    def __init__(self, stat: str = "/proc/stat") -> None:
        self.stat, self.cpus = stat, allowed_cpus()
        self.free = len(self.cpus)
        self._lock = threading.Lock()
        self._last = self._sample()

    def _sample(self) -> tuple[float, float | None, float]:
        return time.monotonic(), busy_seconds(self.cpus, self.stat), time.process_time()

    def __call__(self) -> int:
        """How many threads a large product should run on now."""
        if time.monotonic() - self._last[0] < INTERVAL or not self._lock.acquire(blocking=False):
            return self.free
        try:
            now = self._sample()
            (t0, busy0, own0), (t1, busy1, own1) = self._last, now
            if busy0 is not None and busy1 is not None:
                self.free = free_cores(len(self.cpus), busy1 - busy0, own1 - own0, t1 - t0)
            self._last = now
        finally:
            self._lock.release()
        return self.free

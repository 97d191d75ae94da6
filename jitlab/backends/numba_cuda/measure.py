"""Timing on the device: events (a host clock under the simulator, whose events hold no time),
and the device's measured bounds for the roofline: a device-to-device copy timed with them and
cuBLAS's float32 matrix product through CuPy where it is installed (else no compute bound).
The simulator's "device" is host memory: its figures say so in `device`."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from . import device

COPY_BYTES = {True: 1 << 22, False: 1 << 30}     # by simulator: the simulator copies with numpy
GEMM = 8192


class HostEvent:
    """The simulator's stand-in for a CUDA event: numba's simulated events return -1 ms for any
    interval, and the simulator runs each launch to its end on the host, so the host clock times it."""

    def __init__(self):
        self.seconds = 0.0

    def record(self, stream=0) -> None:
        self.seconds = time.perf_counter()

    def synchronize(self) -> None:
        """Nothing is pending: the simulator ran the work already."""

    def elapsed_time(self, end: HostEvent) -> float:
        """Milliseconds from this event to `end`, as numba's Event.elapsed_time."""
        return (end.seconds - self.seconds) * 1e3


def event(cuda):
    """A CUDA event, or a HostEvent under the simulator."""
    return HostEvent() if device.simulator_enabled() else cuda.event()


def _event_seconds(cuda, fn, repeats: int = 5) -> float:
    """The best of `repeats` runs of `fn` between two events on the default stream."""
    start, end = event(cuda), event(cuda)
    fn()
    best = float("inf")
    for _ in range(repeats):
        start.record()
        fn()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3)      # milliseconds
    return best


def copy_bandwidth(nbytes: int | None = None) -> float:
    """Bytes read + written per second by a device-to-device copy of `nbytes` (default by target)."""
    cuda = device.cuda()
    n = (nbytes or COPY_BYTES[device.simulator_enabled()]) // 4
    src = cuda.to_device(np.ones(n, np.float32))
    dst = cuda.device_array_like(src)
    return 2 * src.nbytes / _event_seconds(cuda, lambda: dst.copy_to_device(src))


def gemm_flops() -> float | None:
    """FLOP/s of cuBLAS's float32 product (CuPy, no TF32); None without CuPy or under the simulator."""
    if device.simulator_enabled():
        return None
    try:
        import cupy
    except ImportError:
        return None
    a = cupy.ones((GEMM, GEMM), cupy.float32)
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    a @ a
    best = float("inf")
    for _ in range(3):
        start.record()
        a @ a
        end.record()
        end.synchronize()
        best = min(best, cupy.cuda.get_elapsed_time(start, end) / 1e3)
    return 2 * GEMM ** 3 / best


def measure() -> dict[str, Any]:
    info = device.info()
    flops = gemm_flops()
    name = f"{info.name} (simulator: host memory)" if info.simulator else info.name
    return {"device": name, "bandwidth": copy_bandwidth(), "flops": flops,
            "how": f"device-to-device copy of {COPY_BYTES[info.simulator] >> 20} MiB (events)"
                   + (f"; CuPy float32 {GEMM}x{GEMM} matmul" if flops else "; no compute bound (needs CuPy on a GPU)")}

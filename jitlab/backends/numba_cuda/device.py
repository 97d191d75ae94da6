"""Whether a CUDA device (or numba's simulator) is there, and what it can do.

Nothing here imports numba.cuda at module import: the check for `target="auto"` first
looks for the simulator switch and the NVIDIA driver's files, and imports numba.cuda
only when a driver is present, so CPU-only runs never pay for it.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

from ...errors import UnsupportedError

SIMULATOR_VAR = "NUMBA_ENABLE_CUDASIM"
DRIVER_FILES = ("/dev/nvidiactl", "/proc/driver/nvidia/version", "/dev/dxg")   # dxg: WSL2


@dataclass(frozen=True)
class DeviceInfo:
    """The properties launch configuration and the benchmarks need."""

    name: str
    simulator: bool
    sm_count: int
    max_threads_per_block: int
    max_grid: tuple[int, int, int]
    shared_bytes_per_block: int
    total_bytes: float
    peak_bytes_per_second: float     # memory bandwidth: 2 (DDR) x clock x bus width
    threads_per_sm: int = 2048       # resident threads an SM holds
    blocks_per_sm: int = 32          # resident blocks an SM holds

    def resident_blocks(self, threads: int) -> int:
        """Blocks of `threads` the device holds at once: the grid a grid-stride loop needs to keep
        every SM full (the simulator: one per SM, so tiny tests cover the loops' strides)."""
        if self.simulator:
            return self.sm_count
        return self.sm_count * max(1, min(self.blocks_per_sm, self.threads_per_sm // max(threads, 1)))


def simulator_enabled() -> bool:
    """True when numba.cuda runs kernels in its Python simulator (numba's own switch)."""
    return os.environ.get(SIMULATOR_VAR, "0") not in ("", "0")


@functools.lru_cache(maxsize=1)
def _hardware() -> tuple[bool, str]:
    if not any(os.path.exists(p) for p in DRIVER_FILES):
        return False, "no NVIDIA driver was found (/dev/nvidiactl is missing)"
    try:
        from numba import cuda
        from numba.cuda.cudadrv import nvvm

        if not cuda.is_available():
            return False, "numba.cuda.is_available() is False (driver or CUDA libraries unusable)"
        if not nvvm.is_available():
            return False, ("a GPU is there but NVVM, the CUDA compiler library, is not "
                           "(pip install 'numba-cuda[cu12]' or 'numba-cuda[cu13]', or install the CUDA toolkit)")
        return True, ""
    except Exception as e:          # a broken CUDA install raises anything from ImportError to OSError
        return False, f"importing numba.cuda failed: {type(e).__name__}: {e}"


def available() -> bool:
    """True when target="cuda" can run: a usable GPU, or the simulator switched on."""
    return simulator_enabled() or _hardware()[0]


def require() -> None:
    """Raises a clear error when target="cuda" cannot run here, saying how to get the simulator."""
    if available():
        return
    raise UnsupportedError(
        f"target='cuda' needs an NVIDIA GPU: {_hardware()[1]}. To run the CUDA backend without a GPU, "
        f"enable numba's CUDA simulator: set {SIMULATOR_VAR}=1 in the environment before numba.cuda is "
        "first imported (e.g. `NUMBA_ENABLE_CUDASIM=1 python ...`, or os.environ at the top of a notebook "
        "before importing jitlab); it runs kernels in Python, so keep shapes tiny. Or use target='cpu' "
        "(target='auto' picks cpu here).")


def cuda():
    """numba.cuda, imported on first use (after `require`)."""
    require()
    from numba import cuda as module

    return module


@functools.lru_cache(maxsize=1)
def info() -> DeviceInfo:
    """The current device's properties (a small made-up device under the simulator)."""
    if simulator_enabled():
        # Two SMs make grids small enough that tests with tens of elements cover grid-stride loops.
        return DeviceInfo("CUDA simulator", True, 2, 1024, (2**31 - 1, 65535, 65535), 48 * 1024, float("inf"), 0.0)
    dev = cuda().get_current_device()
    total = cuda().current_context().get_memory_info()[1]
    a = lambda name: getattr(dev, name)  # noqa: E731
    bandwidth = 2.0 * a("MEMORY_CLOCK_RATE") * 1e3 * a("GLOBAL_MEMORY_BUS_WIDTH") / 8
    name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
    return DeviceInfo(name, False, a("MULTIPROCESSOR_COUNT"), a("MAX_THREADS_PER_BLOCK"),
                      (a("MAX_GRID_DIM_X"), a("MAX_GRID_DIM_Y"), a("MAX_GRID_DIM_Z")),
                      a("MAX_SHARED_MEMORY_PER_BLOCK"), float(total), bandwidth,
                      a("MAX_THREADS_PER_MULTIPROCESSOR"), a("MAX_BLOCKS_PER_MULTIPROCESSOR"))

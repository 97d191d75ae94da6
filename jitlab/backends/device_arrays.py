"""Arrays on a GPU as callers hand them in (numba, CuPy, PyTorch CUDA...), recognised without
importing their libraries or copying them."""

from __future__ import annotations

import numpy as np


class _DeviceMeta:
    """Shape, dtype and rank of a device array, read from its __cuda_array_interface__."""

    def __init__(self, interface: dict):
        self.shape = tuple(interface["shape"])
        self.dtype = np.dtype(interface["typestr"])
        self.ndim = len(self.shape)


def is_numba_device_array(a) -> bool:
    """numba's device arrays (and the simulator's) carry this marker."""
    return not isinstance(a, np.ndarray) and getattr(a, "__cuda_ndarray__", False) is True


def device_array_meta(a) -> _DeviceMeta | None:
    """For a GPU array (numba, CuPy, PyTorch CUDA...): its shape and dtype without copying it."""
    if isinstance(a, np.ndarray):
        return None
    if is_numba_device_array(a):
        return _DeviceMeta({"shape": a.shape, "typestr": np.dtype(a.dtype).str})
    try:
        interface = a.__cuda_array_interface__
    except Exception:          # absent, or a CPU tensor refusing to give one
        return None
    return _DeviceMeta(interface)


def c_strides(shape, itemsize: int) -> tuple[int, ...]:
    """The byte strides of a C-contiguous array of this shape: what an interface without strides means."""
    strides, step = [], itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))

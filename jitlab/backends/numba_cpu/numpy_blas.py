"""Where numpy's own BLAS is: the addresses of its cblas_?gemm, which compiled matrix products call
(blas.py says why numpy's rather than scipy's). No numba here: the O2 runner passes these
addresses to native segments in a warm start that never imports numba."""

from __future__ import annotations

import ctypes
import functools
import glob
import os

import numpy as np

# numpy's wheels bundle OpenBLAS built with 64-bit integers and these symbol names.
_SYMBOLS = ("scipy_cblas_sgemm64_", "scipy_cblas_dgemm64_")


def _numpy_blas_library() -> str | None:
    """The path of the OpenBLAS numpy's wheel bundles, if there is one."""
    root = os.path.dirname(np.__file__)
    folders = [root + ".libs", os.path.join(root, ".dylibs")]       # Linux and Windows wheels, macOS wheels
    return next((path for d in folders for path in sorted(glob.glob(os.path.join(d, "libscipy_openblas64_*")))), None)


@functools.cache
def addresses() -> np.ndarray:
    """[address of sgemm, address of dgemm] in numpy's BLAS, or zeros where it has none."""
    out = np.zeros(2, np.int64)
    path = _numpy_blas_library()
    if path is None:
        return out
    try:
        lib = ctypes.CDLL(path)
        for k, name in enumerate(_SYMBOLS):
            out[k] = ctypes.cast(getattr(lib, name), ctypes.c_void_p).value or 0
    except (OSError, AttributeError):
        out[:] = 0
    return out

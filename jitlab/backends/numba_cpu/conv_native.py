"""The native convolution library: conv_parts' functions given C entries (native_build.py), one
library per dtype in the kernel cache's folder, built the first time a convolution is compiled
there. contraction.py's NativeConv and NativeWinograd call its entries through the C caller,
whose threads take the parts, so that a warm start convolves without importing numba.

Building it takes numba about 3 s, once per cache folder and dtype. A compile that will need it
starts the build in a child process before it compiles its other kernels (`start`), so that
the two run side by side on two cores; the convolutions' own kernels are compiled last and
wait for it (`conv_library`).

It cannot exist where native libraries cannot: no C compiler, JITLAB_NATIVE=0, or a numpy whose
BLAS has no cblas symbols to call; convolutions then run numba's threads (library.py).
"""

from __future__ import annotations

import functools
import hashlib
import subprocess
import sys
import time

import numpy as np

from ...report import KernelTiming
from ...version import __version__
from ..base import KernelParam, ParamRole
from ..kernel_cache import KernelCache, support_hash
from ..native import NativeLibrary
from ..native_caller import compiler
from . import native_build
from .numpy_blas import addresses

MODULE = """import numpy as np  # noqa: F401

from jitlab.backends.numba_cpu.conv_parts import (FLAGS, gemm_rows_part, gemms_part, im2col_part,  # noqa: F401
                                                  winograd_input_part, winograd_output_part)
"""
_GEOMETRY = ("kh", "kw", "sh", "sw", "ph", "pw", "dh", "dw", "oh", "ow")
_building: dict[str, subprocess.Popen] = {}     # library path -> the child process building it


def _entries(dtype: np.dtype) -> list[native_build.Entry]:
    def array(name: str, ndim: int, of: np.dtype = dtype) -> KernelParam:
        return KernelParam(name, ParamRole.INPUT, np.dtype(of), ndim)

    blas = array("blas", 1, np.dtype(np.int64))
    geometry = tuple(KernelParam(n, ParamRole.DIM, np.dtype(np.int64)) for n in _GEOMETRY)
    signatures = {"im2col_part": (array("x", 3), array("cols", 2), *geometry),
                  "gemm_rows_part": (array("a", 2), array("b", 2), array("out", 2), blas),
                  "gemms_part": (array("u", 3), array("v", 3), array("m", 3), blas),
                  "winograd_input_part": (array("x", 3), array("v", 3)),
                  "winograd_output_part": (array("m", 3), array("out", 3))}
    return [native_build.Entry(fn, params, True, f"jitlab_{fn}") for fn, params in signatures.items()]


# what the library's code is compiled from: their text is part of its key
_CODE = tuple(f"jitlab.backends.numba_cpu.{m}" for m in ("conv_parts", "bits", "blas", "numpy_blas"))


@functools.cache
def _versions() -> str:
    """The versions the library is built with, read without importing numba."""
    from importlib.metadata import version

    return f"jitlab {__version__}, numba {version('numba')}, llvmlite {version('llvmlite')}, numpy {np.__version__}"


def _parts(dtype: np.dtype) -> dict[str, str]:
    return {"structure": "conv library", "signature": np.dtype(dtype).name, "backend": "numba_cpu",
            "source": hashlib.sha256(MODULE.encode()).hexdigest()[:16], "versions": _versions(),
            "support": support_hash(*_CODE)}


def _why_not() -> str:
    if not native_build.enabled():
        return f"native kernels are off ({native_build.ENV_VAR}=0)"
    if not addresses().all():
        return "numpy's BLAS has no cblas symbols to call"
    return ""


def start(dtype: np.dtype, cache: KernelCache) -> None:
    """Starts building the library for `dtype` in a child process, unless it is in the cache
    folder already (or cannot be built)."""
    if _why_not() or compiler() is None:
        return
    parts, path = native_build.located(_entries(np.dtype(dtype)), _parts(dtype), cache)
    if path in _building or NativeLibrary.read(path) is not None or native_build.failed(path):
        return
    code = "from jitlab.backends.numba_cpu.conv_native import _child; _child()"
    try:
        _building[path] = subprocess.Popen([sys.executable, "-c", code, np.dtype(dtype).name, cache.directory],
                                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL)
    except OSError:         # no interpreter to start (an embedded Python): the compile builds it itself
        pass


def _child() -> None:
    """The child process of `start`: builds the library into the cache folder."""
    dtype, folder = np.dtype(sys.argv[1]), sys.argv[2]
    conv_library(dtype, KernelCache(folder), KernelTiming())


def conv_library(dtype: np.dtype, cache: KernelCache, timing: KernelTiming
                 ) -> tuple[dict[str, NativeLibrary] | None, str]:
    """The entries of the library for `dtype` by function name (loaded: from the cache folder,
    once a child building it is done, else built now); or None and why there is none."""
    why = _why_not()
    if why:
        return None, why
    entries = _entries(np.dtype(dtype))
    parts = _parts(dtype)
    child = _building.pop(native_build.located(entries, parts, cache)[1], None)
    if child is not None:
        start_wait = time.perf_counter()
        child.wait()
        timing.numba_other += time.perf_counter() - start_wait      # numba's work, in the child
    libraries, _, why = native_build.libraries_for(MODULE, entries, parts, cache, timing)
    if libraries is None:
        return None, why
    return {e.fn: library for e, library in zip(entries, libraries)}, ""


def _dtypes_convolved(ops) -> set[np.dtype]:
    found = set()
    for op in ops:
        if op.name == "np.conv2d":
            found.add(np.dtype(op.result.type.dtype))
        elif op.name == "jit.group":
            found |= _dtypes_convolved(op.body.ops)
    return found


def prepare(ops, cache: KernelCache) -> None:
    """Starts the library's build for each dtype these ops (or the groups among them) convolve in."""
    for dtype in _dtypes_convolved(ops):
        start(dtype, cache)


def convolutions_last(groups: list) -> list:
    """The groups in the order to compile them: those with a convolution last, so that the
    library's build overlaps the others' compiles."""
    return sorted(groups, key=lambda g: bool(_dtypes_convolved([g])))

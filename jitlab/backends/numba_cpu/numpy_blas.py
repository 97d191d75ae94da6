"""Where numpy's own BLAS is: the addresses of its cblas_?gemm and of its thread count's get and
set, which compiled matrix products call (blas.py says why numpy's rather than scipy's), and
contexts that run numpy's BLAS on one thread or on the cores other processes leave free
(cores.py). No numba here: the O2 runner passes these addresses to native segments in a warm
start that never imports numba."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import glob
import os

import numpy as np

from .cores import CoreGauge, allowed_cpus

# Below this many multiply-adds a product runs on one BLAS thread: its work is a fraction of a
# millisecond, and two OpenBLAS threads waiting for each other on a loaded machine took 11 ms
# (median) for ResNet-50's (1, 2048) @ (2048, 1000), against 0.56 ms on one (one_blas_thread).
SMALL_PRODUCT = 1 << 22

# numpy's wheels bundle OpenBLAS built with 64-bit integers and these symbol names, at these places
# of `addresses()` (FREE_THREADS, between them, is a count)
_SYMBOLS = {0: "scipy_cblas_sgemm64_", 1: "scipy_cblas_dgemm64_", 2: "scipy_openblas_get_num_threads64_",
            3: "scipy_openblas_set_num_threads64_", 5: "scipy_cblas_sgemv64_", 6: "scipy_cblas_dgemv64_"}
_PRODUCTS = [0, 1, 5, 6]        # without these, compiled code has no BLAS of numpy's to call


def _numpy_blas_library() -> str | None:
    """The path of the OpenBLAS numpy's wheel bundles, if there is one."""
    root = os.path.dirname(np.__file__)
    folders = [root + ".libs", os.path.join(root, ".dylibs")]       # Linux and Windows wheels, macOS wheels
    return next((path for d in folders for path in sorted(glob.glob(os.path.join(d, "libscipy_openblas64_*")))), None)


# addresses()[FREE_THREADS]: the BLAS threads a large product in compiled code runs on, which
# `free_threads` keeps up to date (blas.gemm_cblas reads it). Never 0 where the symbols are there, so
# `addresses().all()` still says whether compiled code can call numpy's BLAS (o2.py, conv_native.py
# check it: a 0 there, a count not measured yet, sent O2's segments to numba dispatchers, which a
# warm start cannot run without importing numba).
FREE_THREADS = 4


@functools.cache
def addresses() -> np.ndarray:
    """[sgemm, dgemm, get thread count, set thread count, free threads, sgemv, dgemv]: addresses in
    numpy's BLAS, or zeros where it has none (the thread count functions are zero where only those
    are missing), and the thread count `free_threads` last measured (every core until then)."""
    out = np.zeros(7, np.int64)
    path = _numpy_blas_library()
    if path is None:
        return out
    out[FREE_THREADS] = len(allowed_cpus())
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        return out
    for k, name in _SYMBOLS.items():
        out[k] = ctypes.cast(getattr(lib, name, None) or 0, ctypes.c_void_p).value or 0
    if not out[_PRODUCTS].all():
        out[:] = 0
    return out


@functools.cache
def _gauge() -> CoreGauge:
    return CoreGauge()


# A forked child measures its own intervals (the parent's last sample holds the parent's CPU time).
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_gauge.cache_clear)


def free_threads() -> int:
    """The BLAS threads a large product should run on now: the cores other processes leave free
    (cores.py); also written to addresses()[FREE_THREADS] for compiled code to read."""
    n = _gauge()()
    addresses()[FREE_THREADS] = n
    return n


@functools.cache
def _thread_count_functions() -> tuple | None:
    """numpy's OpenBLAS's (get, set) of its thread count as Python callables, or None."""
    blas = addresses()
    if not blas[:FREE_THREADS].all():
        return None
    return (ctypes.CFUNCTYPE(ctypes.c_int)(int(blas[2])),
            ctypes.CFUNCTYPE(None, ctypes.c_int)(int(blas[3])))


@contextlib.contextmanager
def blas_threads(n: int):
    """numpy's OpenBLAS runs each call on at most `n` threads while inside (never more than it had).
    Yields whether that holds (False where the BLAS is not numpy's OpenBLAS)."""
    functions = _thread_count_functions()
    if functions is None:
        yield False
        return
    get, set_ = functions
    before = get()
    if before > n:
        set_(n)
    try:
        yield True
    finally:
        if before > n:
            set_(before)


def one_blas_thread():
    """numpy's OpenBLAS runs each call on the calling thread while inside: compiled code splits its
    GEMMs between numba's threads instead (`gemm_split`). Yields whether that holds (False where
    the BLAS is not numpy's OpenBLAS: then each call must stay one call).

    Why: OpenBLAS's own threads wait for each other at the end of every call by yielding the
    core. On a machine shared with other processes a yield hands the core away for a whole time
    slice, so a 1 ms GEMM took 8-35 ms (median) with two BLAS threads where numba's workqueue
    threads, which block instead, ran the same two halves in 0.5-1.9 ms."""
    return blas_threads(1)

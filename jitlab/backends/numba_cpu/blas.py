"""Matrix products in compiled code through numpy's own BLAS.

numba's `np.dot` calls scipy's BLAS, a second OpenBLAS with its own thread pool. Beside
numpy's (which O1, the user's numpy code and every peer use) the two pools spin against each
other on a small machine: an O2 MLP ran at half the speed of the same work at O1. So compiled
code calls numpy's `cblas_?gemm` through its address, passed in at run time as an argument
(`addresses()`): an address baked into the code would break numba's on-disk cache, since the
library loads elsewhere in every process. Where numpy's BLAS does not export the symbols
(a numpy not built against scipy-openblas) the addresses are 0 and `gemm` uses `np.dot`.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import prange, types
from numba.extending import intrinsic

from ..numba_files import njit_cached
from .numpy_blas import FREE_THREADS, SMALL_PRODUCT, addresses, one_blas_thread  # noqa: F401  (what gemm and its callers take)

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112


@intrinsic
def _cblas_gemm(typingctx, address, a, b, out, ta, tb):
    """out = op(a) @ op(b) for 2-D C-contiguous arrays of one float type, by the cblas_?gemm at
    `address`; op transposes where `ta`/`tb` is true (a and b are the stored matrices)."""
    if not all(isinstance(t, types.Array) and t.ndim == 2 and t.layout == "C" for t in (a, b, out)):
        return None
    if a.dtype not in (types.float32, types.float64) or not a.dtype == b.dtype == out.dtype:
        return None

    def codegen(context, builder, sig, args):
        address, a, b, out, ta, tb = args
        fty = context.get_value_type(sig.args[1].dtype)
        i32, i64 = ir.IntType(32), ir.IntType(64)
        fnty = ir.FunctionType(ir.VoidType(), [i32, i32, i32, i64, i64, i64, fty, fty.as_pointer(), i64,
                                               fty.as_pointer(), i64, fty, fty.as_pointer(), i64])
        arrays = [context.make_array(t)(context, builder, v) for t, v in zip(sig.args[1:4], (a, b, out))]
        (a_rows, a_cols), (_, b_cols), (m, n) = ([builder.extract_value(x.shape, i) for i in (0, 1)] for x in arrays)
        k = builder.select(ta, a_rows, a_cols)
        flag = [builder.select(t, i32(_TRANS), i32(_NO_TRANS)) for t in (ta, tb)]
        fn = builder.inttoptr(address, fnty.as_pointer())
        builder.call(fn, [i32(_ROW_MAJOR), flag[0], flag[1], m, n, k, fty(1.0), arrays[0].data, a_cols,
                          arrays[1].data, b_cols, fty(0.0), arrays[2].data, n])
        return context.get_dummy_value()

    return types.void(types.int64, a, b, out, types.boolean, types.boolean), codegen


@intrinsic
def _cblas_gemv(typingctx, address, a, x, y, ta):
    """y = op(a) @ x for a 2-D C-contiguous `a` and contiguous 1-D `x`, `y` of its float type, by the
    cblas_?gemv at `address` (op transposes where `ta` is true; `a` is the stored matrix)."""
    if not (isinstance(a, types.Array) and a.ndim == 2 and a.layout == "C" and all(
            isinstance(t, types.Array) and t.ndim == 1 and t.layout == "C" for t in (x, y))):
        return None
    if a.dtype not in (types.float32, types.float64) or not a.dtype == x.dtype == y.dtype:
        return None

    def codegen(context, builder, sig, args):
        address, a, x, y, ta = args
        fty = context.get_value_type(sig.args[1].dtype)
        i32, i64 = ir.IntType(32), ir.IntType(64)
        fnty = ir.FunctionType(ir.VoidType(), [i32, i32, i64, i64, fty, fty.as_pointer(), i64, fty.as_pointer(),
                                               i64, fty, fty.as_pointer(), i64])
        arrays = [context.make_array(t)(context, builder, v) for t, v in zip(sig.args[1:4], (a, x, y))]
        rows, cols = (builder.extract_value(arrays[0].shape, i) for i in (0, 1))
        flag = builder.select(ta, i32(_TRANS), i32(_NO_TRANS))
        fn = builder.inttoptr(address, fnty.as_pointer())
        builder.call(fn, [i32(_ROW_MAJOR), flag, rows, cols, fty(1.0), arrays[0].data, cols, arrays[1].data,
                          i64(1), fty(0.0), arrays[2].data, i64(1)])
        return context.get_dummy_value()

    return types.void(types.int64, a, x, y, types.boolean), codegen


@intrinsic
def _get_threads(typingctx, address):
    """int f(void) at `address`: OpenBLAS's thread count."""
    def codegen(context, builder, sig, args):
        fnty = ir.FunctionType(ir.IntType(32), [])
        n = builder.call(builder.inttoptr(args[0], fnty.as_pointer()), [])
        return builder.sext(n, ir.IntType(64))

    return types.int64(types.int64), codegen


@intrinsic
def _set_threads(typingctx, address, n):
    """void f(int) at `address`: sets OpenBLAS's thread count."""
    def codegen(context, builder, sig, args):
        fnty = ir.FunctionType(ir.VoidType(), [ir.IntType(32)])
        builder.call(builder.inttoptr(args[0], fnty.as_pointer()), [builder.trunc(args[1], ir.IntType(32))])
        return context.get_dummy_value()

    return types.void(types.int64, types.int64), codegen


@njit_cached()
def _gemm_threads(blas, address, a, b, out, ta, tb, n):
    """_cblas_gemm on at most `n` BLAS threads, the thread count put back after."""
    before = _get_threads(blas[2])
    if before > n:
        _set_threads(blas[3], n)
    _cblas_gemm(address, a, b, out, ta, tb)
    if before > n:
        _set_threads(blas[3], before)


@njit_cached()
def gemm_cblas(blas, a, b, out, ta, tb):
    """`gemm` where numpy's cblas symbols are known to exist: native libraries call this one, since
    the np.dot fallback would link numba's BLAS helpers into them. A small product runs on one BLAS
    thread, a large one on blas[FREE_THREADS] (the cores other processes leave: numpy_blas.free_threads)."""
    address = blas[0] if a.itemsize == 4 else blas[1]
    k = a.shape[0] if ta else a.shape[1]
    if out.shape[0] > 0 and out.shape[1] > 0:
        if k == 0:
            out[:] = 0
        elif out.shape[1] == 1 or out.shape[0] == 1:
            _matrix_vector(blas, a, b, out, ta, tb)
        elif blas[3] == 0:
            _cblas_gemm(address, a, b, out, ta, tb)
        else:
            small = out.shape[0] * out.shape[1] * k < SMALL_PRODUCT
            _gemm_threads(blas, address, a, b, out, ta, tb, 1 if small else blas[FREE_THREADS])


@njit_cached()
def _matrix_vector(blas, a, b, out, ta, tb):
    """gemm_cblas's product where `out` is one column or one row, as a gemv: OpenBLAS's gemm packs
    the whole matrix for every call (a (128, 1152) @ (1152, 1) took 40 us as a gemm, 12 as a gemv)."""
    address = blas[5] if a.itemsize == 4 else blas[6]
    if out.shape[1] == 1:                     # out = op(a) @ b[:, 0]
        _cblas_gemv(address, a, b.reshape(-1), out.reshape(-1), ta)
    else:                                     # out[0] = a[0] @ op(b) = op(b).T @ a[0]
        _cblas_gemv(address, b, a.reshape(-1), out.reshape(-1), not tb)


@njit_cached()
def gemm(blas, a, b, out, ta, tb):
    """out = op(a) @ op(b), op transposing where ta/tb is true; 2-D C-contiguous float32 or float64
    arrays (a and b as stored). `blas` is `addresses()`."""
    if (blas[0] if a.itemsize == 4 else blas[1]) != 0:
        gemm_cblas(blas, a, b, out, ta, tb)
    elif ta and tb:         # one branch per layout: numba types a.T as another array type
        np.dot(a.T, b.T, out)
    elif ta:
        np.dot(a.T, b, out)
    elif tb:
        np.dot(a, b.T, out)
    else:
        np.dot(a, b, out)


@njit_cached(parallel=True)
def gemm_split(blas, a, b, out, parts):
    """out = a @ b (2-D C-contiguous, as `gemm`) as `parts` GEMMs over row blocks of `a` and `out`,
    run by numba's threads in parallel: inside `one_blas_thread`, each on one core."""
    m = a.shape[0]
    for p in prange(parts):
        lo, hi = p * m // parts, (p + 1) * m // parts
        gemm(blas, a[lo:hi], b, out[lo:hi], False, False)

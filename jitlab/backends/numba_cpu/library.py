"""Library kernels: BLAS matmul, im2col and Winograd convolution, written into given buffers.

Contractions are not generated: BLAS is faster than anything numba emits. A group
whose anchor is a matmul or conv runs one of these, then its fused epilogue.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import prange

from ..numba_files import njit_cached
from .blas import addresses, gemm_split, one_blas_thread
from .conv_operands import conv_views
from .conv_parts import im2col_part
from .winograd import winograd_nb

# conv2d_nb (and the O2 segments that call it) run the parallel _im2col from inside njit
# code. Loaded from numba's cache, such code links against the threading layer's symbols
# (allocate_sched), which exist only once the layer is launched; unlaunched, the call jumps
# to address 0 and kills the process. Asking for the thread count launches it.
numba.get_num_threads()


_views = njit_cached()(conv_views)


@njit_cached(parallel=True)
def _im2col(x, geometry, cols):
    """cols[(c*kh + i)*kw + j, y*ow + x] = padded x[c, y*sh + i*dh - ph, x*sw + j*dw - pw], a row each;
    `geometry`: (kh, kw, sh, sw, ph, pw, dh, dw, oh, ow)."""
    kh, kw, sh, sw, ph, pw, dh, dw, oh, ow = geometry
    rows = x.shape[0] * kh * kw
    for r in prange(rows):
        im2col_part(x, cols, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, r, rows)


@njit_cached()
def conv2d_nb(x, w, out, sh, sw, ph, pw, dh, dw, groups, blas, parts=1):
    """NCHW convolution by im2col + one GEMM per image and group (conv_operands.conv_views), written
    into `out`, each GEMM split into `parts` row blocks (blas.gemm_split). `blas`: blas.addresses()."""
    v = _views(x, w, out, sh, sw, ph, pw, dh, dw, groups)
    cols = np.empty((v.filters.shape[2], v.results.shape[3]), x.dtype)
    for b in range(x.shape[0]):
        for g in range(groups):
            if v.direct:
                gemm_split(blas, v.filters[g], v.flat[b, g], v.results[b, g], parts)
            else:
                _im2col(v.images[b, g], v.geometry, cols)
                gemm_split(blas, v.filters[g], cols, v.results[b, g], parts)


def conv2d_into(x: np.ndarray, w: np.ndarray, out: np.ndarray, scalars: tuple[int, ...]) -> None:
    """The conv2d library kernel on numba's threads; `scalars` as Conv.operands gives them."""
    with one_blas_thread() as split:
        conv2d_nb(x, w, out, *scalars, addresses(), numba.get_num_threads() if split else 1)


def winograd_into(x: np.ndarray, u: np.ndarray, out: np.ndarray) -> None:
    """The Winograd conv2d library kernel (winograd.py): `u` is the filter's transform."""
    with one_blas_thread() as split:
        winograd_nb(x, u, out, addresses(), split)

"""Library kernels: BLAS matmul, im2col and Winograd convolution, written into given buffers.

Contractions are not generated: BLAS is faster than anything numba emits. A group
whose anchor is a matmul or conv runs one of these, then its fused epilogue.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from .blas import addresses, gemm_split, one_blas_thread
from .conv_parts import im2col_part
from .winograd import winograd_nb

# conv2d_nb (and the O2 segments that call it) run the parallel _im2col from inside njit
# code. Loaded from numba's cache, such code links against the threading layer's symbols
# (allocate_sched), which exist only once the layer is launched; unlaunched, the call jumps
# to address 0 and kills the process. Asking for the thread count launches it.
numba.get_num_threads()


@njit(parallel=True, cache=True)
def _im2col(x, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, cols):
    """cols[(c*kh + i)*kw + j, y*ow + x] = padded x[c, y*sh + i*dh - ph, x*sw + j*dw - pw], a row each."""
    rows = x.shape[0] * kh * kw
    for r in prange(rows):
        im2col_part(x, cols, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, r, rows)


@njit(cache=True)
def conv2d_nb(x, w, out, sh, sw, ph, pw, dh, dw, groups, blas, parts=1):
    """NCHW convolution by im2col + one GEMM per image and group, written into `out`, each GEMM
    split into `parts` row blocks (blas.gemm_split); a 1x1 kernel with stride 1 and no padding
    reads the image directly. `blas`: blas.addresses()."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    oh, ow = out.shape[2], out.shape[3]
    og = o // groups
    direct = kh == 1 and kw == 1 and sh == 1 and sw == 1 and ph == 0 and pw == 0
    cols = np.empty((cg * kh * kw, oh * ow), x.dtype)
    # Integer indices on leading dims of C-contiguous reshapes keep every operand contiguous: no copies.
    images = x.reshape(n, groups, cg, h, wd)
    flat_images = x.reshape(n, groups, cg, h * wd)
    wmat = w.reshape(groups, og, cg * kh * kw)
    results = out.reshape(n, groups, og, oh * ow)
    for b in range(n):
        for g in range(groups):
            if direct:
                gemm_split(blas, wmat[g], flat_images[b, g], results[b, g], parts)
            else:
                _im2col(images[b, g], kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, cols)
                gemm_split(blas, wmat[g], cols, results[b, g], parts)


def conv2d_into(x: np.ndarray, w: np.ndarray, out: np.ndarray, strides, pads, dilations, groups: int) -> None:
    """The conv2d library kernel; pads are (top, left, bottom, right) and must be symmetric here."""
    if pads[0] != pads[2] or pads[1] != pads[3]:
        x = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
        pads = (0, 0, 0, 0)
    with one_blas_thread() as split:
        conv2d_nb(x, np.ascontiguousarray(w), out, strides[0], strides[1], pads[0], pads[1], dilations[0],
                  dilations[1], groups, addresses(), numba.get_num_threads() if split else 1)


def winograd_into(x: np.ndarray, u: np.ndarray, out: np.ndarray) -> None:
    """The Winograd conv2d library kernel (winograd.py): `u` is the filter's transform."""
    with one_blas_thread() as split:
        winograd_nb(x, u, out, addresses(), split)

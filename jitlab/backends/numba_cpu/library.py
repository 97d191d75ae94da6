"""Library kernels: BLAS matmul and im2col convolution, written into given buffers.

Contractions are not generated: BLAS is faster than anything numba emits. A group
whose anchor is a matmul or conv runs one of these, then its fused epilogue.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange


def matmul_into(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    np.matmul(a, b, out=out)


@njit(parallel=True, cache=True)
def _im2col(x, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, cols):
    """cols[(c*kh + i)*kw + j, y*ow + x] = padded x[c, y*sh + i*dh - ph, x*sw + j*dw - pw]."""
    c_in, h, w = x.shape
    for c in prange(c_in):
        for i in range(kh):
            for j in range(kw):
                row = (c * kh + i) * kw + j
                for y in range(oh):
                    src_y = y * sh + i * dh - ph
                    for xx in range(ow):
                        src_x = xx * sw + j * dw - pw
                        inside = 0 <= src_y < h and 0 <= src_x < w
                        cols[row, y * ow + xx] = x[c, src_y, src_x] if inside else 0


def conv2d_into(x: np.ndarray, w: np.ndarray, out: np.ndarray, strides, pads, dilations, groups: int) -> None:
    """NCHW convolution by im2col + one BLAS call per image and group, written into `out`."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    _, _, oh, ow = out.shape
    og = o // groups
    direct = kh == kw == 1 and strides == (1, 1) and pads == (0, 0, 0, 0)
    cols = None if direct else np.empty((cg * kh * kw, oh * ow), x.dtype)
    wmat = w.reshape(groups, og, cg * kh * kw)
    out_view = out.reshape(n, groups, og, oh * ow)
    for b in range(n):
        for g in range(groups):
            image = x[b, g * cg:(g + 1) * cg]
            if direct:
                source = image.reshape(cg, h * wd)
            else:
                _im2col(image, kh, kw, strides[0], strides[1], pads[0], pads[1], dilations[0], dilations[1],
                        oh, ow, cols)
                source = cols
            np.matmul(wmat[g], source, out=out_view[b, g])

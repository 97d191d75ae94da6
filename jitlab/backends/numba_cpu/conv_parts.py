"""A convolution's passes over memory as parts of a split loop: im2col, a GEMM's row blocks and
Winograd's transforms, each `f(..., part_, parts_)` doing part `part_` of `parts_`.

numba's parallel library kernels (library.py, winograd.py) run the parts in a prange loop; the
native convolution library (conv_native.py) gives each its C entry, and the C caller's threads
take the parts, so a warm start convolves without numba.
"""

from __future__ import annotations

import numpy as np

from ..numba_files import njit_cached
from .bits import nonneg
from .blas import gemm_cblas

FLAGS = {"contract"}


@njit_cached(fastmath=FLAGS, error_model="numpy")
def im2col_part(x, cols, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, part_, parts_):
    """Rows of cols[(c*kh + i)*kw + j, y*ow + x] = padded x[c, y*sh + i*dh - ph, x*sw + j*dw - pw],
    split by row: a 3-channel stem has 147 rows to share out, not 3 channels."""
    c_in, h, w = x.shape
    rows = c_in * kh * kw
    for r_ in range(part_ * rows // parts_, (part_ + 1) * rows // parts_):
        row = nonneg(r_)
        c, i, j = row // (kh * kw), (row // kw) % kh, row % kw
        for y in range(oh):
            src_y = y * sh + i * dh - ph
            for xx in range(ow):
                src_x = xx * sw + j * dw - pw
                inside = 0 <= src_y < h and 0 <= src_x < w
                cols[row, y * ow + xx] = x[c, src_y, src_x] if inside else 0


@njit_cached(error_model="numpy")
def gemm_rows_part(a, b, out, blas, part_, parts_):
    """Rows [part_ m / parts_, (part_ + 1) m / parts_) of out = a @ b, on numpy's cblas (`blas`:
    numpy_blas.addresses()), which the caller keeps on one thread."""
    m = a.shape[0]
    lo, hi = part_ * m // parts_, (part_ + 1) * m // parts_
    if hi > lo:
        gemm_cblas(blas, a[lo:hi], b, out[lo:hi], False, False)


@njit_cached(error_model="numpy")
def gemms_part(u, v, m, blas, part_, parts_):
    """m[k] = u[k] @ v[k] for the part's share of k (Winograd's 16 products)."""
    n = u.shape[0]
    for k in range(part_ * n // parts_, (part_ + 1) * n // parts_):
        gemm_cblas(blas, u[k], v[k], m[k], False, False)


@njit_cached(fastmath=FLAGS, error_model="numpy")
def winograd_input_part(x, v, part_, parts_):
    """v[4r + s, c, tile] = (B^T d B)[r, s] for the 4x4 tile d of the padded image x[c] at that
    tile, for the part's channels; B^T = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]].
    Rows first, then columns, each loop over one output row of tiles so that LLVM vectorizes it."""
    c_in, h, w = x.shape
    th, tw = h // 2, w // 2
    xp = np.zeros((h + 2, w + 2), x.dtype)          # its border stays zero from channel to channel
    a = np.empty((4, w + 2), x.dtype)
    for c_ in range(part_ * c_in // parts_, (part_ + 1) * c_in // parts_):
        c = nonneg(c_)
        for i in range(h):          # a slice assignment would need numba's runtime for its overlap copy
            for j in range(w):
                xp[i + 1, j + 1] = x[c, i, j]
        for ty in range(th):
            r0, r1, r2, r3 = xp[2 * ty], xp[2 * ty + 1], xp[2 * ty + 2], xp[2 * ty + 3]
            for i in range(w + 2):
                a[0, i] = r0[i] - r2[i]
                a[1, i] = r1[i] + r2[i]
                a[2, i] = r2[i] - r1[i]
                a[3, i] = r1[i] - r3[i]
            tiles = slice(ty * tw, ty * tw + tw)
            for r in range(4):
                ar, k = a[r], 4 * r
                v0, v1, v2, v3 = v[k, c, tiles], v[k + 1, c, tiles], v[k + 2, c, tiles], v[k + 3, c, tiles]
                for t in range(tw):
                    v0[t] = ar[2 * t] - ar[2 * t + 2]
                for t in range(tw):
                    v1[t] = ar[2 * t + 1] + ar[2 * t + 2]
                for t in range(tw):
                    v2[t] = ar[2 * t + 2] - ar[2 * t + 1]
                for t in range(tw):
                    v3[t] = ar[2 * t + 1] - ar[2 * t + 3]


@njit_cached(fastmath=FLAGS, error_model="numpy")
def winograd_output_part(m, out, part_, parts_):
    """out[o] tile by tile = A^T M A for the part's channels o, M the 4x4 products m[:, o, tile];
    A^T = [[1, 1, 1, 0], [0, 1, -1, -1]]."""
    o_n, h, w = out.shape
    th, tw = h // 2, w // 2
    q = np.empty((2, 4, tw), m.dtype)
    for o_ in range(part_ * o_n // parts_, (part_ + 1) * o_n // parts_):
        o = nonneg(o_)
        for ty in range(th):
            tiles = slice(ty * tw, ty * tw + tw)
            for s in range(4):
                m0, m1, m2, m3 = m[s, o, tiles], m[4 + s, o, tiles], m[8 + s, o, tiles], m[12 + s, o, tiles]
                q0, q1 = q[0, s], q[1, s]
                for t in range(tw):
                    q0[t] = m0[t] + m1[t] + m2[t]
                    q1[t] = m1[t] - m2[t] - m3[t]
            for r in range(2):
                y = out[o, 2 * ty + r]
                p0, p1, p2, p3 = q[r, 0], q[r, 1], q[r, 2], q[r, 3]
                for t in range(tw):
                    y[2 * t] = p0[t] + p1[t] + p2[t]
                    y[2 * t + 1] = p1[t] - p2[t] - p3[t]

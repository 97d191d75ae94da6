"""Winograd F(2x2, 3x3) convolution for 3x3 filters at stride 1 that are program weights.

im2col + GEMM spends 9 multiply-adds per input channel and output pixel on a 3x3 filter.
Winograd's minimal filtering computes each 2x2 output tile from a 4x4 input tile with 16
products instead of 36 (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks",
2015): the input tiles and the filters are transformed by additions (filters once, since a
weight never changes), the products become 16 GEMMs of (out channels x in channels) by
(in channels x tiles), and an output transform of additions sums them back into 2x2 tiles.
2.25x fewer multiply-adds; the transforms are memory passes over a few MiB.

Where it pays is measured (docs/performance.md, "Winograd convolutions"): BLAS runs a GEMM
with few columns (tiles) slowly, so on 7x7 images (16 tiles) it lost to im2col.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ...ir.core import Operation
from .blas import gemm

MIN_TILES = 49          # below this many 2x2 tiles per image the 16 GEMMs are too narrow to pay
# U = G g G^T turns a 3x3 filter g into the 4x4 one the tiles are multiplied by.
_G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]])


def fits(con: Operation) -> bool:
    """A conv2d this algorithm computes: 3x3, stride and dilation 1, one group, padding 1 on every
    side (so the output is the input's size), an even output of at least MIN_TILES tiles."""
    a = con.attrs
    x, w = (v.type for v in con.operands)
    if not (x.is_static and w.is_static) or x.dtype.name not in ("float32", "float64"):
        return False
    h, wd = x.shape[2], x.shape[3]
    return (tuple(w.shape[2:]) == (3, 3) and tuple(a["strides"]) == (1, 1) and tuple(a["dilations"]) == (1, 1)
            and a["groups"] == 1 and tuple(a["pads"]) == (1, 1, 1, 1) and h % 2 == 0 and wd % 2 == 0
            and (h // 2) * (wd // 2) >= MIN_TILES)


def filter_transform(w: np.ndarray) -> np.ndarray:
    """(16, out channels, in channels): G w G^T, in float64 and rounded once to w's dtype."""
    u = np.einsum("ai,ocij,bj->aboc", _G, w.astype(np.float64), _G)
    return np.ascontiguousarray(u.reshape(16, w.shape[0], w.shape[1]).astype(w.dtype))


class FilterCache:
    """The transformed filter of each weight array a kernel is called with. Only for weights
    (`np.weight` operands): they are the program's constants, the same array every call and
    never written, so identity says the transform is current. A kernel shared by groups of one
    structure sees several weights, hence a dict."""

    def __init__(self):
        self._entries: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def __call__(self, w: np.ndarray) -> np.ndarray:
        entry = self._entries.get(id(w))
        if entry is None or entry[0] is not w:
            entry = self._entries[id(w)] = (w, filter_transform(w))
        return entry[1]


@njit(parallel=True, cache=True)
def _input_transform(x, v):
    """v[4r + s, c, tile] = (B^T d B)[r, s] for the 4x4 tile d of the padded image x[c] at that
    tile; B^T = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]. Rows first, then
    columns, each loop over one output row of tiles so that LLVM vectorizes it."""
    c_in, h, w = x.shape
    th, tw = h // 2, w // 2
    for c in prange(c_in):
        xp = np.zeros((h + 2, w + 2), x.dtype)
        xp[1:h + 1, 1:w + 1] = x[c]
        a = np.empty((4, w + 2), x.dtype)
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


@njit(parallel=True, cache=True)
def _output_transform(m, out):
    """out[o] tile by tile = A^T M A, M the 4x4 products m[:, o, tile];
    A^T = [[1, 1, 1, 0], [0, 1, -1, -1]]."""
    o_n, h, w = out.shape
    th, tw = h // 2, w // 2
    for o in prange(o_n):
        q = np.empty((2, 4, tw), m.dtype)
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


@njit(cache=True)
def winograd_nb(x, u, out, blas, parallel):
    """out = conv2d(x, w) for a filter w whose transform is u (filter_transform); NCHW, `fits`.
    With `parallel` (inside blas.one_blas_thread) numba's threads share out the 16 GEMMs."""
    n, c, h, w = x.shape
    o = u.shape[1]
    tiles = (h // 2) * (w // 2)
    v = np.empty((16, c, tiles), x.dtype)
    m = np.empty((16, o, tiles), x.dtype)
    for b in range(n):
        _input_transform(x[b], v)
        if parallel:
            _gemms_parallel(blas, u, v, m)
        else:
            for k in range(16):
                gemm(blas, u[k], v[k], m[k], False, False)
        _output_transform(m, out[b])


@njit(parallel=True, cache=True)
def _gemms_parallel(blas, u, v, m):
    for k in prange(16):
        gemm(blas, u[k], v[k], m[k], False, False)

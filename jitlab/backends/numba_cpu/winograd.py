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
from numba import prange

from ...ir.core import Operation
from ..numba_files import njit_cached
from .blas import gemm
from .conv_parts import winograd_input_part, winograd_output_part

MIN_TILES = 49          # below this many 2x2 tiles per image the 16 GEMMs are too narrow to pay


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


@njit_cached(parallel=True)
def _input_transform(x, v):
    """Winograd's input transform (conv_parts.winograd_input_part), a channel each."""
    c_in = x.shape[0]
    for c in prange(c_in):
        winograd_input_part(x, v, c, c_in)


@njit_cached(parallel=True)
def _output_transform(m, out):
    """Winograd's output transform (conv_parts.winograd_output_part), a channel each."""
    o_n = out.shape[0]
    for o in prange(o_n):
        winograd_output_part(m, out, o, o_n)


@njit_cached()
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


@njit_cached(parallel=True)
def _gemms_parallel(blas, u, v, m):
    for k in prange(16):
        gemm(blas, u[k], v[k], m[k], False, False)

"""im2col for convolutions through cuBLAS: each sample's input patches laid out as a matrix.

`cols[s, r, p]` is the input value kernel row `r` (channel, kernel y, kernel x, in the weights'
order) reads at output pixel `p` of sample `s`, or 0 in the padding. A grid-stride loop over every
element, with no barrier and no shared memory: any launch configuration is correct. Imported
only when a convolution runs through cuBLAS (it imports numba.cuda).
"""

from __future__ import annotations

from numba import cuda

from .device import info, simulator_enabled

THREADS = 256


@cuda.jit(cache=True)
def _im2col(x, cols, kh, kw, sh, sw, ph, pw, dh, dw, ow):
    samples, rows, pixels = cols.shape
    height, width = x.shape[2], x.shape[3]
    for idx in range(cuda.grid(1), samples * rows * pixels, cuda.gridsize(1)):
        p = idx % pixels
        r = (idx // pixels) % rows
        s = idx // (pixels * rows)
        c, i, j = r // (kh * kw), (r // kw) % kh, r % kw
        y = (p // ow) * sh + i * dh - ph
        z = (p % ow) * sw + j * dw - pw
        cols[s, r, p] = x[s, c, y, z] if 0 <= y < height and 0 <= z < width else 0


def im2col(x, cols, window: tuple[int, ...], ow: int, stream) -> None:
    """Fills `cols` (samples, C * KH * KW, OH * OW) from `x` (samples, C, H, W); `window` is
    (KH, KW, stride y, stride x, pad top, pad left, dilation y, dilation x)."""
    threads = 32 if simulator_enabled() else THREADS     # the simulator runs a Python thread per CUDA thread
    blocks = max(1, min(-(-cols.size // threads), info().resident_blocks(threads)))
    _im2col[blocks, threads, stream](x, cols, *window, ow)

"""A convolution's operands as its GEMMs see them: the views of images, filters and results,
im2col's geometry, and Winograd's transformed filters. Plain numpy, so that the run-time objects
(contraction.py) need no numba; library.py compiles conv_views with numba too, so the numba
convolution and the native one read one geometry."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class ConvViews(NamedTuple):
    """A convolution's GEMM operands (conv_views). Integer indices [b, g] on the leading dims of
    these C-contiguous reshapes give image b's group g, contiguous: no copies."""

    images: np.ndarray      # (n, groups, cg, h, w): what im2col reads
    flat: np.ndarray        # (n, groups, cg, h * w): the images as matrices, for a direct convolution
    filters: np.ndarray     # (groups, o / groups, cg * kh * kw)
    results: np.ndarray     # (n, groups, o / groups, oh * ow)
    geometry: tuple         # im2col's (kh, kw, sh, sw, ph, pw, dh, dw, oh, ow)
    direct: bool            # a 1x1 kernel at stride 1 without padding: each image is its own im2col


def conv_views(x, w, out, sh, sw, ph, pw, dh, dw, groups) -> ConvViews:
    """The GEMM operands of the NCHW convolution `out` = conv(x, w), pads symmetric, every array
    C-contiguous. Plain Python that library.py compiles with numba too, so that NativeConv and
    conv2d_nb (numba's, which O2's segments call) read one geometry."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    oh, ow = out.shape[2], out.shape[3]
    direct = kh == 1 and kw == 1 and sh == 1 and sw == 1 and ph == 0 and pw == 0
    return ConvViews(x.reshape(n, groups, cg, h, wd), x.reshape(n, groups, cg, h * wd),
                     w.reshape(groups, o // groups, cg * kh * kw), out.reshape(n, groups, o // groups, oh * ow),
                     (kh, kw, sh, sw, ph, pw, dh, dw, oh, ow), direct)


# U = G g G^T turns a 3x3 filter g into the 4x4 one the tiles are multiplied by.
_G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]])


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

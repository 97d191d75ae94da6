"""A contraction group's run: the library product (BLAS matmul, im2col or Winograd convolution),
then its generated epilogue. Plain data here, so that it pickles into the executable cache: a
matmul, a native convolution (conv_native.py) and a native epilogue (backends/native.py) run in
a warm start without numba; where the native convolution library cannot be built, a convolution
runs numba's threads (Conv, Winograd)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ...ir.shapes import evaluate_shape
from ..native import NativeLibrary, threads
from .numpy_blas import SMALL_PRODUCT, addresses, one_blas_thread

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


@dataclass
class Matmul:
    """out = a @ b by numpy's BLAS; a small product on one BLAS thread (SMALL_PRODUCT)."""

    portable = True

    def load(self) -> None:
        """Nothing to load."""

    def __call__(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        if out.size * a.shape[-1] < SMALL_PRODUCT:      # as blas.gemm does
            with one_blas_thread():
                np.matmul(a, b, out=out)
        else:
            np.matmul(a, b, out=out)


@dataclass
class Winograd:
    """Winograd F(2x2,3x3) convolution (winograd.py, in numba), the filter's transform cached per
    weight array; runs numba's threads, so the executable cache does not keep it."""

    def __post_init__(self) -> None:
        self.transformed = FilterCache()

    def load(self) -> None:
        """Nothing to load."""

    def __call__(self, x: np.ndarray, w: np.ndarray, out: np.ndarray) -> None:
        from .library import winograd_into

        winograd_into(x, self.transformed(w), out)


@dataclass
class Conv:
    """NCHW convolution written into `out` by im2col and a GEMM per image and group, split between
    numba's threads on one BLAS thread each (library.conv2d_into); pads are (top, left, bottom,
    right). It runs numba's threads, so the executable cache does not keep it."""

    strides: tuple[int, int]
    pads: tuple[int, int, int, int]
    dilations: tuple[int, int]
    groups: int

    def load(self) -> None:
        """Nothing to load."""

    def __call__(self, x: np.ndarray, w: np.ndarray, out: np.ndarray) -> None:
        from .library import conv2d_into

        conv2d_into(x, w, out, self.strides, self.pads, self.dilations, self.groups)


@dataclass
class NativeConv(Conv):
    """Conv with its passes in the native convolution library (conv_native.py): im2col and the
    GEMM's row blocks as entries the C caller's threads split. No numba at run time, so the
    executable cache keeps it."""

    entries: dict[str, NativeLibrary] = field(default_factory=dict)     # conv_parts' functions by name

    portable = True

    def load(self) -> None:
        for library in self.entries.values():
            library.load()

    def __call__(self, x: np.ndarray, w: np.ndarray, out: np.ndarray) -> None:
        pads = self.pads
        if pads[0] != pads[2] or pads[1] != pads[3]:
            x = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
            pads = (0, 0, 0, 0)
        x, w = np.ascontiguousarray(x), np.ascontiguousarray(w)
        n, c, h, wd = x.shape
        o, cg, kh, kw = w.shape
        oh, ow = out.shape[2], out.shape[3]
        g_n = self.groups
        (sh, sw), (dh, dw) = self.strides, self.dilations
        direct = kh == kw == sh == sw == 1 and pads == (0, 0, 0, 0)
        wmat = w.reshape(g_n, o // g_n, cg * kh * kw)
        results = out.reshape(n, g_n, o // g_n, oh * ow)
        images = x.reshape(n, g_n, cg, h * wd) if direct else x.reshape(n, g_n, cg, h, wd)
        cols = None if direct else np.empty((cg * kh * kw, oh * ow), x.dtype)
        geometry = (kh, kw, sh, sw, pads[0], pads[1], dh, dw, oh, ow)
        blas, im2col, gemm = addresses(), self.entries["im2col_part"], self.entries["gemm_rows_part"]
        with one_blas_thread():
            for b in range(n):
                for g in range(g_n):
                    if direct:
                        gemm.call([wmat[g], images[b, g], results[b, g], blas], (), True, threads())
                    else:
                        im2col.call([images[b, g], cols], geometry, True)
                        gemm.call([wmat[g], cols, results[b, g], blas], (), True, threads())


@dataclass
class NativeWinograd(Winograd):
    """Winograd with its transforms and 16 products in the native convolution library
    (conv_native.py), split by the C caller's threads: no numba at run time, so the executable
    cache keeps it."""

    entries: dict[str, NativeLibrary] = field(default_factory=dict)

    portable = True

    def __getstate__(self) -> dict:
        return {"entries": self.entries}          # the filter transforms are computed again after loading

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.__post_init__()

    def load(self) -> None:
        for library in self.entries.values():
            library.load()

    def __call__(self, x: np.ndarray, w: np.ndarray, out: np.ndarray) -> None:
        u = self.transformed(w)
        n, c, h, wd = x.shape
        o, tiles = u.shape[1], (h // 2) * (wd // 2)
        v, m = np.empty((16, c, tiles), x.dtype), np.empty((16, o, tiles), x.dtype)
        blas = addresses()
        with one_blas_thread():
            for b in range(n):
                self.entries["winograd_input_part"].call([np.ascontiguousarray(x[b]), v], (), True)
                self.entries["gemms_part"].call([u, v, m, blas], (), True, 16)
                self.entries["winograd_output_part"].call([m, out[b]], (), True)


@dataclass
class ContractionKernel:
    """A contraction group's `run`: the product into its place, then the epilogue (if any)
    reading it as intermediate m0."""

    library: Callable
    operands: Sequence[tuple[int, bool]]     # per contraction operand: (group input, read transposed)
    product_output: int | None               # the output that is the product itself
    in_place: int | None                     # else an output the epilogue updates in place
    shape: tuple                             # else the product's own buffer: its shape and dtype
    dtype: np.dtype
    epilogue: Callable | None

    @property
    def portable(self) -> bool:
        """Whether it runs without compiling anything (the executable cache may keep it)."""
        return all(getattr(part, "portable", False) for part in (self.library, self.epilogue) if part is not None)

    def load(self) -> None:
        """Loads its native parts now (see NativeKernel.load)."""
        for part in (self.library, self.epilogue):
            if part is not None:
                part.load()

    def __call__(self, inputs, outputs, bindings: dict[str, int] | None = None) -> None:
        bindings = bindings or {}
        if self.product_output is not None:
            dst = outputs[self.product_output]
        elif self.in_place is not None:
            dst = outputs[self.in_place]
        else:
            dst = np.empty(evaluate_shape(self.shape, bindings), self.dtype)
        self.library(*(inputs[i].T if transposed else inputs[i] for i, transposed in self.operands), dst)
        if self.epilogue is not None:
            self.epilogue(inputs, outputs, bindings, (dst,))

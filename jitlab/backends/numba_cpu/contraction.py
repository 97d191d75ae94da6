"""A contraction group's run: the library product (BLAS matmul or im2col convolution), then
its generated epilogue. Plain data and numpy here, so that it pickles into the executable cache
and runs in a warm start without numba when its parts are native (backends/native.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ...ir.shapes import evaluate_shape
from ..loopnest import PARALLEL_THRESHOLD
from ..native import NativeLibrary, pool, threads
from .numpy_blas import SMALL_PRODUCT, one_blas_thread


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


def split_matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """out = a @ b (2-D) as one product per thread over row blocks of `a` and `out`, each on one
    BLAS thread: OpenBLAS's own threads yield the core while they wait for each other, which on
    a machine shared with other processes costs a time slice per call (docs/performance.md,
    "ResNet-50 against onnxruntime"); numpy releases the GIL for each block."""
    parts = threads()
    with one_blas_thread() as single:
        if not single or parts == 1 or out.size * a.shape[1] < SMALL_PRODUCT:
            np.matmul(a, b, out=out)
            return
        rows = [(k * a.shape[0] // parts, (k + 1) * a.shape[0] // parts) for k in range(parts)]
        futures = [pool().submit(np.matmul, a[lo:hi], b, out=out[lo:hi]) for lo, hi in rows[1:]]
        np.matmul(a[:rows[0][1]], b, out=out[:rows[0][1]])
        for f in futures:
            f.result()


@dataclass
class Winograd:
    """Winograd F(2x2,3x3) convolution (winograd.py, in numba), the filter's transform cached per
    weight array; runs numba's threads, so the executable cache does not keep it."""

    def __post_init__(self) -> None:
        from .winograd import FilterCache

        self.transformed = FilterCache()

    def load(self) -> None:
        """Nothing to load."""

    def __call__(self, x: np.ndarray, w: np.ndarray, out: np.ndarray) -> None:
        from .library import winograd_into

        winograd_into(x, self.transformed(w), out)


@dataclass
class Conv:
    """NCHW convolution written into `out`: im2col and one BLAS product per image and group. The
    im2col runs natively when `im2col` is given (split over channels across threads), else in
    numba (library.conv2d_into); pads are (top, left, bottom, right)."""

    strides: tuple[int, int]
    pads: tuple[int, int, int, int]
    dilations: tuple[int, int]
    groups: int
    im2col: NativeLibrary | None = None

    @property
    def portable(self) -> bool:
        return self.im2col is not None

    def load(self) -> None:
        if self.im2col is not None:
            self.im2col.load()

    def __call__(self, x: np.ndarray, w: np.ndarray, out: np.ndarray) -> None:
        if self.im2col is None:
            from .library import conv2d_into

            conv2d_into(x, w, out, self.strides, self.pads, self.dilations, self.groups)
            return
        pads = self.pads
        if pads[0] != pads[2] or pads[1] != pads[3]:
            x = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
            pads = (0, 0, 0, 0)
        self._native(np.ascontiguousarray(x), np.ascontiguousarray(w), out, pads)

    def _native(self, x: np.ndarray, w: np.ndarray, out: np.ndarray, pads) -> None:
        n, c, h, wd = x.shape
        o, cg, kh, kw = w.shape
        oh, ow = out.shape[2], out.shape[3]
        g = self.groups
        (sh, sw), (dh, dw) = self.strides, self.dilations
        wmat = w.reshape(g, o // g, cg * kh * kw)
        results = out.reshape(n, g, o // g, oh * ow)
        if kh == kw == sh == sw == 1 and pads[0] == pads[1] == 0:
            images = x.reshape(n, g, cg, h * wd)
            for b in range(n):
                for k in range(g):
                    split_matmul(wmat[k], images[b, k], results[b, k])
            return
        images = x.reshape(n, g, cg, h, wd)
        cols = np.empty((cg * kh * kw, oh * ow), x.dtype)
        extents = (kh, kw, sh, sw, pads[0], pads[1], dh, dw, oh, ow)
        for b in range(n):
            for k in range(g):
                self.im2col.call([images[b, k], cols], extents, cols.size >= _IM2COL_PARALLEL)
                split_matmul(wmat[k], cols, results[b, k])


_IM2COL_PARALLEL = PARALLEL_THRESHOLD      # elements of the column matrix worth splitting over threads


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

"""A contraction group's run: the library product (BLAS matmul or im2col convolution), then
its generated epilogue. Plain data and numpy here, so that it pickles into the executable cache
and runs in a warm start without numba when its parts are native (backends/native.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ...ir.shapes import evaluate_shape
from ..native import NativeLibrary


@dataclass
class Matmul:
    """out = a @ b by numpy's BLAS."""

    portable = True

    def load(self) -> None:
        """Nothing to load."""

    def __call__(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        np.matmul(a, b, out=out)


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
                    np.matmul(wmat[k], images[b, k], out=results[b, k])
            return
        images = x.reshape(n, g, cg, h, wd)
        cols = np.empty((cg * kh * kw, oh * ow), x.dtype)
        extents = (kh, kw, sh, sw, pads[0], pads[1], dh, dw, oh, ow)
        for b in range(n):
            for k in range(g):
                self.im2col.call([images[b, k], cols], extents, cols.size >= _IM2COL_PARALLEL)
                np.matmul(wmat[k], cols, out=results[b, k])


_IM2COL_PARALLEL = 1 << 16      # elements of the column matrix worth splitting over threads


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

"""A contraction group's run: the library product (BLAS matmul, im2col or Winograd convolution),
then its generated epilogue. Plain data here, so that it pickles into the executable cache: a
matmul and a native epilogue (backends/native.py) run in a warm start without numba; a
convolution runs numba's threads (measured faster than splitting its GEMMs over Python threads:
ResNet-50 O1 280 against 310 ms at load 4)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ...ir.shapes import evaluate_shape
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

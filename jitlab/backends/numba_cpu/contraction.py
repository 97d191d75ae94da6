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
from .conv_operands import FilterCache, conv_views
from .numpy_blas import SMALL_PRODUCT, addresses, blas_threads, free_threads, one_blas_thread


@dataclass
class Matmul:
    """out = a @ b by numpy's BLAS: a small product on one BLAS thread (SMALL_PRODUCT), a large one
    on the cores other processes leave free (cores.py)."""

    portable = True

    def load(self) -> None:
        """Nothing to load."""

    def __call__(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        small = out.size * a.shape[-1] < SMALL_PRODUCT      # as blas.gemm does
        with blas_threads(1 if small else free_threads()):
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

    def operands(self, x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
        """x and w C-contiguous, and the scalars conv_views takes after x, w and out; pads that
        differ from side to side are applied to x here (im2col pads both sides of an axis alike)."""
        p = self.pads
        if p[0] != p[2] or p[1] != p[3]:
            x = np.pad(x, ((0, 0), (0, 0), (p[0], p[2]), (p[1], p[3])))
            p = (0, 0, 0, 0)
        return np.ascontiguousarray(x), np.ascontiguousarray(w), (*self.strides, p[0], p[1], *self.dilations,
                                                                    self.groups)

    def __call__(self, x: np.ndarray, w: np.ndarray, out: np.ndarray) -> None:
        from .library import conv2d_into

        x, w, scalars = self.operands(x, w)
        conv2d_into(x, w, out, scalars)


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
        x, w, scalars = self.operands(x, w)
        v = conv_views(x, w, out, *scalars)
        cols = None if v.direct else np.empty((v.filters.shape[2], v.results.shape[3]), x.dtype)
        blas, im2col, gemm = addresses(), self.entries["im2col_part"], self.entries["gemm_rows_part"]
        with one_blas_thread():
            for b in range(x.shape[0]):
                for g in range(self.groups):
                    if v.direct:
                        gemm.call([v.filters[g], v.flat[b, g], v.results[b, g], blas], (), True, threads())
                    else:
                        im2col.call([v.images[b, g], cols], v.geometry, True)
                        gemm.call([v.filters[g], cols, v.results[b, g], blas], (), True, threads())


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

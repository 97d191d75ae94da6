"""NVIDIA's libraries for contractions on cuda: which one a group's contraction runs through, and why.

Matmuls and convolutions go to cuBLAS (`cublasGemmStridedBatchedEx`, reached through CuPy's
bindings) on the executor's own device buffers: the call takes their raw pointers, so nothing is
copied or wrapped, and it queues on the executor's stream (CuPy's `ExternalStream` over numba's
handle), so it orders with the generated kernels and a graph capture records it like them. A
convolution is one GEMM per group over an im2col buffer (im2col.py; CuPy 14 has no cuDNN), a few
samples at a time so the buffer stays small. The compute type goes with each call, never through
CuPy's process-wide setting: float32 stays float32 (`CUBLAS_COMPUTE_32F`) unless the user passed
`allow_tf32=True`.

`select` is the decision: it takes what `probe()` found (CuPy importable, not the simulator), so
tests can hand it any answer and check what is chosen and the reason the report gives; `Cublas`
is the one place cuBLAS is called, so tests can stand a numpy GEMM in for it.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from ...ir.core import Operation
from ...ir.opdef import Trait
from .device import simulator_enabled
from .memory import KeptBuffers

INSTALL = 'pip install "jitlab[cuda]"'
_GEMM_DTYPES = ("float32", "float64")
COLS_BYTES = 64 << 20       # an im2col buffer holds as many samples as fit here (at least one)


@dataclass(frozen=True)
class Libraries:
    """What this process can call: None where a library is usable, else why it is not."""

    cublas: str | None


@dataclass(frozen=True)
class Selection:
    """A contraction's route: `library` ("cublas") or None for the generated kernels, and why."""

    library: str | None
    reason: str


@functools.lru_cache(maxsize=1)
def probe() -> Libraries:
    """The libraries this process can reach (CuPy's cuBLAS on a real GPU)."""
    if simulator_enabled():
        return Libraries(cublas="numba's CUDA simulator has no NVIDIA libraries")
    try:
        import cupy  # noqa: F401
        from cupy.cuda import cublas  # noqa: F401
    except Exception as e:      # not installed, or a CuPy built for another CUDA: any import error
        return Libraries(cublas=f"CuPy is not importable ({type(e).__name__}: {e}); {INSTALL} installs it")
    return Libraries(cublas=None)


def select(group: Operation, con: Operation, libraries: Libraries, allow_tf32: bool) -> Selection:
    """Whether `con`, the contraction of `group`, runs through a library, with the reason."""
    refusal = _gemm_refusal(group, con)
    if refusal is not None:
        return Selection(None, refusal)
    if libraries.cublas is not None:
        return Selection(None, f"cuBLAS is not available: {libraries.cublas}")
    precision = ("TF32 tensor cores allowed (allow_tf32=True)" if allow_tf32
                 else "float32 compute, no TF32" if con.result.type.dtype.name == "float32" else "float64 compute")
    if con.name == "np.conv2d":
        return Selection("cublas", f"cuBLAS GEMM per group over an im2col buffer ({precision})")
    batch = "strided-batched " if con.result.type.rank > 2 else ""
    return Selection("cublas", f"cuBLAS {batch}GEMM on the executor's device buffers ({precision})")


def _gemm_refusal(group: Operation, con: Operation) -> str | None:
    """Why cuBLAS cannot take this matmul as it stands, or None."""
    dtype = con.result.type.dtype.name
    if dtype not in _GEMM_DTYPES or any(v.type.dtype.name != dtype for v in con.operands):
        return f"cuBLAS GEMM here takes float32 or float64 operands of the result's dtype; this one is {dtype}"
    if any(v.owner is not group.body for v in con.operands):
        return "an operand is computed inside the group (a fused prologue), which a library call cannot read"
    if con.name != "np.matmul":
        return None
    a, b = (v.type.shape for v in con.operands)
    batch = tuple(con.result.type.shape[:-2])
    if any(not _stride_batch(s[:-2], batch) for s in (a, b)):
        return "its operands' batch dims broadcast partially, which one strided-batched GEMM cannot express"
    return None


def _stride_batch(shape: tuple, batch: tuple) -> bool:
    """Whether an operand with batch dims `shape` steps through a result batch `batch` at one stride."""
    return all(d == 1 for d in shape) or tuple(shape) == tuple(batch)


class Cublas:
    """cuBLAS's strided-batched GEMM (column-major, `Gemm`'s terms) on device arrays at element offsets."""

    def __init__(self, dtype: np.dtype, allow_tf32: bool):
        from cupy.cuda import cublas, runtime

        self.cuda_dtype = runtime.CUDA_R_32F if dtype == np.float32 else runtime.CUDA_R_64F
        self.compute = (cublas.CUBLAS_COMPUTE_64F if dtype == np.float64
                        else cublas.CUBLAS_COMPUTE_32F_FAST_TF32 if allow_tf32 else cublas.CUBLAS_COMPUTE_32F)
        self.scalars = np.array([1, 0], dtype=dtype)    # alpha, beta: host memory, read when the call is queued
        self.itemsize = np.dtype(dtype).itemsize
        self._streams: dict[int, object] = {}

    def __call__(self, g: Gemm, a, a_offset: int, b, b_offset: int, c, c_offset: int, stream) -> None:
        import cupy
        from cupy.cuda import cublas

        alpha, t, size = self.scalars.ctypes.data, self.cuda_dtype, self.itemsize
        with self._stream(cupy, stream):
            handle = cupy.cuda.get_cublas_handle()
            cublas.setPointerMode(handle, cublas.CUBLAS_POINTER_MODE_HOST)
            # The handle's math mode could let CUBLAS_COMPUTE_32F use TF32 (CUBLAS_TF32_TENSOR_OP_MATH): reset it.
            cublas.setMathMode(handle, cublas.CUBLAS_DEFAULT_MATH)
            cublas.gemmStridedBatchedEx(
                handle, cublas.CUBLAS_OP_N, cublas.CUBLAS_OP_N, g.m, g.n, g.k,
                alpha, _pointer(a) + a_offset * size, t, g.lda, g.stride_a,
                _pointer(b) + b_offset * size, t, g.ldb, g.stride_b,
                alpha + size, _pointer(c) + c_offset * size, t, g.ldc, g.stride_c, g.count,
                self.compute, cublas.CUBLAS_GEMM_DEFAULT)

    def _stream(self, cupy, stream):
        """CuPy's view of the numba stream the call runs on (made once per stream)."""
        handle = _stream_pointer(stream)
        found = self._streams.get(handle)
        if found is None:
            found = self._streams[handle] = cupy.cuda.ExternalStream(handle)
        return found


@dataclass(frozen=True)
class Gemm:
    """cuBLAS's column-major view of a row-major C = A @ B: C^T = B^T A^T, so its "A" is our B.

    m, n, k, leading dims and batch strides are cuBLAS's (elements; a stride of 0 broadcasts)."""

    m: int
    n: int
    k: int
    lda: int
    stride_a: int
    ldb: int
    stride_b: int
    ldc: int
    stride_c: int
    count: int

    @classmethod
    def of(cls, a: tuple, b: tuple, c: tuple) -> Gemm:
        """The GEMM of np.matmul on C-contiguous operands of these shapes."""
        rows, inner = a[-2:]
        cols = b[-1]
        step = lambda shape, size: 0 if math.prod(shape[:-2]) == 1 else size  # noqa: E731
        return cls(cols, rows, inner, cols, step(b, inner * cols), inner, step(a, rows * inner),
                   cols, rows * cols, math.prod(c[:-2]))

    @classmethod
    def conv_group(cls, samples: int, groups: int, out_per_group: int, patch: int, pixels: int) -> Gemm:
        """One group's GEMM over `samples` samples: y[s, group rows] = w[group] @ cols[s, group rows],
        with cols (samples, groups * patch, pixels), w (groups * out_per_group, patch), y (samples, O, pixels)."""
        return cls(pixels, out_per_group, patch, pixels, groups * patch * pixels, patch, 0,
                   pixels, groups * out_per_group * pixels, samples)


class MatmulCall:
    """`run(inputs, outputs, extra, bindings, stream)` for one matmul: outputs[0] = A @ B by cuBLAS."""

    def __init__(self, con: Operation, allow_tf32: bool):
        self.a, self.b = (v.index for v in con.operands)
        self.gemm = Cublas(np.dtype(con.result.type.dtype.name), allow_tf32)
        self._shapes: dict[tuple, Gemm] = {}

    def __call__(self, inputs, outputs, extra, bindings, stream) -> None:
        a, b, c = inputs[self.a], inputs[self.b], outputs[0]
        if c.size == 0:
            return
        if a.shape[len(a.shape) - 1] == 0:      # cuBLAS refuses k = 0 (a leading dim of 0): the sum is empty
            return _zero(c, stream)
        key = (a.shape, b.shape)
        g = self._shapes.get(key) or self._shapes.setdefault(key, Gemm.of(*(tuple(v.shape) for v in (a, b, c))))
        self.gemm(g, b, 0, a, 0, c, 0, stream)


class ConvCall:
    """`run(...)` for one conv2d: im2col into a kept buffer, a few samples at a time, then one GEMM per group."""

    def __init__(self, con: Operation, allow_tf32: bool):
        dtype = np.dtype(con.result.type.dtype.name)
        self.x, self.w = (v.index for v in con.operands)
        out, per_group, kh, kw = (int(d) for d in con.operands[1].type.shape)
        attrs = con.attrs
        self.groups, self.patch = attrs["groups"], per_group * kh * kw
        self.out_per_group = out // self.groups
        self.window = (kh, kw, *attrs["strides"], attrs["pads"][0], attrs["pads"][1], *attrs["dilations"])
        self.pixels = math.prod(int(d) for d in con.result.type.shape[2:])
        sample_bytes = self.groups * self.patch * self.pixels * dtype.itemsize     # 0 for an empty output
        self.chunk = max(1, COLS_BYTES // max(sample_bytes, 1))
        self.gemm = Cublas(dtype, allow_tf32)
        self.kept = KeptBuffers(dtype)      # im2col buffers by shape

    def __call__(self, inputs, outputs, extra, bindings, stream) -> None:
        from .im2col import im2col

        x, w, y = inputs[self.x], inputs[self.w], outputs[0]
        if y.size == 0:
            return
        if self.patch == 0:
            return _zero(y, stream)
        samples = x.shape[0]
        cols = self.kept.get((min(samples, self.chunk), self.groups * self.patch, self.pixels), stream)
        ow = y.shape[3]
        for first in range(0, samples, self.chunk):
            count = min(self.chunk, samples - first)
            im2col(x[first:first + count], cols[:count], self.window, ow, stream)
            for g in range(self.groups):
                rows = g * self.out_per_group
                self.gemm(Gemm.conv_group(count, self.groups, self.out_per_group, self.patch, self.pixels),
                          cols, g * self.patch * self.pixels, w, rows * self.patch,
                          y, (first * self.groups * self.out_per_group + rows) * self.pixels, stream)

def library_call(con: Operation, allow_tf32: bool):
    """The run-time call for a contraction `select` sent to cuBLAS."""
    return MatmulCall(con, allow_tf32) if con.name == "np.matmul" else ConvCall(con, allow_tf32)


def writes_output(group: Operation, con: Operation) -> bool:
    """True when the group is the contraction alone: the library writes the group's output itself."""
    body = [op for op in group.body.ops if not (op.has(Trait.TERMINATOR) or op.has(Trait.CONSTANT))]
    return body == [con] and list(group.body.last_op.operands) == [con.result]


def _zero(array, stream) -> None:
    """Zeros a device array on `stream` (a numba stream: asynchronous, so a capture records it)."""
    from numba.cuda.cudadrv.driver import device_memset

    device_memset(array, 0, array.nbytes, stream=stream)


def _pointer(array) -> int:
    return array.__cuda_array_interface__["data"][0]


def _stream_pointer(stream) -> int:
    """The CUstream handle as an int: 0 (the legacy default stream) for numba's `0` or default stream."""
    return stream if isinstance(stream, int) else int(stream.handle)

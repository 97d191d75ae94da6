"""NVIDIA's libraries for contractions on cuda: which one a group's contraction runs through, and why.

A matmul goes to cuBLAS (`cublasGemmStridedBatchedEx`, reached through CuPy's bindings) on the
executor's own device buffers: the call takes their raw pointers, so nothing is copied or
wrapped, and it queues on the executor's stream (CuPy's `ExternalStream` over numba's handle),
so it orders with the generated kernels and is recorded by a graph capture like them. The
compute type is set per call, never through CuPy's process-wide state: float32 stays float32
(`CUBLAS_COMPUTE_32F`) unless the user passed `allow_tf32=True`.

`select` is the decision: it takes what `probe()` found (CuPy importable, not the simulator), so
tests can hand it any answer and check what is chosen and the reason the report gives.
Convolutions stay generated: CuPy 14 removed its cuDNN bindings, and the report says so.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from ...ir.core import Operation
from ...ir.opdef import Trait
from .device import simulator_enabled

INSTALL = 'pip install "jitlab[cuda]"'
_GEMM_DTYPES = ("float32", "float64")


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
    if con.name != "np.matmul":
        return Selection(None, "convolutions run as generated implicit-GEMM kernels: CuPy 14 removed its "
                               "cuDNN bindings, and an im2col + cuBLAS path is not built")
    refusal = _gemm_refusal(group, con)
    if refusal is not None:
        return Selection(None, refusal)
    if libraries.cublas is not None:
        return Selection(None, f"cuBLAS is not available: {libraries.cublas}")
    precision = ("TF32 tensor cores allowed (allow_tf32=True)" if allow_tf32
                 else "float32 compute, no TF32" if con.result.type.dtype.name == "float32" else "float64 compute")
    batch = "strided-batched " if con.result.type.rank > 2 else ""
    return Selection("cublas", f"cuBLAS {batch}GEMM on the arena's buffers ({precision})")


def _gemm_refusal(group: Operation, con: Operation) -> str | None:
    """Why cuBLAS cannot take this matmul as it stands, or None."""
    dtype = con.result.type.dtype.name
    if dtype not in _GEMM_DTYPES or any(v.type.dtype.name != dtype for v in con.operands):
        return f"cuBLAS GEMM here takes float32 or float64 operands of the result's dtype; this one is {dtype}"
    if any(v.owner is not group.body for v in con.operands):
        return "an operand is computed inside the group (a fused prologue), which a library call cannot read"
    a, b = (v.type.shape for v in con.operands)
    batch = tuple(con.result.type.shape[:-2])
    if any(not _stride_batch(s[:-2], batch) for s in (a, b)):
        return "its operands' batch dims broadcast partially, which one strided-batched GEMM cannot express"
    return None


def _stride_batch(shape: tuple, batch: tuple) -> bool:
    """Whether an operand with batch dims `shape` steps through a result batch `batch` at one stride."""
    return all(d == 1 for d in shape) or tuple(shape) == tuple(batch)


class CublasMatmul:
    """`run(inputs, outputs, extra, bindings, stream)` for one matmul: outputs[0] = A @ B by cuBLAS."""

    def __init__(self, con: Operation, allow_tf32: bool):
        from cupy.cuda import cublas, runtime

        self.a, self.b = (v.index for v in con.operands)
        dtype = np.dtype(con.result.type.dtype.name)
        self.cuda_dtype = runtime.CUDA_R_32F if dtype == np.float32 else runtime.CUDA_R_64F
        self.compute = (cublas.CUBLAS_COMPUTE_64F if dtype == np.float64
                        else cublas.CUBLAS_COMPUTE_32F_FAST_TF32 if allow_tf32 else cublas.CUBLAS_COMPUTE_32F)
        self.scalars = np.array([1, 0], dtype=dtype)    # alpha, beta: host memory read at each call
        self._gemm: dict[tuple, Gemm] = {}
        self._streams: dict[int, object] = {}

    def __call__(self, inputs, outputs, extra, bindings, stream) -> None:
        import cupy
        from cupy.cuda import cublas

        a, b, c = inputs[self.a], inputs[self.b], outputs[0]
        if c.size == 0:
            return
        key = (a.shape, b.shape)
        gemm = self._gemm.get(key) or self._gemm.setdefault(key, Gemm.of(a.shape, b.shape, c.shape))
        alpha, t = self.scalars.ctypes.data, self.cuda_dtype
        with self._stream(cupy, stream):
            cublas.gemmStridedBatchedEx(
                cupy.cuda.get_cublas_handle(), cublas.CUBLAS_OP_N, cublas.CUBLAS_OP_N, gemm.m, gemm.n, gemm.k,
                alpha, _pointer(b), t, gemm.lda, gemm.stride_a, _pointer(a), t, gemm.ldb, gemm.stride_b,
                alpha + self.scalars.itemsize, _pointer(c), t, gemm.ldc, gemm.stride_c, gemm.count,
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
        rows, inner = a[-2:]
        cols = b[-1]
        step = lambda shape, size: 0 if math.prod(shape[:-2]) == 1 else size  # noqa: E731
        return cls(cols, rows, inner, cols, step(b, inner * cols), inner, step(a, rows * inner),
                   cols, rows * cols, math.prod(c[:-2]))


def writes_output(group: Operation, con: Operation) -> bool:
    """True when the group is the contraction alone: the library writes the group's output itself."""
    body = [op for op in group.body.ops if not (op.has(Trait.TERMINATOR) or op.has(Trait.CONSTANT))]
    return body == [con] and list(group.body.last_op.operands) == [con.result]


def _pointer(array) -> int:
    return array.__cuda_array_interface__["data"][0]


def _stream_pointer(stream) -> int:
    """The CUstream handle as an int: 0 (the legacy default stream) for numba's `0` or default stream."""
    return stream if isinstance(stream, int) else int(stream.handle)

"""What the host runners share (the O1 executor, the CPU backend's O2 runner): output buffers
recycled across calls, library results detached from their operands, whether a donated array
may take its output this call, and the error that names a buffer the system would not give."""

from __future__ import annotations

import sys
from collections.abc import Container, Sequence

import numpy as np

from ..dialects.reference import Interpreter
from ..ir.core import Value
from ..ir.shapes import evaluate_shape
from ..report import DonationRecord
from ..units import format_bytes


class BufferAllocationError(MemoryError):
    """A buffer the system would not give (numpy's MemoryError), named: the Executable turns it into
    an OutOfMemoryError with the planned peak."""

    def __init__(self, buffer: str, nbytes: int, error: MemoryError):
        super().__init__(f"{buffer} ({format_bytes(nbytes)}): {error}")
        self.buffer, self.nbytes = buffer, nbytes


def empty(shape: tuple[int, ...], dtype: np.dtype, buffer: str) -> np.ndarray:
    """np.empty, its failure a BufferAllocationError naming `buffer`."""
    try:
        return np.empty(shape, dtype)
    except MemoryError as e:
        raise BufferAllocationError(buffer, int(np.prod(shape, dtype=np.float64)) * np.dtype(dtype).itemsize, e) from e


class OutputBuffers:
    """Output buffers of one step, recycled across calls when no one else holds them."""

    def __init__(self, values: Sequence[Value]):
        self.types = [v.type for v in values]
        self.names = [f"output %{v.name}" for v in values]
        self.static = [t.shape if t.is_static else None for t in self.types]
        self.kept: list[np.ndarray | None] = [None] * len(values)
        self.unshared = 0         # the count getrefcount gives here when only self.kept holds a buffer

    def get(self, bindings: dict[str, int], skip: Container[int] = ()) -> list[np.ndarray | None]:
        """A buffer per value, None for those in `skip` (written elsewhere this call: their kept
        buffer is let go, so a donated output does not hold a second copy of its input)."""
        out = []
        for k, t in enumerate(self.types):
            if k in skip:
                self.kept[k] = None
                out.append(None)
                continue
            shape = self.static[k] or evaluate_shape(t.shape, bindings)
            buf = self.kept[k]
            # Any reference beyond the list, this local and getrefcount's argument is a holder
            # outside: a result the user kept, or a view of one. The count is measured, not
            # assumed, since what the interpreter counts for locals differs between versions.
            if buf is None or buf.shape != shape or sys.getrefcount(buf) > self.unshared:
                buf = empty(shape, t.dtype, self.names[k])
                self.kept[k] = buf
                self.unshared = sys.getrefcount(buf)
            out.append(buf)
        return out


def detached(value: np.ndarray, args: Sequence[np.ndarray]) -> np.ndarray:
    """A numpy library result as the plan sees it: its own memory. numpy may answer with a
    view of an operand (split, transpose), and the plan hands an operand's bytes (a pool or
    arena buffer) to other values once it dies."""
    if any(np.may_share_memory(value, a) for a in args):
        return np.array(value, order="C")
    return writable(value)


def writable(value: np.ndarray) -> np.ndarray:
    """A numpy result as kernels take it: C-contiguous and writable (a library op may return
    a read-only view of a constant, or a transposed view)."""
    return value if value.flags.c_contiguous and value.flags.writeable else np.array(value, order="C")


def safe_to_donate(arrays: Sequence[np.ndarray], d: DonationRecord) -> bool:
    """The donated array is a plain writable array and backs no other argument."""
    a = arrays[d.input]
    return (type(a) is np.ndarray and a.flags.c_contiguous and a.flags.writeable
            and not any(j != d.input and np.may_share_memory(a, b) for j, b in enumerate(arrays)))


class LibraryKernel:
    """A group run with numpy op by op, its results copied into the outputs (a Kernel's `run`,
    where a generated loop nest would not pay)."""

    portable = True             # runs without compiling anything: the executable cache may keep it

    def __init__(self, block):
        self.block = block

    def __call__(self, inputs, outputs, bindings: dict[str, int] | None = None) -> None:
        results = Interpreter(None, bindings or {}, check=False).run_block(self.block, list(inputs))
        for out, value in zip(outputs, results):
            np.copyto(out, value)

    def load(self) -> None:
        """Nothing to load (see NativeKernel.load)."""

"""The memory pool of dynamic mode (O1): numpy arrays carved out of a few large chunks.

`PoolCore` (passes/pool_core.py) does the bookkeeping on offsets only, so memory planning
and the dry run can replay it; `MemoryPool` backs the core with numpy chunks and hands out arrays.

Two kinds of allocation:
- `allocate` gives a temporary; the executor returns it with `free` after its last use.
- `allocate_output` gives a result for the caller. The caller may keep it (or views of
  it) as long as it likes: the block returns to the pool only when the last numpy array
  over it is garbage, so a result is never overwritten under the caller's feet, and the
  next call can reuse memory that is already paged in instead of faulting in fresh pages.

An executor frees temporaries where the program's mem.free ops say and calls `reset()`
after each call (also a failed one): that returns whatever is left and merges the chunks
the first call grew into one chunk as large as its peak, so later calls take nothing from
the system. Live blocks are never moved (arrays point into them): defragmentation gives
back chunks that are entirely free and replaces them by one chunk large enough.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence

import numpy as np

from ..passes.pool_core import DEFAULT_ALIGNMENT, DEFAULT_CHUNK_BYTES, PAGE, Block, PoolCore, PoolError, PoolStats


class _Lease:
    """Owns one result block: arrays over it keep it alive, and with it the chunk's memory."""

    __slots__ = ("__array_interface__", "chunk_memory", "__weakref__")


class MemoryPool:
    """Hands out numpy arrays from pooled chunks; see the module docstring for the two kinds."""

    def __init__(self, chunk_bytes: int = DEFAULT_CHUNK_BYTES, alignment: int = DEFAULT_ALIGNMENT,
                 reserve: int = 0):
        """`reserve`: the first chunk's size, a dynamic plan's first_chunk_bytes."""
        self.core = PoolCore(chunk_bytes, alignment, on_grow=self._new_chunk, on_release=self._drop_chunk)
        self._memory: dict[int, np.ndarray] = {}
        self._blocks: dict[int, tuple[Block, np.ndarray]] = {}   # id of a temporary -> its block and itself
        self._released: list[Block] = []              # output blocks whose last array died
        self._held: dict[tuple[int, int], Block] = {}
        self.reserve(reserve)

    def reserve(self, nbytes: int) -> None:
        """Takes a first chunk of `nbytes` now, unless the pool already has one."""
        self.core.reserve(nbytes)

    def allocate(self, shape: Sequence[int], dtype, alignment: int | None = None) -> np.ndarray:
        """A temporary array; give it back with `free` when it is dead."""
        block, array = self._carve(shape, dtype, alignment)
        self._blocks[id(array)] = (block, array)
        return array

    def allocate_output(self, shape: Sequence[int], dtype, alignment: int | None = None) -> np.ndarray:
        """An array for the caller: its block returns to the pool when the last array over it dies."""
        self._collect()
        dtype = np.dtype(dtype)
        block = self.core.allocate(_nbytes(shape, dtype), alignment)
        lease = _Lease()
        lease.chunk_memory = self._memory[block.chunk]
        address = lease.chunk_memory.__array_interface__["data"][0] + block.start
        lease.__array_interface__ = {"shape": tuple(int(d) for d in shape), "typestr": dtype.str, "version": 3,
                                     "data": (address, False)}
        self._held[(block.chunk, block.start)] = block
        weakref.finalize(lease, self._released.append, block)
        return np.asarray(lease)

    def free(self, array: np.ndarray) -> None:
        """Returns a temporary to the pool: the very array `allocate` gave (not a view of it)."""
        self._collect()
        entry = self._blocks.pop(id(array), None)
        if entry is None or entry[1] is not array:
            raise PoolError("free of an array this pool did not hand out as a temporary, or freed twice")
        self.core.free(entry[0].chunk, entry[0].start)

    def reset(self) -> None:
        """Frees every temporary (after a failed run, say) and merges the chunks into one when
        nothing is in use; results the caller holds stay valid."""
        self._collect()
        for block, _ in self._blocks.values():
            self.core.free(block.chunk, block.start)
        self._blocks.clear()
        self.core.consolidate()

    def stats(self) -> PoolStats:
        self._collect()
        return self.core.stats(held=sum(b.size for b in self._held.values()))

    def _carve(self, shape, dtype, alignment) -> tuple[Block, np.ndarray]:
        self._collect()
        dtype = np.dtype(dtype)
        block = self.core.allocate(_nbytes(shape, dtype), alignment)
        memory = self._memory[block.chunk][block.start:block.start + block.requested]
        return block, memory.view(dtype).reshape(tuple(shape))

    def _collect(self) -> None:
        """Frees output blocks whose arrays died (finalizers only queue them: they may run at
        any allocation, even in the middle of the pool's own bookkeeping)."""
        while self._released:
            block = self._released.pop()
            del self._held[(block.chunk, block.start)]
            self.core.free(block.chunk, block.start)

    def _new_chunk(self, chunk: int, size: int) -> None:
        raw = np.empty(size + PAGE, dtype=np.uint8)
        skip = -raw.ctypes.data % PAGE
        self._memory[chunk] = raw[skip:skip + size]

    def _drop_chunk(self, chunk: int) -> None:
        del self._memory[chunk]


def _nbytes(shape: Sequence[int], dtype: np.dtype) -> int:
    count = 1
    for d in shape:
        count *= int(d)
    return count * dtype.itemsize

"""The memory pool's bookkeeping on offsets: best fit over a free list, splitting, coalescing
on free, geometric growth by chunks, defragmentation. `PoolCore` never touches memory, which
lets memory planning and the dry run replay an execution's allocations for shapes that could
never be allocated; runtime/pool.py's `MemoryPool` backs it with numpy chunks.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import NamedTuple

from ..errors import JitlabError

DEFAULT_ALIGNMENT = 64
DEFAULT_CHUNK_BYTES = 1 << 20
PAGE = 4096            # chunk bases are page aligned, so any alignment up to a page holds for addresses


class PoolError(JitlabError):
    """Misuse of the memory pool: a free of a foreign array, a double free, a bad alignment."""


def round_up(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment


@dataclass
class PoolStats:
    """The pool's state at one moment, for the memory timeline."""

    in_use: int            # bytes in blocks handed out (rounded to the alignment)
    requested: int         # bytes the live blocks were asked for
    reserved: int          # bytes in chunks taken from the system
    peak_in_use: int
    peak_reserved: int
    largest_free: int
    fragmentation: float   # 1 - largest free block / all free bytes (0 when nothing is free)
    blocks: int            # live blocks
    held: int              # bytes of results the caller still holds
    chunks: int
    system_allocs: int     # chunks ever taken from the system
    system_frees: int      # chunks ever given back
    defrags: int           # times fragmented free space was consolidated

    def as_dict(self) -> dict:
        return asdict(self)


class Block(NamedTuple):
    """A handed-out block: chunk id, offset in the chunk, rounded size and requested size."""

    chunk: int
    start: int
    size: int
    requested: int


class PoolCore:
    """Best-fit allocation over chunks of address space, with nothing behind the addresses."""

    def __init__(self, chunk_bytes: int = DEFAULT_CHUNK_BYTES, alignment: int = DEFAULT_ALIGNMENT,
                 on_grow: Callable[[int, int], None] | None = None, on_release: Callable[[int], None] | None = None):
        _check_alignment(alignment)
        self.chunk_bytes, self.alignment = chunk_bytes, alignment
        self.on_grow = on_grow or (lambda chunk, size: None)        # called with each new chunk's id and size
        self.on_release = on_release or (lambda chunk: None)        # called with each chunk given back
        self.chunks: dict[int, int] = {}                      # chunk id -> size
        self._ids = itertools.count()
        self._by_size: list[tuple[int, int, int]] = []        # free (size, chunk, start), sorted
        self._free_start: dict[tuple[int, int], int] = {}     # (chunk, start) -> size
        self._free_end: dict[tuple[int, int], int] = {}       # (chunk, end) -> start
        self.used: dict[tuple[int, int], Block] = {}
        self.in_use = self.requested = self.peak_in_use = self.peak_reserved = 0
        self.system_allocs = self.system_frees = self.defrags = 0

    @property
    def reserved(self) -> int:
        return sum(self.chunks.values())

    @property
    def free_bytes(self) -> int:
        return self.reserved - self.in_use

    def allocate(self, nbytes: int, alignment: int | None = None) -> Block:
        """A block of at least `nbytes` (at least one alignment unit) at an aligned offset."""
        align = self.alignment if alignment is None else alignment
        _check_alignment(align)
        align = max(align, self.alignment)
        size = round_up(max(nbytes, 1), self.alignment)
        found = self._best_fit(size, align)
        if found is None:
            released = self._release_empty_chunks() if self.free_bytes >= size else 0
            self.defrags += bool(released)
            self._grow(max(size + align - self.alignment, released))
            found = self._best_fit(size, align)
        return self._take(found, size, align, nbytes)

    def free(self, chunk: int, start: int) -> None:
        block = self.used.pop((chunk, start), None)
        if block is None:
            raise PoolError(f"no live block at offset {start} of chunk {chunk} (freed twice?)")
        self.in_use -= block.size
        self.requested -= block.requested
        self._add_free(chunk, start, block.size)

    def reserve(self, nbytes: int) -> None:
        """Takes a first chunk of `nbytes` (rounded to pages) before anything is allocated."""
        if nbytes > 0 and not self.chunks:
            self._grow(nbytes)

    def consolidate(self) -> None:
        """With nothing in use, replaces several chunks by one as large as the peak in use, so
        the next run of the same program fits in one chunk without growing."""
        if self.used or len(self.chunks) <= 1:
            return
        self._release_empty_chunks()
        self._grow(round_up(self.peak_in_use, PAGE))
        self.defrags += 1

    def stats(self, held: int = 0) -> PoolStats:
        free = self.free_bytes
        largest = self._by_size[-1][0] if self._by_size else 0
        return PoolStats(self.in_use, self.requested, self.reserved, self.peak_in_use, self.peak_reserved,
                         largest, 1 - largest / free if free else 0.0, len(self.used), held, len(self.chunks),
                         self.system_allocs, self.system_frees, self.defrags)

    # -- internals -----------------------------------------------------------------
    def _best_fit(self, size: int, align: int) -> tuple[int, int, int] | None:
        """The smallest free block that holds `size` bytes at an `align`-ed offset."""
        i = bisect.bisect_left(self._by_size, (size, -1, -1))
        for entry in itertools.islice(self._by_size, i, None):
            fsize, _, start = entry
            if round_up(start, align) - start + size <= fsize:
                return entry
        return None

    def _take(self, entry: tuple[int, int, int], size: int, align: int, nbytes: int) -> Block:
        fsize, chunk, start = entry
        self._remove_free(chunk, start, fsize)
        begin = round_up(start, align)
        if begin > start:
            self._add_free(chunk, start, begin - start)
        if begin + size < start + fsize:
            self._add_free(chunk, begin + size, start + fsize - begin - size)
        block = Block(chunk, begin, size, nbytes)
        self.used[(chunk, begin)] = block
        self.in_use += size
        self.requested += nbytes
        self.peak_in_use = max(self.peak_in_use, self.in_use)
        return block

    def _grow(self, size: int) -> int:
        # Growth is geometric up to chunk_bytes (each new chunk at least what is reserved so
        # far), so a small program reserves about what it uses, and a large one takes a few
        # system allocations on its first call (consolidate() merges them afterwards).
        chunk = next(self._ids)
        size = round_up(max(size, min(self.chunk_bytes, self.reserved)), PAGE)
        self.on_grow(chunk, size)       # first: memory the system refused leaves no chunk behind
        self.chunks[chunk] = size
        self.system_allocs += 1
        self.peak_reserved = max(self.peak_reserved, self.reserved)
        self._add_free(chunk, 0, size)
        return chunk

    def _release_empty_chunks(self) -> int:
        empty = [c for c, size in self.chunks.items() if self._free_start.get((c, 0)) == size]
        released = 0
        for c in empty:
            self._remove_free(c, 0, self.chunks[c])
            released += self.chunks.pop(c)
            self.system_frees += 1
            self.on_release(c)
        return released

    def _add_free(self, chunk: int, start: int, size: int) -> None:
        end = start + size
        right = self._free_start.get((chunk, end))
        if right is not None:
            self._remove_free(chunk, end, right)
            end += right
        left = self._free_end.get((chunk, start))
        if left is not None:
            self._remove_free(chunk, left, start - left)
            start = left
        self._free_start[(chunk, start)] = end - start
        self._free_end[(chunk, end)] = start
        bisect.insort(self._by_size, (end - start, chunk, start))

    def _remove_free(self, chunk: int, start: int, size: int) -> None:
        del self._free_start[(chunk, start)]
        del self._free_end[(chunk, start + size)]
        i = bisect.bisect_left(self._by_size, (size, chunk, start))
        del self._by_size[i]

    def free_blocks(self) -> list[tuple[int, int, int]]:
        """Free (chunk, start, size) blocks, for checks and displays."""
        return sorted((c, s, size) for (c, s), size in self._free_start.items())


def _check_alignment(alignment: int) -> None:
    if alignment < 1 or alignment & (alignment - 1) or alignment > PAGE:
        raise PoolError(f"alignment must be a power of two up to {PAGE} bytes, got {alignment}")

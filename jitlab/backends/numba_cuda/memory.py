"""Device memory for the CUDA executor: where each buffer comes from, and the budget check.

The seam is `Allocator.get(slot, shape, dtype, stream)`. Today buffers are allocated
one per value (`PerBuffer`) and kept across calls, reused only when no one outside the
executor holds them (a result the user keeps is never overwritten). A static memory
plan (one arena, buffers at offsets) plugs in as `Arena`: one device allocation, each
buffer a view at its planned offset. The dynamic pool (runtime/pool.py, another branch)
would plug in the same way, carving views out of device chunks instead of numpy ones.

The budget check runs before anything is allocated: the bytes the executor will hold
on the device (inputs, weights, every buffer) against `memory_limit` and the device's
free memory.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from ...errors import OutOfMemoryError
from ...report import MemoryPlan
from ...units import format_bytes
from . import device


class PerBuffer:
    """One device allocation per value, kept across calls while nobody else holds it.

    A holder may have the buffer itself or a view of it: numba's views share the buffer's
    memory object (`gpu_data`; the simulator's share its numpy array), so both reference
    counts are compared with what they were when the buffer was made."""

    def __init__(self, cuda):
        self.cuda = cuda
        self.kept: dict[int, list] = {}      # slot -> [buffer, reference counts when made]
        self.allocations = 0

    def get(self, slot: int, shape: tuple[int, ...], dtype: np.dtype, stream) -> Any:
        entry = self.kept.get(slot)
        if entry is None or entry[0].shape != shape or _held(entry):
            entry = self.kept[slot] = [self.cuda.device_array(shape, dtype, stream=stream), None]
            entry[1] = _refs(entry)
            self.allocations += 1
        return entry[0]


def _owner(buf) -> Any:
    """The object every view of `buf` keeps alive."""
    for name in ("gpu_data", "_ary"):
        owner = getattr(buf, name, None)
        if owner is not None:
            return owner
    return buf


def _refs(entry: list) -> tuple[int, int]:
    buf = entry[0]
    return sys.getrefcount(buf), sys.getrefcount(_owner(buf))


def _held(entry: list) -> bool:
    """True when something outside the allocator refers to the buffer or to a view of it."""
    return any(now > then for now, then in zip(_refs(entry), entry[1]))


class Arena:
    """A static plan's arena: one device allocation; each buffer a view at its offset.

    Buffers sharing an offset must not be live at once on different streams, so the
    executor runs an arena-planned program on one stream until plans know of streams.
    A temporary the plan lodges in an output's bytes (region = that output) is not placed
    here: its offset counts from the output, which is allocated on its own, so it gets its
    own allocation instead."""

    def __init__(self, cuda, plan: MemoryPlan, slot_names: dict[int, str]):
        self.offsets = {b.name: b.offset for b in plan.buffers
                        if b.offset is not None and b.region in (None, "arena")}
        self.names = slot_names
        self.base = cuda.device_array(max(plan.peak_bytes, 1), np.uint8)

    def covers(self, slot: int) -> bool:
        return self.names.get(slot) in self.offsets

    def get(self, slot: int, shape: tuple[int, ...], dtype: np.dtype, stream) -> Any:
        offset = self.offsets[self.names[slot]]
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        return self.base[offset:offset + nbytes].view(dtype).reshape(shape)


class KeptBuffers:
    """Device buffers of one kind by shape, kept across calls (launches on one stream are ordered, so
    reuse is safe): at most `limit` shapes, besides those a captured graph recorded (`pin_all`), whose
    addresses must outlive the graph."""

    def __init__(self, dtype, limit: int = 8):
        self.dtype, self.limit = np.dtype(dtype), limit
        self.buffers: dict[tuple[int, ...], Any] = {}
        self.pinned: set[tuple[int, ...]] = set()

    def get(self, shape: tuple[int, ...], stream) -> Any:
        buffer = self.buffers.get(shape)
        if buffer is None:
            unpinned = [s for s in self.buffers if s not in self.pinned]
            if len(unpinned) >= self.limit:
                del self.buffers[unpinned[0]]
            buffer = self.buffers[shape] = device.cuda().device_array(shape, self.dtype, stream=stream)
        return buffer

    def pin_all(self) -> None:
        """Keeps every buffer held now for good: a graph captured just now may have recorded any of them."""
        self.pinned |= set(self.buffers)


def check_budget(needs: list[tuple[str, int]], limit: int | None, free: float) -> None:
    """Raises OutOfMemoryError when the named byte counts exceed the limit or the free memory."""
    total = sum(n for _, n in needs)
    budget = min(limit if limit is not None else float("inf"), free)
    if total <= budget:
        return
    largest = ", ".join(f"{name} {format_bytes(n)}" for name, n in sorted(needs, key=lambda x: -x[1])[:5])
    source = (f"memory_limit={format_bytes(limit)}" if limit is not None and limit <= free
              else f"the device has {format_bytes(free)} free")
    raise OutOfMemoryError(f"the program needs {format_bytes(total)} of device memory (inputs, weights and one "
                           f"buffer per value) but {source}; largest tensors: {largest}")

"""Interval packing for the static memory plan (O2, as MindSpore's SOMAS): every buffer gets
an offset in one arena so that no two buffers live at the same step overlap.

A heuristic is an order in which to place the buffers and a rule for which gap to take
among those left by already-placed buffers whose lifetimes overlap: the lowest that fits
(first fit) or the smallest that fits (best fit). Several are tried; the smallest arena wins.

Outputs live outside the arena (the caller keeps them), but their buffers exist from the
start of the call: a temporary that dies before an output is written may borrow that
output's memory ("hosts"), as XLA's buffer assignment lets temporaries share an output's
allocation. Without that, every output would add its whole size on top of the arena.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Interval:
    """A buffer to place: its size (already aligned) and its first and last step, inclusive."""

    key: int
    size: int
    first: int
    last: int


@dataclass(frozen=True)
class Heuristic:
    """A placement order (a sort key; smallest first) and a gap rule."""

    key: Callable[[Interval], tuple]
    best_fit: bool


HEURISTICS: dict[str, Heuristic] = {
    "greedy-by-size": Heuristic(lambda b: (-b.size, b.first, b.key), best_fit=False),
    "best-fit-by-size": Heuristic(lambda b: (-b.size, b.first, b.key), best_fit=True),
    "greedy-by-lifetime": Heuristic(lambda b: (b.first - b.last, -b.size, b.key), best_fit=False),
    "greedy-by-area": Heuristic(lambda b: (-b.size * (b.last - b.first + 1), b.key), best_fit=False),
    "best-fit-by-first-step": Heuristic(lambda b: (b.first, -b.size, b.key), best_fit=True),
}


def arena_lower_bound(items: Sequence[Interval], steps: int) -> int:
    """The largest total size of buffers live at one step: no arena can be smaller."""
    delta = [0] * (steps + 1)
    for b in items:
        delta[b.first] += b.size
        delta[b.last + 1] -= b.size
    best = total = 0
    for d in delta:
        total += d
        best = max(best, total)
    return best


@dataclass(frozen=True)
class Host:
    """An output buffer: allocated when the call starts, it can hold temporaries that die
    before the step that writes the output (`first`)."""

    key: int
    size: int
    first: int


class _Region:
    """Buffers placed in one address range (the arena, or one host of bounded size)."""

    def __init__(self, capacity: int | None, n: int):
        self.capacity = capacity
        self.firsts, self.lasts = np.empty(n, np.int64), np.empty(n, np.int64)
        self.offsets, self.sizes = np.empty(n, np.int64), np.empty(n, np.int64)
        self.count = 0

    def fit(self, b: Interval, best_fit: bool) -> int | None:
        """Where `b` would go (None: it does not fit under the capacity)."""
        k = self.count
        live = np.nonzero((self.firsts[:k] <= b.last) & (self.lasts[:k] >= b.first))[0]
        return _choose_gap(self.offsets[live], self.sizes[live], b.size, best_fit, self.capacity)

    def place(self, b: Interval, offset: int) -> None:
        k = self.count
        self.firsts[k], self.lasts[k], self.offsets[k], self.sizes[k] = b.first, b.last, offset, b.size
        self.count += 1


def pack(items: Sequence[Interval], heuristic: Heuristic, hosts: Sequence[Host] = ()
         ) -> tuple[dict[int, tuple[int | None, int]], int]:
    """(host key or None for the arena, offset) for each of `items`, placed in the heuristic's
    order (in the smallest host that takes it, else in the arena), and the arena size needed."""
    arena = _Region(None, len(items))
    regions = sorted(((h, _Region(h.size, len(items))) for h in hosts), key=lambda hr: (hr[0].size, hr[0].key))
    result: dict[int, tuple[int | None, int]] = {}
    for b in sorted(items, key=heuristic.key):
        if b.size == 0:
            result[b.key] = (None, 0)
            continue
        result[b.key] = _place_in_host(b, regions, heuristic.best_fit) or (None, arena.fit(b, heuristic.best_fit))
        if result[b.key][0] is None:
            arena.place(b, result[b.key][1])
    size = max((int(o + s) for o, s in zip(arena.offsets[:arena.count], arena.sizes[:arena.count])), default=0)
    return result, size


def _place_in_host(b: Interval, regions, best_fit: bool) -> tuple[int, int] | None:
    for host, region in regions:
        if b.last < host.first and b.size <= host.size:
            offset = region.fit(b, best_fit)
            if offset is not None:
                region.place(b, offset)
                return host.key, offset
    return None


def _choose_gap(offsets: np.ndarray, sizes: np.ndarray, size: int, best_fit: bool,
                capacity: int | None = None) -> int | None:
    """The offset of the first (or smallest) gap of at least `size` between the given blocks,
    below `capacity` when there is one (None if no gap fits)."""
    order = np.argsort(offsets, kind="stable")
    cursor, best, best_gap = 0, None, None
    for off, sz in zip(offsets[order].tolist(), sizes[order].tolist()):
        gap = off - cursor
        if gap >= size and (best_gap is None or gap < best_gap):
            if not best_fit:
                return cursor
            best, best_gap = cursor, gap
        cursor = max(cursor, off + sz)
    if best is not None:
        return best
    return cursor if capacity is None or cursor + size <= capacity else None


def best_packing(items: Sequence[Interval], hosts: Sequence[Host] = ()
                 ) -> tuple[str, dict[int, tuple[int | None, int]], int, dict[str, int]]:
    """Tries every heuristic; returns the winner's name, placements and arena size, and every arena size."""
    results = {name: pack(items, h, hosts) for name, h in HEURISTICS.items()}
    sizes = {name: arena for name, (_, arena) in results.items()}
    winner = min(HEURISTICS, key=sizes.__getitem__)
    return winner, results[winner][0], sizes[winner], sizes

"""The memory pool: best fit with split and coalescing, growth by chunks, defragmentation,
results that stay valid while the caller holds them, and statistics; checked by a
hypothesis state machine that fills every live array with its own pattern."""

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from jitlab.passes.pool_core import PAGE, PoolCore, PoolError
from jitlab.runtime.pool import MemoryPool


def address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def check_core(core: PoolCore) -> None:
    """Blocks tile every chunk exactly, free neighbours are merged, and the counters add up."""
    per_chunk: dict[int, list[tuple[int, int, str]]] = {c: [] for c in core.chunks}
    for c, start, size in core.free_blocks():
        per_chunk[c].append((start, size, "free"))
    for (c, start), block in core.used.items():
        per_chunk[c].append((start, block.size, "used"))
        assert start % core.alignment == 0 and block.size % core.alignment == 0
        assert block.requested <= block.size
    for c, blocks in per_chunk.items():
        blocks.sort()
        cursor = 0
        for (start, size, kind), nxt in zip(blocks, blocks[1:] + [None]):
            assert start >= cursor, "a block overlaps the one before it"
            cursor = start + size
            assert not (kind == "free" and nxt is not None and nxt[2] == "free" and nxt[0] == cursor), \
                "two free neighbours were not coalesced"
        assert blocks and sum(size for _, size, _ in blocks) == core.chunks[c] == cursor
    assert core.in_use == sum(b.size for b in core.used.values())
    assert core.requested == sum(b.requested for b in core.used.values())
    assert core.reserved == sum(core.chunks.values()) and core.peak_reserved >= core.reserved
    assert core.peak_in_use >= core.in_use
    assert core.system_allocs - core.system_frees == len(core.chunks)


class PoolMachine(RuleBasedStateMachine):
    """Random allocations, frees, results kept and dropped, and resets."""

    def __init__(self):
        super().__init__()
        self.pool = MemoryPool(chunk_bytes=4 * PAGE)
        self.temps: list[tuple[np.ndarray, int]] = []
        self.outputs: list[tuple[np.ndarray, int]] = []
        self.views: list[tuple[np.ndarray, int]] = []
        self.stamp = 0

    def _fill(self, a: np.ndarray) -> int:
        self.stamp += 1
        a.reshape(-1)[...] = self.stamp
        return self.stamp

    @rule(n=st.integers(0, 3000), dtype=st.sampled_from([np.uint8, np.float32, np.float64]),
          alignment=st.sampled_from([None, 64, 256, PAGE]))
    def allocate(self, n, dtype, alignment):
        a = self.pool.allocate((n,), dtype, alignment)
        assert a.shape == (n,) and a.dtype == dtype and a.flags.c_contiguous and a.flags.writeable
        assert address(a) % (alignment or 64) == 0
        self.temps.append((a, self._fill(a)))

    @rule(rows=st.integers(0, 40), cols=st.integers(1, 40))
    def allocate_output(self, rows, cols):
        a = self.pool.allocate_output((rows, cols), np.float32)
        assert a.shape == (rows, cols) and address(a) % 64 == 0 and a.flags.writeable
        self.outputs.append((a, self._fill(a)))

    @precondition(lambda self: self.temps)
    @rule(i=st.integers(0, 100))
    def free(self, i):
        a, _ = self.temps.pop(i % len(self.temps))
        self.pool.free(a)

    @precondition(lambda self: self.outputs)
    @rule(i=st.integers(0, 100), keep_view=st.booleans())
    def drop_output(self, i, keep_view):
        a, stamp = self.outputs.pop(i % len(self.outputs))
        if keep_view and a.size:
            self.views.append((a[a.shape[0] // 2:], stamp))   # a view keeps the block alive

    @precondition(lambda self: self.views)
    @rule()
    def drop_view(self):
        self.views.pop()

    @rule()
    def reset(self):
        self.pool.reset()
        self.temps.clear()

    @invariant()
    def arrays_keep_their_contents(self):
        for a, stamp in self.temps + self.outputs + self.views:
            assert (a == stamp).all(), "a live array was overwritten: two blocks overlap"

    @invariant()
    def bookkeeping_is_consistent(self):
        stats = self.pool.stats()
        check_core(self.pool.core)
        assert stats.blocks == len(self.pool.core.used)
        assert stats.held <= stats.in_use <= stats.reserved
        assert 0.0 <= stats.fragmentation < 1.0
        assert stats.largest_free <= stats.reserved - stats.in_use

    def teardown(self):
        for a, _ in self.temps:
            self.pool.free(a)
        self.temps.clear()
        self.outputs.clear()
        self.views.clear()
        stats = self.pool.stats()
        assert stats.in_use == stats.requested == stats.held == stats.blocks == 0, "not everything came back"
        assert all(size == self.pool.core.chunks[c] for c, _, size in self.pool.core.free_blocks())


TestPool = PoolMachine.TestCase


def test_best_fit_takes_the_smallest_hole_and_splits_it():
    core = PoolCore(chunk_bytes=PAGE, alignment=64)
    blocks = [core.allocate(n) for n in (256, 64, 128, 64, 512, 64)]
    core.free(blocks[0].chunk, blocks[0].start)      # a 256-byte hole
    core.free(blocks[2].chunk, blocks[2].start)      # a 128-byte hole
    got = core.allocate(100)                         # fits both: best fit picks the 128 one
    assert (got.start, got.size) == (blocks[2].start, 128)
    got = core.allocate(64)                          # splits the 256 hole, leaving 192 behind it
    assert got.start == blocks[0].start
    assert (0, blocks[0].start + 64, 192) in core.free_blocks()
    check_core(core)


def test_free_coalesces_with_both_neighbours():
    core = PoolCore(chunk_bytes=PAGE, alignment=64)
    a, b, c = core.allocate(64), core.allocate(64), core.allocate(64)
    core.free(a.chunk, a.start)
    core.free(c.chunk, c.start)
    core.free(b.chunk, b.start)
    assert core.free_blocks() == [(0, 0, PAGE)]


def test_growth_by_chunks_and_defragmentation_of_empty_chunks():
    core = PoolCore(chunk_bytes=PAGE, alignment=64)
    first = [core.allocate(PAGE // 2) for _ in range(2)]       # fills chunk 0
    second = [core.allocate(PAGE // 2) for _ in range(2)]      # grows chunk 1
    assert core.system_allocs == 2 and core.reserved == 2 * PAGE
    core.free(first[0].chunk, first[0].start)
    for b in second:
        core.free(b.chunk, b.start)
    # 1.5 pages free, split between a half-page hole and an empty chunk: 1.25 pages fit in neither
    big = core.allocate(PAGE + PAGE // 4)
    assert core.defrags == 1 and core.system_frees == 1, "the empty chunk should be given back first"
    assert core.chunks == {0: PAGE, big.chunk: 2 * PAGE}
    check_core(core)


def test_consolidate_merges_chunks_to_the_peak_when_idle():
    core = PoolCore(chunk_bytes=PAGE, alignment=64)
    blocks = [core.allocate(PAGE) for _ in range(3)]
    for b in blocks:
        core.free(b.chunk, b.start)
    core.consolidate()
    assert list(core.chunks.values()) == [3 * PAGE]
    again = [core.allocate(PAGE) for _ in range(3)]
    assert core.system_allocs == 4 and len({b.chunk for b in again}) == 1


def test_results_stay_valid_while_held_and_come_back_when_dropped():
    pool = MemoryPool(chunk_bytes=PAGE)
    out = pool.allocate_output((16,), np.float64)
    out[:] = 7.0
    view = out[4:]
    del out
    for _ in range(8):                      # temporaries come and go while the caller holds the view
        t = pool.allocate((16,), np.float64)
        t[:] = -1.0
        pool.free(t)
    assert (view == 7.0).all() and pool.stats().held == 128
    del view
    assert pool.stats().held == 0 and pool.stats().in_use == 0


def test_misuse_is_a_clear_error():
    pool = MemoryPool()
    a = pool.allocate((4,), np.float32)
    with pytest.raises(PoolError, match="did not hand out"):
        pool.free(a[1:])
    pool.free(a)
    with pytest.raises(PoolError, match="freed twice"):
        pool.free(a)
    with pytest.raises(PoolError, match="did not hand out"):
        pool.free(np.zeros(4, np.float32))
    with pytest.raises(PoolError, match="power of two"):
        pool.allocate((4,), np.float32, alignment=48)
    with pytest.raises(PoolError, match="freed twice"):
        pool.core.free(0, 12345)


def test_a_reserved_first_chunk_serves_a_run_without_growing():
    core = PoolCore(alignment=64)
    core.reserve(3 * 1024)
    blocks = [core.allocate(1000) for _ in range(3)]
    core.free(blocks[1].chunk, blocks[1].start)
    core.allocate(900)
    assert core.system_allocs == 1 and core.reserved == PAGE


def test_growth_is_geometric_so_small_programs_reserve_about_what_they_use():
    core = PoolCore(alignment=64)
    for _ in range(40):
        core.allocate(3000)
    assert core.system_allocs <= 8
    assert core.reserved < 2 * core.in_use + PAGE

"""Launch configuration: grid and block sizes from a kernel's shapes and the device.

Every kernel loops grid-stride, so any grid is correct; the sizes only decide speed.
Blocks are a whole number of warps (block reductions need full warps, and a power of
two for the simulator's shuffle emulation); the grid is capped at the blocks the device
holds at once (SMs x resident blocks of that size: one full wave, each thread then loops),
and no dim passes the device's limits. An elementwise thread takes PER_THREAD elements a
pass (codegen.py), so its grid is sized for that; so does a row kernel's thread, PER_THREAD
elements a block apart: a row of 1,024 is one pass of one block of 256 threads, reduced by
warp shuffles then shared memory, a longer one strided over more passes. Options `threads_per_block` and
`max_blocks` override the choice (tests use them to force grid-stride iterations).
"""

from __future__ import annotations

from dataclasses import dataclass

from .device import DeviceInfo

ELEMENTWISE_THREADS = 256
SIMULATOR_THREADS = 32        # the simulator runs one Python thread per CUDA thread
ROW_THREADS = 256
PER_THREAD = 4                # elements a thread of an elementwise kernel takes per pass (codegen.py)


@dataclass(frozen=True)
class Launch:
    """One launch: grid and block dims."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]

    def text(self) -> str:
        return f"grid {self.grid}, block {self.block}"


@dataclass(frozen=True)
class Policy:
    """Sizing rules for one device, with the user's overrides."""

    device: DeviceInfo
    threads_per_block: int | None = None
    max_blocks: int | None = None

    def _threads(self, default: int) -> int:
        if self.threads_per_block is not None:
            return _warps(min(self.threads_per_block, self.device.max_threads_per_block))
        return SIMULATOR_THREADS if self.device.simulator else default

    def _cap(self, blocks: int, threads: int, dim: int = 0) -> int:
        cap = self.max_blocks if self.max_blocks is not None else self.device.resident_blocks(threads)
        return max(1, min(blocks, cap, self.device.max_grid[dim]))

    def elementwise(self, size: int) -> Launch:
        threads = min(self._threads(ELEMENTWISE_THREADS), _warps(-(-size // PER_THREAD)))
        return Launch((self._cap(-(-size // (threads * PER_THREAD)), threads), 1, 1), (threads, 1, 1))

    def rows(self, rows: int, row_length: int) -> Launch:
        """A block per row: a power-of-two number of threads, each PER_THREAD elements of the row a pass."""
        threads = max(_pow2_at_least(min(-(-max(row_length, 1) // PER_THREAD), self._threads(ROW_THREADS))), 32)
        return Launch((self._cap(rows, threads), 1, 1), (threads, 1, 1))

    def tiles(self, tile: int, rows: int, cols: int, batch: int) -> Launch:
        """A block per tile of the result, batches (or conv groups) along z."""
        n = tile * tile
        grid = (self._cap(-(-cols // tile), n, 0), self._cap(-(-rows // tile), n, 1), self._cap(batch, n, 2))
        return Launch(grid, (tile, tile, 1))

    def tile_size(self, rows: int, cols: int) -> int:
        """16 x 16 tiles (8 x 8 when the result is that small, or under the simulator)."""
        return 8 if self.device.simulator or max(rows, cols) <= 8 else 16


def _warps(n: int) -> int:
    return max(32, -(-n // 32) * 32)


def _pow2_at_least(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p

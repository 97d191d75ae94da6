"""Tiled shared-memory kernels for matmul and conv2d, with the group's epilogue fused in.

Each block computes a T x T tile of the result: for every step along the contracted
dim, its threads load one T x T tile of each operand into shared memory (zero outside
the operands, so edges need no special case), wait at a barrier, accumulate, and wait
again before the tiles are overwritten. Neighbouring threads (threadIdx.x) load
neighbouring addresses of both operands and store neighbouring output elements.
conv2d is the same GEMM done implicitly: rows are output channels of one group,
columns are output pixels, and the patch values are gathered while loading the tile.

The thread that owns a result element then evaluates the epilogue at that element
with the emitter shared with the other kernels, so bias, activation and residual adds
cost no extra pass over memory. All loop bounds depend on the block only, so every
thread reaches every barrier.
"""

from __future__ import annotations

from ...ir.core import Operation, Value
from ..base import KernelParam
from ..indexing import Coord, broadcast_map
from ..loopnest import Plan, literal, normalize
from .codegen import CudaKernelSource


class TileKernelSource(CudaKernelSource):
    """A tiled contraction kernel; `outputs` defaults to what the group yields."""

    def __init__(self, block, con: Operation, name: str, tile: int, outputs: list[Value] | None = None):
        space = tuple(con.result.type.shape)
        super().__init__(block, Plan(space, list(range(len(space))), []), name, "tile")
        self.con, self.tile = con, tile
        if outputs is not None:
            self.outputs = outputs
            self._start()
        self.dtype = con.result.type.dtype.name
        self.zero = literal(0, con.result.type.dtype)

    def build(self, parallel: bool = True) -> str:
        t = self.tile
        for name in ("sa", "sb"):
            self.root.add(f"{name} = cuda.shared.array(({t}, {t}), np.{self.dtype})")
        self.root.add("tx = cuda.threadIdx.x")
        self.root.add("ty = cuda.threadIdx.y")
        (self._matmul if self.con.name == "np.matmul" else self._conv)()
        self.current.cache[(id(self.con.result), normalize(self.con.result, self._full_map()))] = "acc"
        self.vars_of["acc"] = frozenset(f"i{d}" for d in range(len(self.plan.space)))
        self.store_all([(k, self._full_map()) for k in range(len(self.outputs))])
        return "\n".join(self.root.render(""))

    def _accumulate(self, k_total: str, load_a: str, load_b: str) -> None:
        t = self.tile
        add = self.current.add
        add(f"acc = {self.zero}")
        self.open([], f"for kt in range(0, {k_total}, {t}):")
        add = self.current.add
        add(f"sa[ty, tx] = {load_a}")
        add(f"sb[ty, tx] = {load_b}")
        add("cuda.syncthreads()")
        self.open([], f"for q in range({t}):")
        self.current.add("acc += sa[ty, q] * sb[q, tx]")
        self.close()
        self.current.add("cuda.syncthreads()")
        self.close()

    # -- matmul -------------------------------------------------------------------------
    def _matmul(self) -> None:
        rank, t = len(self.plan.space), self.tile
        a, b = (self.args[v] for v in self.con.operands)
        batch = list(range(rank - 2))
        total = " * ".join(f"n{d}" for d in batch) or "1"
        self.open(["t", *(f"i{d}" for d in batch)], f"for t in range(cuda.blockIdx.z, {total}, cuda.gridDim.z):")
        self._unpack("t", batch)
        m, n = rank - 2, rank - 1
        self.open([], f"for m0 in range(cuda.blockIdx.y * {t}, n{m}, cuda.gridDim.y * {t}):")
        self.open([], f"for c0 in range(cuda.blockIdx.x * {t}, n{n}, cuda.gridDim.x * {t}):")
        ka = self.con.operands[0].type.rank - 1
        ia, ib = (self._batch_index(v) for v in self.con.operands)
        self._accumulate(f"{a}.shape[{ka}]",
                         f"{a}[{ia}m0 + ty, kt + tx] if m0 + ty < n{m} and kt + tx < {a}.shape[{ka}] else {self.zero}",
                         f"{b}[{ib}kt + ty, c0 + tx] if kt + ty < {a}.shape[{ka}] and c0 + tx < n{n} else {self.zero}")
        self.current.add(f"i{m} = m0 + ty")
        self.current.add(f"i{n} = c0 + tx")
        self.open([f"i{m}", f"i{n}"], f"if i{m} < n{m} and i{n} < n{n}:")

    def _batch_index(self, operand: Value) -> str:
        """The operand's batch coordinates (broadcast from the result's), ending in ", " if any."""
        space = self.plan.space
        result_map = tuple(Coord(f"i{d}") for d in range(len(space) - 2))
        coords = broadcast_map(result_map, space[:-2], operand.type.shape[:-2])
        return "".join(f"{c.text()}, " for c in coords)

    # -- conv2d ---------------------------------------------------------------------------
    def _conv(self) -> None:
        attrs, t = self.con.attrs, self.tile
        x, w = (self.args[v] for v in self.con.operands)
        o, cg, kh, kw = (int(d) for d in self.con.operands[1].type.shape)
        groups = attrs["groups"]
        og, k_total, pixels = o // groups, cg * kh * kw, "n0 * n2 * n3"
        sh, sw = attrs["strides"]
        ph, pw = attrs["pads"][0], attrs["pads"][1]
        dh, dw = attrs["dilations"]
        self.open([], f"for g in range(cuda.blockIdx.z, {groups}, cuda.gridDim.z):")
        self.open([], f"for m0 in range(cuda.blockIdx.y * {t}, {og}, cuda.gridDim.y * {t}):")
        self.open([], f"for p0 in range(cuda.blockIdx.x * {t}, {pixels}, cuda.gridDim.x * {t}):")
        add = self.current.add
        add("pb = p0 + tx")
        add("xb = pb % n3")
        add("yb = (pb // n3) % n2")
        add("nb = pb // (n3 * n2)")
        self._accumulate(
            str(k_total),
            f"{w}[g * {og} + m0 + ty, (kt + tx) // {kh * kw}, ((kt + tx) // {kw}) % {kh}, (kt + tx) % {kw}] "
            f"if m0 + ty < {og} and kt + tx < {k_total} else {self.zero}",
            f"_patch({x}, nb, g * {cg} + (kt + ty) // {kh * kw}, "
            f"yb * {sh} + (((kt + ty) // {kw}) % {kh}) * {dh} - {ph}, "
            f"xb * {sw} + ((kt + ty) % {kw}) * {dw} - {pw}, kt + ty < {k_total} and pb < {pixels}, {self.zero})")
        for line in ("i0 = nb", f"i1 = g * {og} + m0 + ty", "i2 = yb", "i3 = xb"):
            self.current.add(line)
        self.open(["i0", "i1", "i2", "i3"], f"if m0 + ty < {og} and pb < {pixels}:")


def generate_tiled(block, con: Operation, name: str, tile: int,
                   outputs: list[Value] | None = None) -> tuple[str, list[KernelParam]]:
    """Source and parameters of a tiled contraction kernel `name` writing `outputs` (default: the group's)."""
    source = TileKernelSource(block, con, name, tile, outputs)
    return source.build(), source.params

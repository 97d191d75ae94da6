"""Kernels for groups of writes (`np.update_slice`, `np.scatter_nd`; see dialects/np/writes.py).

The kernel first copies the array written into to its output, unless the two are one buffer
(the memory plan gave the output the operand's buffer: then only the written elements move),
then runs the writes in order: a loop nest over an update_slice's region that stores the
update value, computed inline from the ops fused into the group; or a loop over a scatter's
index rows that checks each index (out of range: an InputError, as the reference raises,
never a store out of bounds) and stores, or combines, the updates there in index order, so a
repeated index keeps its last write (or all of them, combined), as numpy does.
"""

from __future__ import annotations

import math

from ...dialects.np.writes import region, write_chain
from ...ir.core import Operation, Value
from ..indexing import Coord, Map
from ..loopnest import PARALLEL_THRESHOLD, Plan
from .codegen import GeneratedKernel, KernelSource
from .scalar import SCALAR_RULES, TypeNames

_COMBINE = {"add": "np.add", "mul": "np.mul", "max": "np.maximum", "min": "np.minimum"}


class WriteSource(KernelSource):
    """The source of one kernel for a group whose result is a chain of writes."""

    def build(self, parallel: bool) -> str:
        writes = write_chain(self.block)
        self._copy(writes[0].operands[0], parallel)
        for w in writes:
            if w.name == "np.update_slice":
                self._update(w, parallel)
            else:
                self._scatter(w)
        return "\n".join(self.root.render(""))

    def _loops(self, dims: list[str], first: int, parallel: bool) -> None:
        for d, n in enumerate(dims):
            kind = "prange" if parallel and d == 0 else "range"
            self.open([f"i{first + d}"], f"for i{first + d} in {kind}({n}):")

    def _close(self, count: int) -> None:
        for _ in range(count):
            self.close()

    def _store(self, value: Value, m: Map, target: str) -> None:
        name = self.emit(value, m)
        self.current.add(f"o0[{target or '()'}] = {name}")

    def _copy(self, x: Value, parallel: bool) -> None:
        """o0 = x, skipped when the output is x's own buffer (written in place)."""
        shape = x.type.shape
        guarded = x in self.args
        if guarded:
            self.open([], f"if o0.ctypes.data != {self.args[x]}.ctypes.data:")
        self._loops([f"n{d}" for d in range(len(shape))], 0, parallel and math.prod(shape) >= PARALLEL_THRESHOLD)
        full = tuple(Coord(f"i{d}") for d in range(len(shape)))
        self._store(x, full, ", ".join(c.text() for c in full))
        self._close(len(shape) + guarded)

    def _update(self, w: Operation, parallel: bool) -> None:
        """A loop per dim the region spans more than one index of. Trip counts are spelled from the
        dims passed in (`n1 - 2`), not as literals: LLVM unrolls literal trip counts, which made
        a fill loop's kernel take seconds to compile per dozen rows."""
        ranges, shape = region(w), w.operands[0].type.shape
        looped = [d for d, r in enumerate(ranges) if len(r) != 1]
        bounds = [f"n{d}" if len(ranges[d]) == shape[d] else f"(n{d} - {shape[d] - len(ranges[d])})" for d in looped]
        big = parallel and math.prod(map(len, ranges)) >= PARALLEL_THRESHOLD
        for k, (d, n) in enumerate(zip(looped, bounds)):
            self.open([f"i{d}"], f"for i{d} in {'prange' if big and k == 0 else 'range'}({n}):")
        m = tuple(Coord(f"i{d}") if d in looped else Coord(None, 0, 0) for d in range(len(ranges)))
        target = [Coord(f"i{d}", r.step, r.start) if d in looped else Coord(None, 0, r.start)
                  for d, r in enumerate(ranges)]
        self._store(w.operands[1], m, ", ".join(c.text() for c in target))
        self._close(len(looped))

    def _scatter(self, w: Operation) -> None:
        """In index order (sequential loops): a repeated index gets the writes in numpy's order."""
        x, idx, upd = w.operands
        batch, depth = idx.type.shape[:-1], idx.type.shape[-1]
        tail = x.type.shape[depth:]
        rows = [f"{self.args[idx]}.shape[{d}]" if idx in self.args else str(n) for d, n in enumerate(batch)]
        self._loops(rows, 0, False)
        coords = [self._checked_index(idx, len(batch), d, x.type.shape[d]) for d in range(depth)]
        self._loops([f"n{depth + d}" for d in range(len(tail))], len(batch), False)
        inner = [f"i{len(batch) + d}" for d in range(len(tail))]
        target = ", ".join(coords + inner)
        value = self.emit(upd, tuple(Coord(f"i{d}") for d in range(len(batch) + len(tail))))
        reduction = w.attrs["reduction"]
        if reduction != "none":
            value = SCALAR_RULES[_COMBINE[reduction]]([f"o0[{target}]", value], {}, TypeNames(w))
        self.current.add(f"o0[{target}] = {value}")
        self._close(len(batch) + len(tail))

    def _checked_index(self, idx: Value, batch: int, d: int, size: int) -> str:
        """Coordinate d of the current index row, made non-negative, checked to lie in [-size, size)."""
        read = self.emit(idx, tuple(Coord(f"i{k}") for k in range(batch)) + (Coord(None, 0, d),))
        c = f"c{self.counter}"
        self.counter += 1
        for line in (f"{c} = np.int64({read})", f"if {c} < 0:", f"    {c} += {size}",
                     f"if {c} < 0 or {c} >= {size}:",
                     '    raise InputError("np.scatter_nd: an index in the indices is out of range")'):
            self.current.add(line)
        return c


def generate_writes(block, name: str) -> GeneratedKernel:
    """Sources of `{name}_par` and `{name}_seq` for a group of writes, iterating the output's shape."""
    plan = Plan(tuple(block.last_op.operands[0].type.shape), [], [])
    par, seq = (WriteSource(block, plan, f"{name}_{suffix}") for suffix in ("par", "seq"))
    return GeneratedKernel(par.build(True), seq.build(False), plan, False, par.params)

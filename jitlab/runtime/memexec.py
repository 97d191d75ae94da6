"""Running programs under a memory plan with reference kernels.

The plain O0 interpreter treats mem ops as no-ops (numpy allocates for it). The two
interpreters here follow a plan instead, the way the compiled executors do: every buffer
comes from the pool (dynamic mode, following the program's mem ops) or from its place in
the static plan (an offset in the arena or in an output's buffer), and each op's reference
result is written into that buffer. A
buffer freed or reused too early then shows up as a wrong result, which is how the tests
check plans against O0; the pool's statistics per step are the observed memory timeline.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..dialects.reference import Interpreter, handles
from ..ir.core import Operation, Value
from ..ir.opdef import Trait
from ..ir.program import Program
from ..ir.shapes import evaluate_shape
from ..report import MemoryPlan
from .pool import MemoryPool


@handles("mem.alloc", "mem.reuse", "mem.free")
def _memory_op(interp: Interpreter, op: Operation, args) -> list:
    """At O0 numpy allocates every result itself, so the plan's ops have nothing to do."""
    return []


class PlannedInterpreter(Interpreter):
    """Writes each top-level result into the buffer a plan gives it (`buffer_for`)."""

    def run_op(self, op: Operation, args: list[np.ndarray]) -> list[np.ndarray]:
        outs = super().run_op(op, args)
        if op.parent is not self.program.body or op.has(Trait.MEMORY):
            return outs
        placed = [self._place(op, r, out) for r, out in zip(op.results, outs)]
        self.after_step(op)
        return placed

    def _place(self, op: Operation, r: Value, out: np.ndarray) -> np.ndarray:
        buf = self.buffer_for(op, r)
        if buf is None:
            return out
        np.copyto(buf, out)
        return buf

    def buffer_for(self, op: Operation, r: Value) -> np.ndarray | None:
        """The planned buffer for result `r` (None: keep what the reference returned)."""
        raise NotImplementedError

    def after_step(self, op: Operation) -> None:
        """Called after each top-level op."""

    def shape_of(self, v: Value) -> tuple[int, ...]:
        return evaluate_shape(v.type.shape, self.bindings)


class PoolInterpreter(PlannedInterpreter):
    """Follows a program's mem.alloc / mem.reuse / mem.free ops with buffers from `pool`;
    `timeline` gets the pool's statistics after each step."""

    def __init__(self, program: Program, pool: MemoryPool, bindings: dict[str, int] | None = None):
        super().__init__(program, bindings)
        self.pool = pool
        self.timeline: list[dict] = []
        self._pending: dict[str, tuple] = {}       # value name -> (buffer the next op writes, its pool array)
        self._owner: dict[Value, np.ndarray] = {}  # value -> the pool array holding it
        self._names = {r.name: r for op in program.body.ops for r in op.results}

    def run_op(self, op: Operation, args: list[np.ndarray]) -> list[np.ndarray]:
        if op.name == "mem.alloc":
            v = self._names[op.attrs["value"]]
            allocate = self.pool.allocate_output if op.attrs["kind"] == "output" else self.pool.allocate
            buf = allocate(self.shape_of(v), v.type.dtype)
            self._pending[v.name] = (buf, buf)
        elif op.name == "mem.reuse":
            v = self._names[op.attrs["value"]]
            root = self._owner[op.operands[0]]
            self._pending[v.name] = (root.reshape(self.shape_of(v)), root)
        elif op.name == "mem.free":
            self.pool.free(self._owner[op.operands[0]])
        return super().run_op(op, args)

    def buffer_for(self, op, r):
        buf, root = self._pending.pop(r.name, (None, None))
        if buf is not None:
            self._owner[r] = root
        elif op.has(Trait.VIEW) and op.operands[0] in self._owner:
            self._owner[r] = self._owner[op.operands[0]]
        return buf

    def after_step(self, op):
        self.timeline.append(self.pool.stats().as_dict())


class ArenaInterpreter(PlannedInterpreter):
    """Places every temporary of a static plan at its offset in the arena (or in the output
    buffer it borrows), and writes outputs into buffers allocated when the run starts."""

    def __init__(self, program: Program, plan: MemoryPlan, bindings: dict[str, int] | None = None):
        super().__init__(program, bindings)
        owners = {b.name: b for b in plan.buffers if b.alias_of is None}
        self.regions = {"arena": _aligned(plan.arena_bytes, plan.alignment)}
        self.regions.update((b.name, _aligned(b.bytes, plan.alignment)) for b in owners.values() if b.kind == "output")
        self.placement = {}
        for b in plan.buffers:
            owner = owners[b.alias_of or b.name]
            if owner.kind == "output":
                self.placement[b.name] = (owner.name, 0)
            elif b.offset is not None:
                self.placement[b.name] = (b.region, b.offset)

    def buffer_for(self, op, r):
        if op.has(Trait.VIEW) or r.name not in self.placement:
            return None
        region, offset = self.placement[r.name]
        shape = self.shape_of(r)
        nbytes = int(np.prod(shape, dtype=np.int64)) * r.type.dtype.itemsize
        return self.regions[region][offset:offset + nbytes].view(r.type.dtype).reshape(shape)


def _aligned(nbytes: int, alignment: int) -> np.ndarray:
    raw = np.empty(nbytes + alignment, np.uint8)
    skip = -raw.__array_interface__["data"][0] % alignment
    return raw[skip:skip + nbytes]


def run_with_pool(program: Program, inputs: Sequence[np.ndarray], pool: MemoryPool,
                  bindings: dict[str, int] | None = None) -> tuple[list[np.ndarray], list[dict]]:
    """Runs a program that carries mem ops, its buffers from `pool`; returns outputs and the pool timeline."""
    interp = PoolInterpreter(program, pool, bindings)
    return interp.run(inputs), interp.timeline


def run_with_arena(program: Program, plan: MemoryPlan, inputs: Sequence[np.ndarray],
                   bindings: dict[str, int] | None = None) -> list[np.ndarray]:
    """Runs a program with its temporaries placed in one arena as the static `plan` says."""
    return ArenaInterpreter(program, plan, bindings).run(inputs)

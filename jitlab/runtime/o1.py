"""The O1 executor: fused groups as compiled kernels, views as aliases, leftover ops by
their numpy library kernels, in the program's order.

Steps are planned once: each value gets a slot in a list, each step knows its slots,
so a call does no dictionary lookups or IR walking. Memory follows the dynamic plan:
a group's temporaries come from the executor's pool (runtime/pool.py) where the
program's mem.alloc ops say and go back at its mem.free ops, so the pool holds about the
plan's peak and its memory stays paged in between calls. Results the caller gets are
buffers kept per step and reused only when nothing outside the executor still refers to
them (`sys.getrefcount`): a result the user holds, or a view of it, is never overwritten.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from ..backends.base import Kernel
from ..backends.fastcall import SMALL_OUTPUT_BYTES, FunctionWriter
from ..backends.host import BufferAllocationError, OutputBuffers, detached, safe_to_donate
from ..dialects.reference import concrete_attrs, weight_data
from ..dialects.scf import REGION_OPS, RUNNERS
from ..ir.core import Operation, Value
from ..ir.opdef import Trait
from ..ir.program import Program
from ..ir.shapes import evaluate_shape
from ..report import MemoryPlan
from .pool import MemoryPool


class Step:
    """One top-level op: reads operand slots, writes result slots."""

    def __init__(self, op: Operation, ins: list[int], outs: list[int]):
        self.op, self.ins, self.outs = op, ins, outs
        self.frees: list[int] = []            # slots whose pool buffers die after this step (mem.free)

    def run(self, env: list, bindings: dict[str, int]) -> None:
        raise NotImplementedError

    def write_fast(self, w: FunctionWriter, env: dict[int, str]) -> bool:
        """Writes this step of a static call into `w` (backends/fastcall.py), its results' names into
        `env`; False where it cannot be written out."""
        return False


class GroupStep(Step):
    def __init__(self, op, ins, outs, kernel: Kernel):
        super().__init__(op, ins, outs)
        self.kernel = kernel
        self.buffers = OutputBuffers(op.results)
        # With a dynamic memory plan, the temporaries (a mem.alloc before this op, a mem.free
        # after their last use) come from the runner's pool, placed in their slots before run();
        # results the caller gets stay recycled buffers of their own.
        self.temps: list[bool] | None = None
        self.donated: dict[int, int] = {}     # result index -> input slot it writes into, this call
        self.reuse: dict[int, int] = {}       # result index -> slot whose buffer it takes (mem.reuse)
        self.kept_index = {k: k for k in range(len(op.results))}    # result index -> index in self.buffers

    def use_pool(self, temps: list[bool]) -> None:
        self.temps = temps
        self.buffers = OutputBuffers([r for r, t in zip(self.op.results, temps) if not t])
        self.kept_index = {k: i for i, k in enumerate(k for k, t in enumerate(temps) if not t)}

    def run(self, env, bindings):
        # most steps write none of their results elsewhere: no set to build for them at each call
        elsewhere = {self.kept_index[k] for k in (*self.donated, *self.reuse) if k in self.kept_index} \
            if self.donated or self.reuse else ()
        outputs = self.buffers.get(bindings, elsewhere)
        if self.temps is not None:
            kept = iter(outputs)
            outputs = [env[slot] if temp else next(kept) for slot, temp in zip(self.outs, self.temps)]
        for k, slot in self.reuse.items():
            outputs[k] = env[slot]
        for k, slot in self.donated.items():
            outputs[k] = env[slot]
        self.kernel.run([env[i] for i in self.ins], outputs, bindings)
        for slot, buf in zip(self.outs, outputs):
            env[slot] = buf

    def write_fast(self, w: FunctionWriter, env: dict[int, str]) -> bool:
        types = [r.type for r in self.op.results]
        temps = self.temps or [False] * len(types)
        if self.reuse or not all(t.is_static for t in types) or not all(v.type.is_static for v in self.op.operands):
            return False
        # a small temporary is an np.empty array (freed when its last reader is done), a large one
        # keeps the pool's paged-in memory: the general path
        if any(temp and t.nbytes() > SMALL_OUTPUT_BYTES for temp, t in zip(temps, types)):
            return False
        kept_names = iter(w.outputs([t for temp, t in zip(temps, types) if not temp], self.buffers))
        outs = [w.allocate(t.shape, t.dtype) if temp else next(kept_names) for temp, t in zip(temps, types)]
        ins = [env[i] for i in self.ins]
        run = self.kernel.run
        written = getattr(run, "write_fast", None)
        if written is None or not written(w, ins, outs, [v.type.shape for v in self.op.operands],
                                          [t.shape for t in types]):
            w.line(f"{w.ref(run, 'run')}([{', '.join(ins)}], [{', '.join(outs)}], EMPTY)")
        env.update(zip(self.outs, outs))
        return True


class ViewStep(Step):
    def __init__(self, op, ins, outs):
        super().__init__(op, ins, outs)
        shape = op.result.type.shape
        self.static = shape if op.result.type.is_static else None

    def run(self, env, bindings):
        shape = self.static or evaluate_shape(self.op.result.type.shape, bindings)
        env[self.outs[0]] = env[self.ins[0]].reshape(shape)

    def write_fast(self, w: FunctionWriter, env: dict[int, str]) -> bool:
        if self.static is None:
            return False
        env[self.outs[0]] = name = w.local()
        w.line(f"{name} = {env[self.ins[0]]}.reshape({tuple(self.static)!r})")
        return True


class LibraryStep(Step):
    """A leftover op run by its numpy reference implementation."""

    def __init__(self, op, ins, outs):
        super().__init__(op, ins, outs)
        self.fn: Callable = op.opdef.reference
        self.attrs = op.attrs
        self.symbolic = any(not r.type.is_static for r in op.results)

    def run(self, env, bindings):
        attrs = concrete_attrs(self.attrs, bindings) if self.symbolic else self.attrs
        args = [env[i] for i in self.ins]
        for slot, value in zip(self.outs, _detached_results(self.fn(*args, **attrs), args)):
            env[slot] = value

    def write_fast(self, w: FunctionWriter, env: dict[int, str]) -> bool:
        if self.symbolic:
            return False
        args = ", ".join(env[i] for i in self.ins)
        outs = [w.local() for _ in self.outs]
        w.line(f"{''.join(o + ', ' for o in outs)}= {w.ref(_detached_results, 'detached')}("
               f"{w.ref(self.fn, 'fn')}({args}, **{w.ref(self.attrs, 'attrs')}), ({args}{',' if args else ''}))"
               f"[:{len(outs)}]")
        env.update(zip(self.outs, outs))
        return True


class RegionStep(Step):
    """A control-flow op: one native call where the backend compiled it as a loop (`native`), else run
    from the host, its regions compiled once as programs of their own."""

    def __init__(self, op, ins, outs, regions: dict[tuple[int, int], Callable], native: Callable | None = None):
        super().__init__(op, ins, outs)
        self.loop = RUNNERS[op.name]
        self.regions = [regions[(op.uid, r)] for r in range(len(op.regions))]
        self.native = native

    def run(self, env, bindings):
        args = [env[i] for i in self.ins]
        if self.native is not None:
            outs = self.native(args)
        else:
            outs = self.loop(self.op, args, lambda r, values: self.regions[r](values, bindings))
        # a loop that ran no iteration (or a branch yielding a capture) gives back an operand's array
        for slot, value in zip(self.outs, outs):
            env[slot] = detached(value, args)

    def write_fast(self, w: FunctionWriter, env: dict[int, str]) -> bool:
        # a native loop's results are its own arrays (it copies its initial values): nothing to detach
        if self.native is None:
            return False
        outs = [w.local() for _ in self.outs]
        args = ", ".join(env[i] for i in self.ins)
        w.line(f"{''.join(o + ', ' for o in outs)}= {w.ref(self.native, 'loop')}([{args}])")
        env.update(zip(self.outs, outs))
        return True


def _detached_results(out, args: Sequence[np.ndarray]) -> list[np.ndarray]:
    """A library op's result or results, each detached from its operands (host.detached)."""
    return [detached(value, args) for value in (out if isinstance(out, (tuple, list)) else (out,))]


class O1Runner:
    """Runs a fused program; `kernels` maps each jit.group's uid to its compiled kernel."""

    # A computed result is a buffer of its own: a group's kept buffer (reused only when no one
    # holds it), a detached library result or a constant's copy (runtime/ownership.py).
    fresh_outputs = True

    def __init__(self, program: Program, kernels: dict[int, Kernel], plan: MemoryPlan | None = None,
                 regions: dict[tuple[int, int], Callable] | None = None, loops: dict[int, Callable] | None = None):
        slots: dict[Value, int] = {v: i for i, v in enumerate(program.inputs)}
        self.loops = loops or {}          # a loop around this program's (a region's) inlines them
        self.constants: dict[int, np.ndarray] = {}
        self.steps: list[Step] = []
        allocs: dict[str, bool] = {}          # value name -> is an output, from mem.alloc ops
        reuse: dict[str, int] = {}            # value name -> the slot whose buffer it takes, from mem.reuse ops
        for op in program.body.ops:
            if op.has(Trait.TERMINATOR):
                self.outputs = [slots[v] for v in op.operands]
                continue
            if op.name == "mem.alloc":
                allocs[op.attrs["value"]] = op.attrs.get("kind") == "output"
                continue
            if op.name == "mem.reuse":
                reuse[op.attrs["value"]] = slots[op.operands[0]]
                continue
            if op.name == "mem.free" and self.steps:
                self.steps[-1].frees.append(slots[op.operands[0]])
                continue
            outs = [slots.setdefault(r, len(slots)) for r in op.results]
            ins = [slots[v] for v in op.operands]
            if op.has(Trait.CONSTANT) or op.name == "np.weight":
                self.constants[outs[0]] = _constant(program, op)
            elif op.name == "jit.group":
                step = GroupStep(op, ins, outs, kernels[op.uid])
                if any(allocs.get(r.name) is False for r in op.results):
                    step.use_pool([allocs.get(r.name) is False for r in op.results])
                # A group of writes updating the array it writes into in place (liveness.py).
                step.reuse = {k: reuse[r.name] for k, r in enumerate(op.results) if r.name in reuse}
                self.steps.append(step)
            elif op.has(Trait.VIEW):
                self.steps.append(ViewStep(op, ins, outs))
            elif op.name in REGION_OPS:
                self.steps.append(RegionStep(op, ins, outs, regions or {}, self.loops.get(op.uid)))
            elif op.has(Trait.MEMORY):
                continue
            else:
                self.steps.append(LibraryStep(op, ins, outs))
        # The pool takes its first chunk (the plan's peak) at the first call, not at compile
        # time: compiling allocates nothing for the data, whatever the shapes.
        self.pool = MemoryPool()
        self._first_chunk = plan.first_chunk_bytes if plan is not None else 0
        # a program whose groups take no temporaries from the pool (most small ones) neither
        # reserves it nor pays for its bookkeeping at each call
        self._pooled = any(getattr(s, "temps", None) is not None for s in self.steps)
        self.n_slots = len(slots)
        self.n_inputs = len(program.inputs)
        self._slots = slots
        self.donations: list = []

    def donate(self, program: Program, donations: list) -> None:
        """Lets the groups producing these outputs write into their donated input arrays."""
        self.donations = []
        for d in donations:
            out = program.outputs[d.output]
            step = next((s for s in self.steps if self._slots[out] in s.outs), None)
            if isinstance(step, GroupStep) and (len(step.outs) == 1 or step.kernel.reads_before_writes):
                self.donations.append((d, step, step.outs.index(self._slots[out])))
            else:
                d.mode = "copy"

    def _bind_donations(self, arrays: list[np.ndarray]) -> None:
        for d, step, k in self.donations:
            if safe_to_donate(arrays, d):
                step.donated[k] = d.input
            else:
                step.donated.pop(k, None)

    def __call__(self, arrays: list[np.ndarray], bindings: dict[str, int]) -> list[np.ndarray]:
        env: list = [None] * self.n_slots
        for i, a in enumerate(arrays):
            # Kernels are compiled for writable C-contiguous inputs; anything else is copied once.
            flags = a.flags
            env[i] = a if flags.c_contiguous and flags.writeable else np.array(a, order="C")
        for slot, value in self.constants.items():
            env[slot] = value
        if self.donations:
            self._bind_donations(arrays)
        if not self._pooled:
            for step in self.steps:
                step.run(env, bindings)
            return [env[i].copy() if i in self.constants else env[i] for i in self.outputs]
        live: dict[int, np.ndarray] = {}      # slot -> the pool temporary it holds
        try:
            if self._first_chunk:
                self.pool.reserve(self._first_chunk)
                self._first_chunk = 0
            for step in self.steps:
                if getattr(step, "temps", None) is not None:
                    self._allocate(step, env, live, bindings)
                step.run(env, bindings)
                for slot in step.frees:
                    buf = live.pop(slot, None)
                    if buf is not None:
                        self.pool.free(buf)
        finally:
            self.pool.reset()
        # Constants and weights are shared, read-only arrays: the caller gets a copy of those.
        return [env[i].copy() if i in self.constants else env[i] for i in self.outputs]

    def write_fast(self, w: FunctionWriter, inputs: list[str]) -> list[str] | None:
        """A static call's steps written into `w` (backends/fastcall.py): the results' expressions,
        or None where a step cannot be written out or inputs are donated."""
        if self.donations:
            return None
        env = dict(enumerate(inputs))
        env.update((slot, w.ref(value, "c")) for slot, value in self.constants.items())
        if not all(step.write_fast(w, env) for step in self.steps):
            return None
        # Constants and weights are shared, read-only arrays: the caller gets a copy of those.
        return [f"{env[i]}.copy()" if i in self.constants else env[i] for i in self.outputs]

    def _allocate(self, step: GroupStep, env: list, live: dict[int, np.ndarray], bindings) -> None:
        """Pool buffers for a group's temporaries; a mem.free after a later step returns each."""
        for slot, r, temp in zip(step.outs, step.op.results, step.temps):
            if temp:
                shape = r.type.shape if r.type.is_static else evaluate_shape(r.type.shape, bindings)
                try:
                    env[slot] = live[slot] = self.pool.allocate(shape, r.type.dtype)
                except MemoryError as e:
                    nbytes = math.prod(shape) * r.type.dtype.itemsize
                    raise BufferAllocationError(f"%{r.name} {list(shape)} from the pool", nbytes, e) from e


def _constant(program: Program, op: Operation) -> np.ndarray:
    # np.asarray, not np.ascontiguousarray: the latter turns a 0-d array into shape (1,).
    if op.name == "np.weight":
        return np.asarray(weight_data(program, op.attrs["name"]), order="C")
    return np.asarray(op.attrs["value"].array, order="C")

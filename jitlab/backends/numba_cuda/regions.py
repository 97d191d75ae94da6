"""scf.for, scf.while and scf.if on the device: the loop runs from the host, its regions' kernels queued.

Each region was compiled once as a program of its own (compiler.compile_regions), whose
DeviceExecutor queues its steps here on the stream of the loop's step, with the body's buffers:
no synchronisation, no transfer per iteration. What the host must know it reads back, once each:
a loop's bounds unless they are constants (before the first iteration), a while loop's condition
(after each run of its before region), an if's predicate. The induction variable of every
iteration is written on the device once per loop run (a kernel fills `range(lo, hi, step)`; an
upload from pageable memory would wait for the stream), one array whose elements the body reads
in turn.

Carried values live in buffers of the loop run's `Pool`: an iteration's results go into buffers
that none of its inputs is, so a kernel writing the next value never overwrites one that a later
kernel of the same iteration still reads (with a carry passed through unchanged, or two swapped,
a third buffer is taken rather than a double buffer's second). A result that is not such a buffer
(a body temporary seen through a view, a capture yielded as it is) is copied into one, so that
nothing the loop returns lives in a body's or the caller's reused memory.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from ...dialects import scf
from ...dialects.scf import INDEX
from ...errors import CompileError
from ...ir.core import Operation
from .dynamic import INDUCTION_SOURCE, load


class DeviceFault(Exception):
    """An out-of-range offset found at a read back inside a loop: carried out past the loops' own error
    notes (its message already names every iteration) to the executor's call, which raises `error`."""

    def __init__(self, error: Exception):
        super().__init__(str(error))
        self.error = error


class Pool:
    """The device buffers of one run of a region op, each allocated once and reused while no input holds it."""

    def __init__(self, cuda):
        self.cuda = cuda
        self.buffers: dict[Any, list] = {}
        self.mine: set[int] = set()

    def take(self, key, shape: tuple[int, ...], dtype, stream, avoid: set[int]) -> Any:
        free = self.buffers.setdefault(key, [])
        for buf in free:
            if id(buf) not in avoid and buf.shape == tuple(shape) and buf.dtype == np.dtype(dtype):
                return buf
        buf = self.cuda.device_array(tuple(shape), np.dtype(dtype), stream=stream)
        free.append(buf)
        self.mine.add(id(buf))
        return buf

    def owned(self, key, array, stream, avoid: set[int]) -> Any:
        """`array` if it is one of the pool's buffers, else a copy of it in one."""
        if id(array) in self.mine:
            return array
        buf = self.take(key, array.shape, array.dtype, stream, avoid)
        buf.copy_to_device(array, stream=stream)
        return buf


class RegionRun:
    """The device runner of an scf op's step: `run(executor, step, operands, bindings, alloc, stream)`."""

    def __init__(self, op: Operation, bodies: list, stream, policy, options: dict[str, Any]):
        for body in bodies:
            if not hasattr(body, "queue_steps"):
                raise CompileError(f"{scf.where(op)}: a region compiled for cuda has no device executor "
                                   f"({type(body).__name__})")
            body.streams = [stream] * len(body.streams)     # the body's launches in the loop's stream order
        self.op, self.bodies, self.policy = op, bodies, policy
        self.induction = load(INDUCTION_SOURCE, "induction", options) if op.name == "scf.for" else None
        self.outputs = [set(body.outputs) for body in bodies]

    def __call__(self, executor, step, operands: list, bindings: dict[str, int], alloc, stream) -> list:
        faults, pool = executor.faults, Pool(executor.cuda)
        for body in self.bodies:        # one fault record and one count of launches and syncs per call
            body.faults, body.stats = faults, executor.stats
        saved = faults.enter(self.op) if self.op.name != "scf.if" else None
        try:
            if self.op.name == "scf.for":
                results = self._for(executor, step, operands, bindings, pool, stream)
            elif self.op.name == "scf.while":
                results = self._while(executor, operands, bindings, pool, stream)
            else:
                results = self._if(executor, step, operands, bindings, pool, stream)
        finally:
            if saved is not None:
                faults.leave(saved)
        return [pool.owned(("result", j), r, stream, set()) for j, r in enumerate(results)]

    def _for(self, ex, step, operands: list, bindings, pool: Pool, stream) -> list:
        lo, hi, by = self._host_values(ex, step, operands, range(3), stream)
        trips = len(range(lo, hi, by)) if by else 0
        induction = self._induction(ex, lo, by, trips, stream)
        counter = itertools.count()

        def body(_region: int, args: list) -> list:
            k = next(counter)
            ex.faults.iteration = k
            ex.stats["loop_iterations"] += 1
            return self._iterate(0, [induction[k:k + 1].reshape(()), *args[1:]], bindings, pool, stream)

        return scf.run_for(self.op, [lo, hi, by, *operands[3:]], body)

    def _induction(self, ex, lo: int, by: int, trips: int, stream) -> Any:
        """The induction variable's values of a loop run, written on the device."""
        if not trips:
            return None
        values = ex.cuda.device_array(trips, INDEX, stream=stream)
        launch = self.policy.elementwise(trips)
        self.induction[launch.grid, launch.block, stream](values, lo, by, trips)
        ex.stats["launches"] += 1
        return values

    def _while(self, ex, operands: list, bindings, pool: Pool, stream) -> list:
        counter = itertools.count()

        def region(r: int, args: list) -> list:
            if r == 1:
                return self._iterate(1, args, bindings, pool, stream)
            ex.faults.iteration = next(counter)
            ex.stats["loop_iterations"] += 1
            before = self.bodies[0]
            (go,) = before.queue_steps(args, bindings, before.allocator.get)
            return [read_back(ex, go, stream)]

        return scf.run_while(self.op, operands, region)

    def _if(self, ex, step, operands: list, bindings, pool: Pool, stream) -> list:
        (pred,) = self._host_values(ex, step, operands, [0], stream)
        return scf.run_if(self.op, [pred, *operands[1:]],
                          lambda r, args: self._iterate(r, args, bindings, pool, stream))

    def _host_values(self, ex, step, operands: list, positions, stream) -> list:
        """The operands at `positions` on the host: constants as they are, the others read back (one sync)."""
        known = [ex.host_constants.get(step.ins[p]) for p in positions]
        return [v if v is not None else read_back(ex, operands[p], stream) for v, p in zip(known, positions)]

    def _iterate(self, region: int, inputs: list, bindings, pool: Pool, stream) -> list:
        """Queues one run of a region on `inputs`; its results in pool buffers none of the inputs is."""
        body, outputs = self.bodies[region], self.outputs[region]
        avoid = {id(a) for a in inputs}

        def alloc(slot, shape, dtype, s):
            if slot in outputs:
                return pool.take(("out", region, slot), shape, dtype, stream, avoid)
            return body.allocator.get(slot, shape, dtype, s)

        results = body.queue_steps(inputs, bindings, alloc)
        return [r if id(r) in avoid else pool.owned(("copy", region, j), r, stream, avoid)
                for j, r in enumerate(results)]


def read_back(ex, array, stream) -> Any:
    """A device scalar on the host: one small copy after the stream's work so far (with the fault record's,
    once a checked kernel ran), so an offset out of range before it is reported before the host acts on it."""
    value = array.copy_to_host(stream=stream)
    record = ex.faults.queue_read(stream)
    stream.synchronize()
    ex.stats["syncs"] += 1
    ex.stats["downloads"] += 1 + (record is not None)
    error = ex.faults.error(record, stream)
    if error is not None:
        raise DeviceFault(error)
    return value[()]

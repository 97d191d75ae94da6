"""The CUDA executor: a fused program run on the device, kernels launched on streams.

Data mapping (Paddle's variable <-> compiled buffer mapping): numpy inputs are copied
to the device once per call; device arrays (numba's, or anything with
`__cuda_array_interface__`: CuPy arrays, PyTorch CUDA tensors) are used in place;
weights and constants are uploaded once and stay resident. Results come back as numpy
arrays, or stay on the device with `device_outputs=True`.

A call makes no host synchronisation or transfer between kernels: launches are
queued on the streams of `report.streams`, cross-stream reads wait on events, and
the call ends with one synchronisation. O1 walks its steps; O2 calls one generated
function holding the whole launch sequence (sequence.py). From the second call with an input
signature on, a call replays a CUDA graph of all of it instead, where one can be captured
(graph.py; `report.cuda_graphs` says whether and why). The exception is an op no kernel covers (a
leftover at O1): it runs on the host between a sync, a download and an upload, and
is counted in `stats["host_ops"]` and in the report's warnings.

A control-flow op (scf.for, scf.while, scf.if) runs from the host, queueing its regions' kernels
(regions.py); dynamic index ops are device kernels whose offsets are checked on the device, a
failure read back at the call's synchronisation (dynamic.py).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np

from ...dialects.reference import concrete_attrs
from ...dialects.scf import REGION_OPS, where
from ...errors import InputError
from ...ir.core import Operation, Value
from ...ir.opdef import Trait
from ...ir.program import Program
from ...ir.shapes import evaluate_shape
from ...report import CompileReport, CudaGraphRecord
from ..base import Kernel
from ..device_arrays import is_numba_device_array
from . import device, measure
from .copies import ConcatKernel
from .dynamic import DYNAMIC_OPS, DynamicKernel, FaultRecord
from .graph import CapturedGraph, GraphCalls, decide
from .launch import Policy
from .memory import Arena, PerBuffer, check_budget
from .regions import DeviceFault, RegionRun
from .sequence import compile_sequence


class _Step:
    """One top-level op: where its operands and results live, and on which stream it runs."""

    def __init__(self, op: Operation, ins: list[int], outs: list[int], stream: int):
        self.op, self.ins, self.outs, self.stream = op, ins, outs, stream
        self.waits: list[Any] = []       # events to wait for before running
        self.records: list[Any] = []     # events to record after running
        self.types = [r.type for r in op.results]
        self.kernel: Kernel | None = None
        self.device_run = None          # a dynamic index kernel or a region op's runner (dynamic.py, regions.py)
        # a static step's result shapes, worked out once rather than on every call
        self.static = [tuple(t.shape) for t in self.types] if all(t.is_static for t in self.types) else None

    def shapes(self, bindings: dict[str, int]) -> list[tuple[int, ...]]:
        if self.static is not None:
            return self.static
        return [t.shape if t.is_static else evaluate_shape(t.shape, bindings) for t in self.types]


class DeviceExecutor:
    """Runs a fused program on the GPU; `kernels` maps each jit.group's uid to its kernel."""

    def __init__(self, program: Program, kernels: dict[int, Kernel], report: CompileReport,
                 options: dict[str, Any]):
        self.cuda = device.cuda()
        self.device_outputs = bool(options.get("device_outputs", False))
        self.limit = options.get("memory_limit")        # bytes, parsed by jl.compile
        self.stats: Counter = Counter()
        self.slots: dict[Value, int] = {v: i for i, v in enumerate(program.inputs)}
        self.input_types = [v.type for v in program.inputs]
        self.input_names = program.own_input_names      # for messages: as the model named them
        self.arena_plan = report.memory if report.memory is not None and report.memory.mode == "static" else None
        streams = report.streams if self.arena_plan is None else None
        self.resident: dict[int, Any] = {}
        self.host_constants: dict[int, np.ndarray] = {}     # scalar constants: a loop's bounds, known here
        self.steps = self._plan(program, kernels, streams, options)
        control = [s.op for s in self.steps if s.op.name in REGION_OPS or s.op.name in DYNAMIC_OPS]
        self.faults = FaultRecord(self.cuda) if control else None
        self._regions: dict = {}
        self.streams = [self.cuda.stream() for _ in range(max(1, streams.streams if streams else 1))]
        self._events(streams)
        self.inputs_ready = self._event()
        self.allocator = self._allocator(program)
        self.n_kernels = sum(1 for s in self.steps if s.kernel is not None)
        self.sequence = None
        if report.level == "O2":
            report.launch_sequence, self.sequence = compile_sequence(self)
        self._needs_checked: set[tuple] = set()
        self.report = report
        self._record_host_ops(report)
        self.graphs = self._graphs(report, options.get("graphs"))
        self.clock: tuple | None = None     # (start, end) events while device_times measures calls
        if all(t.is_static for t in (v.type for v in program.inputs)):
            self._check_budget([tuple(v.type.shape) for v in program.inputs], {})

    # -- planning ---------------------------------------------------------------------
    def _plan(self, program: Program, kernels: dict[int, Kernel], streams, options: dict[str, Any]) -> list[_Step]:
        steps = []
        self.policy = policy = Policy(device.info(), options.get("threads_per_block"), options.get("max_blocks"))
        self.options = options
        for op in program.body.ops:
            if op.has(Trait.TERMINATOR):
                self.outputs = [self.slots[v] for v in op.operands]
                continue
            outs = [self.slots.setdefault(r, len(self.slots)) for r in op.results]
            ins = [self.slots[v] for v in op.operands]
            if op.has(Trait.CONSTANT) or op.name == "np.weight":
                array = _constant(program, op)
                self.resident[outs[0]] = self.cuda.to_device(array)
                if array.ndim == 0:
                    self.host_constants[outs[0]] = array[()]
            elif not op.has(Trait.MEMORY):
                step = _Step(op, ins, outs, streams.stream(op.uid) if streams else 0)
                step.kernel = kernels.get(op.uid)
                if op.name in DYNAMIC_OPS:
                    step.device_run = DynamicKernel(op, policy, options)
                elif op.name == "np.concatenate" and step.kernel is None:
                    step.device_run = ConcatKernel(op, policy, options)
                steps.append(step)
        return steps

    @property
    def regions(self) -> dict:
        """The compiled regions of the program's scf ops (set by the compiler once they are compiled)."""
        return self._regions

    @regions.setter
    def regions(self, runners: dict) -> None:
        self._regions = runners
        for step in self.steps:
            if step.op.name in REGION_OPS:
                bodies = [runners[(step.op.uid, r)].runner for r in range(len(step.op.regions))]
                step.device_run = RegionRun(step.op, bodies, self.streams[step.stream], self.policy, self.options)
                self._record_body_host_ops(step.op, bodies)

    def _record_body_host_ops(self, op: Operation, bodies: list) -> None:
        """A body's host ops synchronise on every run of it: said in the program's report, not only its region's."""
        host = sorted({name for body in bodies for name in body._host_ops()})
        if host:
            self.report.warnings.append(f"cuda: the {where(op)} runs {', '.join(host)} on the host, between a "
                                        "sync and two transfers, on every run of its body")
            self.report.stats["device_host_ops"] += sum(len(body._host_ops()) for body in bodies)

    def _host_ops(self) -> list[str]:
        return [s.op.name for s in self.steps if s.kernel is None and not s.op.has(Trait.VIEW)
                and s.op.name not in REGION_OPS and s.device_run is None]

    def _record_host_ops(self, report: CompileReport) -> None:
        host = self._host_ops()
        if host:
            report.warnings.append(f"cuda: {len(host)} op(s) without a kernel run on the host, each between a "
                                   f"sync and two transfers: {', '.join(sorted(set(host)))}")
        report.stats["device_host_ops"] = len(host)

    def _graphs(self, report: CompileReport, option: bool | None) -> GraphCalls | None:
        control = sorted({s.op.name for s in self.steps if s.op.name in REGION_OPS or s.op.name in DYNAMIC_OPS})
        library = sorted({s.kernel.meta["library"] for s in self.steps
                          if s.kernel is not None and s.kernel.meta.get("library")})
        replay, reason = decide(option, device.simulator_enabled(), self._host_ops(), len(self.streams), self.limit,
                                control, library)
        report.cuda_graphs = CudaGraphRecord(replay=replay, reason=reason)
        if not replay:
            return None
        return GraphCalls(report.cuda_graphs, lambda arrays, bindings: CapturedGraph(self, arrays, bindings))

    def launches_per_call(self) -> int:
        """Kernel launches (generated and library) one direct call queues."""
        return sum(len(s.kernel.meta.get("launchers", ())) + bool(s.kernel.meta.get("library"))
                   for s in self.steps if s.kernel is not None)

    def fixed_buffer(self, slot: int, shape: tuple[int, ...], dtype) -> Any:
        """A buffer for `slot` that nothing else hands out: the arena's (for the values it placed) or its own."""
        arena = getattr(self.allocator, "arena", None)
        if arena is not None and arena.covers(slot):
            return arena.get(slot, shape, dtype, 0)
        return self.cuda.device_array(shape, dtype)

    def _events(self, streams) -> None:
        if streams is None:
            return
        by_uid = {s.op.uid: s for s in self.steps}
        recorded: dict[int, Any] = {}
        for e in streams.events:
            if e.producer not in recorded:
                recorded[e.producer] = self._event()
                by_uid[e.producer].records.append(recorded[e.producer])
            by_uid[e.consumer].waits.append(recorded[e.producer])

    def _allocator(self, program: Program):
        per_buffer = PerBuffer(self.cuda)
        if self.arena_plan is None:
            return per_buffer
        names = {slot: v.name for v, slot in self.slots.items() if v.name}
        return _Mixed(Arena(self.cuda, self.arena_plan, names), per_buffer)

    def _event(self):
        # Events only order streams here; timing would cost. The simulator's take no arguments.
        return self.cuda.event() if device.simulator_enabled() else self.cuda.event(timing=False)

    # -- memory budget ----------------------------------------------------------------------
    def _check_budget(self, input_shapes: list[tuple[int, ...]], bindings: dict[str, int]) -> None:
        key = tuple(sorted(bindings.items()))
        if key in self._needs_checked:
            return
        needs = [(f"input '{name}'", _nbytes(s, t.dtype))
                 for name, s, t in zip(self.input_names, input_shapes, self.input_types)]
        needs += [(f"constant/weight {array.shape}", array.nbytes) for array in self.resident.values()]
        for step in self.steps:
            if not step.op.has(Trait.VIEW):
                for r, shape in zip(step.op.results, step.shapes(bindings)):
                    needs.append((f"%{r.name} {list(shape)} from {step.op.name}", _nbytes(shape, r.type.dtype)))
        free = self.cuda.current_context().get_memory_info()[0]
        check_budget(needs, self.limit, free)
        self._needs_checked.add(key)

    # -- a call -------------------------------------------------------------------------------
    def __call__(self, arrays: list, bindings: dict[str, int]) -> list:
        if self.faults is None:
            return self._call(arrays, bindings)
        self.faults.reset()
        try:
            # numba frees a dropped buffer (a loop run's carries) with cuMemFree, which synchronises the
            # device: deferred while the call's loops queue their iterations
            with self.cuda.defer_cleanup():
                return self._call(arrays, bindings)
        except DeviceFault as fault:
            self.cuda.synchronize()         # the loop stopped early: what it queued still runs
            raise fault.error from None
        except BaseException:
            self.faults.clear()             # a failure this call did not read is not the next call's
            raise

    def _call(self, arrays: list, bindings: dict[str, int]) -> list:
        if bindings:
            self._check_budget([tuple(a.shape) for a in arrays], bindings)
        if self.graphs is not None:
            results = self.graphs.call(arrays, bindings, self.clock)
            if results is not None:
                self.stats["graph_launches"] += 1
                return results
        first = self.streams[0]
        if self.clock is not None:
            self.clock[0].record(first)
        inputs = [self._to_device(a, i, first) for i, a in enumerate(arrays)]
        if len(self.streams) > 1:
            self.inputs_ready.record(first)
            for s in self.streams[1:]:
                self.inputs_ready.wait(s)
        if self.sequence is not None:
            results = self.sequence(*inputs, bindings)
            self.stats["launches"] += self.n_kernels
        else:
            results = self.queue_steps(inputs, bindings, self.allocator.get)
        return self._finish(results)

    def queue_steps(self, inputs: list, bindings: dict[str, int], alloc) -> list:
        """Queues every step on its stream, results allocated by `alloc(slot, shape, dtype, stream)`;
        returns the program's results (device arrays, not yet computed)."""
        env: list = [None] * len(self.slots)
        env[:len(inputs)] = inputs
        for slot, array in self.resident.items():
            env[slot] = array
        for step in self.steps:
            self._run(step, env, bindings, alloc)
        return [env[i] for i in self.outputs]

    def _to_device(self, a, index: int, stream) -> Any:
        if isinstance(a, np.ndarray):
            self.stats["uploads"] += 1
            return self.cuda.to_device(np.asarray(a, order="C"), stream=stream)
        d = a if is_numba_device_array(a) else self.cuda.as_cuda_array(a)
        if not d.is_c_contiguous():
            raise InputError(f"input '{self.input_names[index]}': device arrays must be C-contiguous "
                             f"(got strides {d.strides}); copy it first (e.g. cupy.ascontiguousarray)")
        return d

    def _run(self, step: _Step, env: list, bindings: dict[str, int], alloc) -> None:
        stream = self.streams[step.stream]
        for event in step.waits:
            event.wait(stream)
        if step.kernel is not None:
            outs = [alloc(slot, shape, t.dtype, stream)
                    for slot, shape, t in zip(step.outs, step.shapes(bindings), step.types)]
            step.kernel.run([env[i] for i in step.ins], outs, bindings, stream)
            self.stats["launches"] += 1
        elif step.op.has(Trait.VIEW):
            outs = [env[step.ins[0]].reshape(step.shapes(bindings)[0])]
        elif step.device_run is not None:
            outs = step.device_run(self, step, [env[i] for i in step.ins], bindings, alloc, stream)
        else:
            outs = self.host_step(step, [env[i] for i in step.ins], bindings, stream)
        for slot, buf in zip(step.outs, outs):
            env[slot] = buf
        for event in step.records:
            event.record(stream)

    def host_step(self, step: _Step, operands, bindings: dict[str, int], stream) -> list:
        """A leftover op: sync, download its operands, run its numpy reference, upload the results."""
        self.cuda.synchronize()
        self.stats["syncs"] += 1
        self.stats["host_ops"] += 1
        args = [a.copy_to_host() for a in operands]
        self.stats["downloads"] += len(args)
        attrs = concrete_attrs(step.op.attrs, bindings)
        out = step.op.opdef.reference(*args, **attrs)
        results = out if isinstance(out, (tuple, list)) else (out,)
        self.stats["uploads"] += len(results)
        return [self.cuda.to_device(np.asarray(r, order="C"), stream=stream) for r in results]

    def _finish(self, results: list) -> list:
        """The one synchronisation of a call, then (unless outputs stay on the device) the downloads."""
        if self.clock is not None:
            self.clock[1].record(0)     # the legacy default stream: after the work of every stream
        record = self.faults.queue_read(0) if self.faults is not None else None
        self.cuda.synchronize()
        self.stats["syncs"] += 1
        error = self.faults.error(record, 0) if record is not None else None
        if error is not None:
            raise error
        if self.device_outputs:
            return results
        self.stats["downloads"] += len(results)
        return [r.copy_to_host() for r in results]

    def device_times(self, call, repeats: int) -> list[float]:
        """Milliseconds of device time of each of `repeats` calls of `call` (which calls this executor):
        events recorded before its first copy or launch and after its last, before its synchronisation.
        A direct call's time includes the gaps while the host queues its next launch; a replayed graph's
        is the graph's."""
        self.clock = (self.cuda.event(), self.cuda.event())
        times = []
        try:
            for _ in range(repeats):
                call()
                times.append(self.clock[0].elapsed_time(self.clock[1]))
        finally:
            self.clock = None
        return times

    def profile_steps(self, call, arrays, bindings: dict[str, int], repeats: int, warmup: int, recorder) -> str:
        """Profiling (runtime/profile.py's StepProfiler): an event before and after each step on its
        stream, the elapsed times read after each call; O2's generated launch sequence and the captured
        graphs are set aside so the steps run one by one."""
        cuda = self.cuda
        index = {id(step): k for k, step in enumerate(self.steps)}
        pending: list = []
        run, sequence, graphs = self._run, self.sequence, self.graphs

        def timed_run(step, env, bindings, alloc):
            stream = self.streams[step.stream]
            start, end = measure.event(cuda), measure.event(cuda)
            start.record(stream)
            run(step, env, bindings, alloc)
            end.record(stream)
            pending.append((index[id(step)], step, start, end))

        self._run, self.sequence, self.graphs = timed_run, None, None
        try:
            for n in range(warmup + repeats):
                pending.clear()
                call()
                cuda.synchronize()
                if n < warmup or not pending:
                    continue
                first = pending[0][2]
                recorder.begin_call()
                for k, step, start, end in pending:
                    offset = first.elapsed_time(start) / 1e3          # milliseconds
                    recorder.add(k, [step.op], offset, start.elapsed_time(end) / 1e3, step.stream)
        finally:
            del self._run
            self.sequence, self.graphs = sequence, graphs
        return "events"


class _Mixed:
    """The arena for the buffers the static plan placed, one allocation each for the rest."""

    def __init__(self, arena: Arena, rest: PerBuffer):
        self.arena, self.rest = arena, rest

    def get(self, slot, shape, dtype, stream):
        return (self.arena if self.arena.covers(slot) else self.rest).get(slot, shape, dtype, stream)


def _nbytes(shape, dtype) -> int:
    return math.prod(shape) * np.dtype(dtype).itemsize


def _constant(program: Program, op: Operation) -> np.ndarray:
    if op.name == "np.weight":
        return np.asarray(program.weights[op.attrs["name"]], order="C")
    return np.asarray(op.attrs["value"].array, order="C")

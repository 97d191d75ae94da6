"""The CPU backend's O2 executor: compiled segments over one arena, heavy groups' own kernels and
numpy fallbacks between them.

Per binding of the program's symbols it keeps the static memory plan, the arena it
sizes and the offsets array the segments read. A call passes each segment the arena,
the offsets, the arrays it reads from outside (inputs, weights, earlier results) and
the symbol values; the values a heavy group's kernel or a fallback op reads and writes are viewed
straight out of the arena.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from ...dialects.reference import Interpreter, weight_data
from ...ir.core import Operation, Value
from ...ir.opdef import Trait
from ...ir.program import Program
from ...ir.shapes import evaluate_shape
from ...report import KernelTiming, MemoryPlan
from ..base import KernelParam, ParamRole
from ..host import OutputBuffers, detached, empty, safe_to_donate
from .numpy_blas import addresses as blas_addresses
from .numpy_blas import free_threads


@dataclass
class Segment:
    """One generated function and what to pass it."""

    name: str
    ops: list[Operation]
    params: list[KernelParam]               # the arena, offsets, BLAS, values, hosts' bytes, symbols
    fn: object = None                       # the compiled function, once the runner has it


@dataclass
class Fallback:
    """An op O2 cannot compile: it runs with numpy between segments."""

    op: Operation
    reason: str


@dataclass
class KernelCall:
    """A group heavy enough to run its own shared kernel, called from Python between segments."""

    op: Operation
    run: Callable | None = None     # the compiled Kernel's run(inputs, outputs, bindings)
    reason: str = ""


@dataclass
class Planner:
    """The static memory plan for a binding of the symbols: the compile's own for its binding."""

    program: Program
    plan: MemoryPlan

    def __call__(self, bindings: dict[str, int]) -> MemoryPlan:
        from ...passes.memory import static_plan

        if dict(self.plan.bindings or {}) == bindings:
            return self.plan
        return static_plan(self.program, bindings)


def constants(program: Program) -> dict[str, np.ndarray]:
    """The arrays of the program's weights and constants, C-contiguous, by value name."""
    out = {}
    for op in program.body.ops:
        if op.name == "np.weight":
            out[op.result.name] = np.asarray(weight_data(program, op.attrs["name"]), order="C")
        elif op.has(Trait.CONSTANT):
            out[op.result.name] = np.asarray(op.attrs["value"].array, order="C")
    return out


@dataclass
class KeptProgram:
    """An O2 runner whose every step runs without compiling (native segments, native or numpy
    kernels and fallbacks), as the executable cache keeps it: the steps name ops by their place
    in the program, and what compiling added to the report comes along."""

    steps: list[tuple]
    buffer_index: dict[str, int]
    records: list                   # the report's kernel records, warnings and stats of the compile
    warnings: list[str]
    stats: dict[str, int]

    portable = True

    @classmethod
    def of(cls, program: Program, items: Sequence, buffer_index: dict[str, int], report) -> KeptProgram | None:
        """The kept form of a runner's steps, or None when one needs a compiler (numba segments)."""
        if not all(getattr(i.fn if isinstance(i, Segment) else i.run, "portable", False)
                   for i in items if not isinstance(i, Fallback)):
            return None
        place = {id(op): k for k, op in enumerate(program.body.ops)}
        steps = [("segment", i.name, [place[id(op)] for op in i.ops], i.params, i.fn) if isinstance(i, Segment)
                 else ("call", place[id(i.op)], i.run, i.reason) if isinstance(i, KernelCall)
                 else ("fallback", place[id(i.op)], i.reason) for i in items]
        return cls(steps, buffer_index, list(report.kernels), [w for w in report.warnings if w.startswith("O2:")],
                   {k: v for k, v in report.stats.items() if k.startswith("o2_")})

    def load(self) -> None:
        """Loads every native library now (NativeLoadError when one cannot be)."""
        for step in self.steps:
            if step[0] in ("segment", "call"):
                (step[4] if step[0] == "segment" else step[2]).load()

    def runner(self, program: Program, report) -> O2Runner:
        """The runner over `program` (the cached post-pass program these steps came from)."""
        ops = list(program.body.ops)
        items = [Segment(s[1], [ops[k] for k in s[2]], s[3], s[4]) if s[0] == "segment"
                 else KernelCall(ops[s[1]], s[2], s[3]) if s[0] == "call" else Fallback(ops[s[1]], s[2])
                 for s in self.steps]
        # nothing was compiled or looked up: every kernel came with the entry
        report.kernels.extend(replace(r, cache_hit=True, miss_reason="", compile_seconds=0.0, timing=KernelTiming())
                              for r in self.records)
        report.warnings.extend(self.warnings)
        report.stats.update(self.stats)
        return O2Runner(program, items, None, self.buffer_index, report.memory, Planner(program, report.memory),
                        constants(program))


# Keys under which a call's env holds the arena, the offsets and the BLAS addresses: tuples, so
# that no value's name can be one. A parameter whose key is not in env is resolved by _arg.
_ARENA, _OFFSETS, _BLAS = ("arena",), ("offsets",), ("blas",)
_KEYS = {ParamRole.ARENA: _ARENA, ParamRole.OFFSETS: _OFFSETS, ParamRole.BLAS: _BLAS}


def _env_key(param: KernelParam):
    return param.value if param.role is ParamRole.VALUE else _KEYS.get(param.role)

LAYOUTS_KEPT = 4         # arenas kept, for the most recent bindings of the symbols (plans are kept for all)


class _Layout:
    """The plan, arena and offsets for one binding of the symbols."""

    def __init__(self, plan: MemoryPlan, buffer_index: dict[str, int]):
        self.plan = plan
        self.records = {b.name: b for b in plan.buffers}
        self.arena = empty((max(plan.arena_bytes, 1),), np.uint8, "the arena of every intermediate")
        self.offsets = np.zeros(max(len(buffer_index), 1), np.int64)
        for name, slot in buffer_index.items():
            self.offsets[slot] = self.records[name].offset or 0       # zero-byte buffers have no offset


class O2Runner:
    """Runs the steps of a WholeGraph: segment functions and fallback ops, in order."""

    # A computed result is an output buffer (reused only when no one holds it), a detached
    # fallback result or a constant's copy, never arena memory (runtime/ownership.py).
    fresh_outputs = True

    def __init__(self, program: Program, items: Sequence[Segment | KernelCall | Fallback], module,
                 buffer_index: dict[str, int], plan: MemoryPlan, planner: Callable[[dict[str, int]], MemoryPlan],
                 constants: dict[str, np.ndarray]):
        self.program = program
        self.values: dict[str, Value] = {v.name: v for v in program.inputs}
        for op in program.body.ops:
            self.values.update({r.name: r for r in op.results})
        # each segment with its compiled function (native already, else from numba's `module`)
        self.steps = [replace(item, fn=getattr(module, item.name)) if isinstance(item, Segment) and item.fn is None
                      else item for item in items]
        self.buffer_index = buffer_index
        self.plan, self.planner = plan, planner
        self.constants = constants
        self.plans: dict[tuple, MemoryPlan] = {}       # per binding of the symbols
        self.layouts: dict[tuple, _Layout] = {}        # the most recent bindings' arenas, oldest first
        self.input_names = [v.name for v in program.inputs]
        self.output_names = [v.name for v in program.outputs]
        produced = {r.name for item in items if isinstance(item, Segment) for op in item.ops for r in op.results}
        produced.update(r.name for item in items if isinstance(item, KernelCall) for r in item.op.results)
        # Root output buffers the runner allocates: those segments write, and those that host
        # temporaries (an output a fallback computes may lend its bytes to values before it).
        roots = [b.name for b in plan.buffers if b.kind == "output" and b.alias_of is None]
        hosts = {b.region for b in plan.buffers}
        self.owned = [n for n in roots if n in produced or n in hosts]
        self.out_buffers = OutputBuffers([self.values[n] for n in self.owned])
        self._hosts = hosts
        # Outputs the plan lodges in a donated input's array (memory.py: they own no buffer).
        inputs, outputs = set(self.input_names), set(self.output_names)
        self.lodged = {b.name for b in plan.buffers if b.kind == "inplace" and b.alias_of in inputs
                       and b.name in outputs}
        self.donations: list = []
        self._keys = [tuple(_env_key(p) for p in step.params) if isinstance(step, Segment) else None
                      for step in self.steps]
        self._blas = blas_addresses() if any(_BLAS in k for k in self._keys if k is not None) else None
        self._static_layout: _Layout | None = None    # a static program's one layout, once made
        self.kept: KeptProgram | None = None      # what the executable cache may keep (compile_program sets it)
        # (op uid, region number) -> the region compiled as a program of its own (the compiler sets it):
        # a control-flow op, a fallback, runs its loop from the host through them
        self.regions: dict[tuple[int, int], Callable] = {}
        self.loops: dict[int, Callable] = {}      # op uid -> its native loop (the compiler sets it)

    def donate(self, program: Program, donations: list) -> None:
        """Outputs the plan lodges in donated inputs, and outputs a segment writes that lend no bytes
        to temporaries, go into their donated inputs."""
        self.donations = []
        for d in donations:
            if d.output_name in self.lodged or (d.output_name in self.owned and d.output_name not in self._hosts):
                self.donations.append(d)
            else:
                d.mode = "copy"

    def layout(self, bindings: dict[str, int]) -> _Layout:
        """The arena for these symbol values. Arenas are kept for the last LAYOUTS_KEPT bindings
        only, so a program called with ever new batch sizes holds a few arenas, not one per size."""
        key = tuple(sorted(bindings.items())) if bindings else ()
        layout = self.layouts.pop(key, None)
        if layout is None:
            if key not in self.plans:
                self.plans[key] = self.planner(bindings)
            layout = _Layout(self.plans[key], self.buffer_index)
            if len(self.layouts) >= LAYOUTS_KEPT:
                del self.layouts[next(iter(self.layouts))]
        self.layouts[key] = layout
        if not key:
            self._static_layout = layout
        return layout

    def __call__(self, arrays: list[np.ndarray], bindings: dict[str, int]) -> list[np.ndarray]:
        layout = self._static_layout if not bindings and self._static_layout is not None else self.layout(bindings)
        env: dict = dict(self.constants)
        env[_ARENA], env[_OFFSETS], env[_BLAS] = layout.arena, layout.offsets, self._blas
        if self._blas is not None:
            free_threads()          # the products' BLAS threads: the cores free now (blas.gemm_cblas)
        for name, a in zip(self.input_names, arrays):
            flags = a.flags
            env[name] = a if flags.c_contiguous and flags.writeable else np.array(a, order="C")
        donated = {}
        for d in self.donations:
            if safe_to_donate(arrays, d):
                donated[d.output_name] = arrays[d.input]
            elif d.output_name in self.lodged:
                # Compiled code writes this output through the input's name: when this call's array
                # cannot take it (it backs another argument), the input gets a private copy instead.
                env[d.input_name] = np.array(arrays[d.input], order="C")
        if donated:
            skip = {k for k, n in enumerate(self.owned) if n in donated}
            env.update((n, b) for n, b in zip(self.owned, self.out_buffers.get(bindings, skip)) if b is not None)
            env.update(donated)
        else:
            env.update(zip(self.owned, self.out_buffers.get(bindings)))
        for step, keys in zip(self.steps, self._keys):
            if keys is not None:
                # values already at hand (inputs, constants, outputs, the arena) are most parameters
                step.fn(*[env[k] if k in env else self._arg(p, env, layout, bindings)
                          for k, p in zip(keys, step.params)])
            elif isinstance(step, KernelCall):
                # the group's kernel writes its results where the plan put them, as a segment would
                step.run([self._value(v.name, env, layout, bindings) for v in step.op.operands],
                         [self._value(r.name, env, layout, bindings) for r in step.op.results], bindings)
            else:
                self._fallback(step.op, env, layout, bindings)
        return [(env[n] if n in env else self._value(n, env, layout, bindings)).copy() if n in self.constants
                else env[n] if n in env else self._value(n, env, layout, bindings) for n in self.output_names]

    def write_fast(self, w, inputs: list[str]) -> list[str] | None:
        """A static call written into `w` (backends/fastcall.py): its segments called with the one
        arena; None where a step is not a segment, an argument or a result is not at hand (a view
        into the arena or an output) or inputs are donated."""
        layout = self._static_layout
        if layout is None or self.donations or any(keys is None for keys in self._keys):
            return None
        env = {name: w.ref(value, "c") for name, value in self.constants.items()}
        env.update(zip(self.input_names, inputs))
        env[_ARENA], env[_OFFSETS], env[_BLAS] = w.ref(layout.arena, "arena"), w.ref(layout.offsets, "offsets"), \
            w.ref(self._blas, "blas")
        env.update(zip(self.owned, w.outputs([self.values[n].type for n in self.owned], self.out_buffers)))
        if self._blas is not None:
            w.line(f"{w.ref(free_threads, 'free_threads')}()")
        for step, keys in zip(self.steps, self._keys):
            args = []
            for key, param in zip(keys, step.params):
                if key in env:
                    args.append(env[key])
                elif param.role is ParamRole.HOST and param.value in env:
                    args.append(f"{env[param.value]}.reshape(-1).view({w.ref(np.uint8, 'uint8')})")
                else:
                    return None
            written = getattr(step.fn, "write_fast", None)
            if written is None or not written(w, args):
                w.line(f"{w.ref(step.fn, 'segment')}({', '.join(args)})")
        if not all(n in env for n in self.output_names):
            return None
        return [f"{env[n]}.copy()" if n in self.constants else env[n] for n in self.output_names]

    def profile_steps(self, call, arrays: list[np.ndarray], bindings: dict[str, int], repeats: int, warmup: int,
                      recorder) -> str:
        """Profiling (runtime/profile.py's StepProfiler): an instrumented copy of the program with one
        segment per group, each segment and each numpy fallback between them timed into `recorder`."""
        from ...ir.opdef import Trait
        from ...report import CompileReport
        from .o2 import compile_program

        scratch = CompileReport(program=self.program.name, level="O2", target="cpu", memory=self.plan)
        instrumented = compile_program(self.program, scratch, {"cache": None}, segment_groups=1)
        for k, step in enumerate(instrumented.steps):
            if isinstance(step, Segment):
                ops = [op for op in step.ops if op.name == "jit.group" or op.has(Trait.VIEW)]
                instrumented.steps[k] = replace(step, fn=recorder.timed(k, ops, step.fn))
            elif isinstance(step, KernelCall):
                instrumented.steps[k] = replace(step, run=recorder.timed(k, [step.op], step.run))
        fallback = instrumented._fallback
        step_of = {id(step.op): k for k, step in enumerate(instrumented.steps) if isinstance(step, Fallback)}

        def timed_fallback(op, *rest):          # numpy ops between segments are steps too
            start = recorder.clock()
            fallback(op, *rest)
            recorder.add(step_of[id(op)], [op], start, recorder.clock() - start)

        instrumented._fallback = timed_fallback
        for n in range(warmup + repeats):
            recorder.begin_call()
            instrumented(arrays, bindings)
            if n < warmup:
                recorder.samples.clear()
                recorder.starts.clear()
        return "instrumented"

    def _arg(self, param: KernelParam, env, layout: _Layout, bindings):
        role = param.role
        if role is ParamRole.ARENA:
            return layout.arena
        if role is ParamRole.OFFSETS:
            return layout.offsets
        if role is ParamRole.BLAS:
            return blas_addresses()
        if role is ParamRole.HOST:
            return self._value(param.value, env, layout, bindings).reshape(-1).view(np.uint8)
        if role is ParamRole.SYMBOL:
            return bindings[param.value]
        return self._value(param.value, env, layout, bindings)

    def _value(self, name: str, env, layout: _Layout, bindings) -> np.ndarray:
        """A value's array: given, produced by a fallback, or viewed where the plan put it."""
        if name in env:
            return env[name]
        record = layout.records[name]
        t = self.values[name].type
        shape = evaluate_shape(t.shape, bindings)
        if record.alias_of is not None:
            array = self._value(record.alias_of, env, layout, bindings).reshape(shape)
        else:
            base = layout.arena if record.region in (None, "arena") else \
                self._value(record.region, env, layout, bindings).reshape(-1).view(np.uint8)
            n = int(np.prod(shape, dtype=np.int64)) * t.dtype.itemsize
            offset = record.offset or 0
            array = base[offset:offset + n].view(t.dtype).reshape(shape)
        env[name] = array
        return array

    def _fallback(self, op, env, layout: _Layout, bindings) -> None:
        args = [self._value(v.name, env, layout, bindings) for v in op.operands]
        if op.uid in self.loops:
            for r, value in zip(op.results, self.loops[op.uid](args)):
                env[r.name] = detached(value, args)
            return
        # groups run op by op; control-flow ops run their loops through the compiled regions
        out = Interpreter(self.program, bindings, check=False, regions=self.regions).run_op(op, args)
        for r, value in zip(op.results, out):
            env[r.name] = detached(value, args)

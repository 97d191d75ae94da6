"""Measured run time: `jl.profile(f_or_exe, *args, repeats=N)` and `exe.profile(*args, repeats=N)`.

The whole call is timed as it runs; then each step is timed over the same repeats, and
the medians go into `exe.report.profile` (docs/profiling.md):

- O0 and O1 time each top-level step (a group's kernel launch, a library op, a view);
- O2 on the CPU runs an instrumented variant of the program-wide function, split into
  one segment per group, and times each segment;
- cuda times each step with events recorded on its stream (O2 walks the same launches
  step by step instead of through its generated launch sequence).

A kernel shared by several groups is one record that lists them all.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..errors import JitlabError
from ..ir.core import Operation
from ..ir.opdef import Trait
from ..ir.shapes import evaluate_shape
from ..report import KernelProfile, ProfileRecord, StepProfile, TimeStats
from . import bounds
from .flops import step_flops

Clock = Callable[[], float]


def stats(samples: Sequence[float]) -> TimeStats:
    """Median, min, max and spread (max - min) of `samples` seconds."""
    if not samples:
        return TimeStats(median=0.0, min=0.0, max=0.0, spread=0.0)
    lo, hi = min(samples), max(samples)
    return TimeStats(median=statistics.median(samples), min=lo, max=hi, spread=hi - lo)


def moved_bytes(op: Operation, bindings: dict[str, int]) -> int:
    """Bytes an op reads and writes: its operands and results (a view moves none)."""
    if op.has(Trait.VIEW) or op.has(Trait.MEMORY):
        return 0
    return sum(math.prod(evaluate_shape(v.type.shape, bindings)) * v.type.dtype.itemsize
               for v in (*op.operands, *op.results))


class Recorder:
    """Seconds per step per repeat, and each step's start after its call's first step."""

    def __init__(self, clock: Clock = time.perf_counter):
        self.clock = clock
        self.samples: dict[int, list[float]] = {}
        self.starts: dict[int, list[float]] = {}
        self.ops: dict[int, list[Operation]] = {}
        self.streams: dict[int, int] = {}
        self.call_start: float | None = None       # when the current call's first step started

    def begin_call(self) -> None:
        self.call_start = None

    def add(self, index: int, ops: list[Operation], start: float, seconds: float, stream: int = 0) -> None:
        if self.call_start is None:
            self.call_start = start
        self.ops[index] = ops
        self.streams[index] = stream
        self.samples.setdefault(index, []).append(seconds)
        self.starts.setdefault(index, []).append(start - self.call_start)

    def timed(self, index: int, ops: list[Operation], fn: Callable, stream: int = 0) -> Callable:
        """`fn` wrapped to record its wall time as step `index`."""
        def run(*args, **kwargs):
            start = self.clock()
            out = fn(*args, **kwargs)
            self.add(index, ops, start, self.clock() - start, stream)
            return out
        return run


def profile(target, *args, repeats: int = 5, warmup: int = 1, **kwargs) -> ProfileRecord:
    """Times a jitted function or an Executable on these arguments; the record goes into its
    report's `profile` (and is returned)."""
    from .executable import Executable

    if isinstance(target, Executable):
        exe = target
    elif callable(getattr(target, "executable_for", None)):    # a jitted function: the frontend sits above
        (exe, args), kwargs = target.executable_for(args, kwargs), {}
    else:
        raise JitlabError(f"jl.profile takes a jitted function or an Executable, got {type(target).__name__}")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise JitlabError(f"jl.profile: repeats must be a positive int, got {repeats!r}")
    return _profile(exe, args, kwargs, repeats, warmup)


def timed(call: Callable[[], Any], repeats: int) -> list[float]:
    """Wall-clock seconds of each of `repeats` calls of `call` (warm it up first)."""
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - start)
    return seconds


def _profile(exe, args: tuple, kwargs: dict, repeats: int, warmup: int) -> ProfileRecord:
    from .signature import bind_keywords, check_inputs

    if kwargs:
        args = tuple(bind_keywords(exe.input_names, args, kwargs, f"@{exe.program.name}"))
    for _ in range(warmup):
        exe(*args)
    total = timed(lambda: exe(*args), repeats)
    _, bindings = check_inputs(exe.program, args, exe.input_names)
    mode, recorder = _steps(exe, args, bindings, repeats, warmup)
    record = ProfileRecord(level=exe.level, target=exe.target, mode=mode, repeats=repeats, warmup=warmup,
                           bindings=dict(bindings), total=stats(total))
    record["steps"] = _step_records(recorder, bindings)
    record["kernels"] = _kernel_records(record["steps"])
    record["bounds"] = bounds.for_target(exe.target)
    for k in exe.report.kernels:
        if k.key not in record["kernels"] and k.group is None:      # O2's program-wide function: the whole call
            record["kernels"][k.key] = _program_record(record)
    exe.report.profile = record
    return record


@runtime_checkable
class StepProfiler(Protocol):
    """A runner that times its own steps, where profile cannot wrap them from outside (the CPU
    backend's O2 program, cuda's launches): it runs `repeats` timed calls after `warmup` ones,
    filling `recorder` (a Recorder), and says how it timed them."""

    def profile_steps(self, call: Callable[[], object], arrays: list[np.ndarray], bindings: dict[str, int],
                      repeats: int, warmup: int, recorder: Recorder) -> str: ...


def _steps(exe, args: tuple, bindings: dict[str, int], repeats: int, warmup: int) -> tuple[str, Recorder]:
    """Times every step over `repeats` calls: how depends on the level and the runner."""
    from .o1 import O1Runner
    from .signature import check_inputs

    runner = exe._runner
    if exe.level == "O0":
        return "steps", _run_o0(exe, args, bindings, repeats, warmup)
    if isinstance(runner, O1Runner):
        return "steps", _run_wrapped(exe, args, runner, repeats, warmup)
    if isinstance(runner, StepProfiler):
        arrays, _ = check_inputs(exe.program, args, exe.input_names)
        recorder = Recorder()
        mode = runner.profile_steps(lambda: exe(*args), [np.ascontiguousarray(a) for a in arrays], bindings,
                                    repeats, warmup, recorder)
        return mode, recorder
    exe.report.warnings.append(f"profile: {type(runner).__name__} runs steps jitlab cannot time one by one; "
                               "only the whole call is timed")
    return "total", Recorder()


def _run_o0(exe, args, bindings, repeats: int, warmup: int) -> Recorder:
    from ..dialects.reference import Interpreter
    from .signature import check_inputs

    arrays, _ = check_inputs(exe.program, args, exe.input_names)
    ops = [op for op in exe.program.body.ops if not op.has(Trait.TERMINATOR)]
    recorder = Recorder()
    for call in range(warmup + repeats):
        interp = Interpreter(exe.program, bindings, check=False)
        env = dict(zip(exe.program.inputs, arrays))
        recorder.begin_call()
        for k, op in enumerate(ops):
            start = recorder.clock()
            outs = interp.run_op(op, [env[v] for v in op.operands])
            if call >= warmup:
                recorder.add(k, [op], start, recorder.clock() - start)
            env.update(zip(op.results, outs))
    return recorder


def _run_wrapped(exe, args, runner, repeats: int, warmup: int) -> Recorder:
    """O1: each step's run() timed in place (an instance attribute over the class's method)."""
    recorder = Recorder()
    for _ in range(warmup):
        exe(*args)
    for k, step in enumerate(runner.steps):
        step.run = recorder.timed(k, [step.op], step.run)
    try:
        with exe.general_path():
            for _ in range(repeats):
                recorder.begin_call()
                exe(*args)
    finally:
        for step in runner.steps:
            del step.run
    return recorder


def _step_records(recorder: Recorder, bindings: dict[str, int]) -> list[StepProfile]:
    records = []
    for k in sorted(recorder.samples):
        ops = recorder.ops[k]
        groups = [op for op in ops if op.name == "jit.group"]
        head = groups[0] if groups else ops[0]
        records.append(StepProfile(index=k, uid=head.uid, name=head.name,
                                   group=head.attrs["id"] if head.name == "jit.group" else None,
                                   kernel=head.attrs.get("key") if head.name == "jit.group" else None,
                                   **stats(recorder.samples[k]), start=statistics.median(recorder.starts[k]),
                                   stream=recorder.streams[k],
                                   launches=len(groups) or int(not head.has(Trait.VIEW)),
                                   bytes=sum(moved_bytes(op, bindings) for op in ops), flops=step_flops(ops, bindings),
                                   ops=[op.uid for op in ops]))
    return records


def _program_record(record: ProfileRecord) -> KernelProfile:
    steps = record["steps"]
    return KernelProfile(**record["total"], calls=1, launches=1, seconds=record["total"]["median"],
                         bytes=sum(s["bytes"] for s in steps), flops=_sum_flops(steps),
                         groups=[s["group"] for s in steps if s["group"] is not None])


def _kernel_records(steps: list[StepProfile]) -> dict[str, KernelProfile]:
    """Per kernel key: time per launch, launches and bytes per call, and every group it ran for."""
    by_key: dict[str, list[StepProfile]] = {}
    for step in steps:
        if step["kernel"] is not None:
            by_key.setdefault(step["kernel"], []).append(step)
    out = {}
    for key, runs in by_key.items():
        launches = sum(r["launches"] for r in runs)
        seconds = sum(r["median"] for r in runs)
        per = [r["median"] / max(r["launches"], 1) for r in runs]
        out[key] = KernelProfile(**stats(per), calls=launches, launches=launches, seconds=seconds,
                                 bytes=sum(r["bytes"] for r in runs), flops=_sum_flops(runs),
                                 groups=[r["group"] for r in runs])
    return out


def _sum_flops(steps: list[StepProfile]) -> int | None:
    counts = [s["flops"] for s in steps]
    return None if None in counts else sum(counts)

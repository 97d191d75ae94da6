"""`jl.compile`: a Program through its level's pipeline into an Executable."""

from __future__ import annotations

import dataclasses
import functools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from .backends.base import Backend, Kernel, backend_for_target, get_backend, kernel_record, resolve_target
from .dialects.reference import Interpreter
from .dialects.scf import REGION_OPS, region_program
from .errors import JitlabError
from .ir.builder import InferClock
from .ir.core import Operation
from .ir.program import Program
from .passes import PassContext, PassManager, pipeline_for
from .passes.manager import INSTRUMENTATION, split_instrumentation
from .progress import progress
from .report import (
    CompileReport,
    CompileTiming,
    KernelRecord,
    KernelTiming,
    LoopRecord,
    MemoryPlan,
    RecomputeAttempt,
    snapshot,
)
from .runtime import (
    compile_log,
    compile_pool,
    memexec,  # noqa: F401  (the interpreter's mem op handlers)
)
from .runtime.dryrun import plan_for_level
from .runtime.executable import Executable, InPlaceRunner, Runner
from .runtime.o1 import O1Runner
from .units import parse_bytes

LEVEL_NAMES = ("O0", "O1", "O2")
ENGINE_PASSES_VAR = "JITLAB_ENGINE_PASSES"
CLAIM_STAGE = ("mark-subgraphs", "fuse")    # the level's marking stage that engine passes replace
COMMON_OPTIONS = ("memory_limit", "donate", "recompute", "bindings", "cache", "progress", "executable_cache")
PASS_OPTIONS = ("donate", "bindings", "memory_limit", "streams")    # the options passes read (PassContext's fields)


def check_options(options: dict, target: str, where: str = "jl.compile") -> None:
    """Refuses option names that neither jitlab nor the target's backend reads."""
    known = (*COMMON_OPTIONS, *INSTRUMENTATION, *backend_for_target(target).options)
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise JitlabError(f"{where}: unknown option{'s' if len(unknown) > 1 else ''} "
                          f"{', '.join(map(repr, unknown))}; the {target} target takes "
                          f"{', '.join(sorted(known))}")


def engine_pipeline(backend_passes: tuple[str, ...], engine_passes: str | None) -> str:
    """The translate passes to run: `engine_passes`, else $JITLAB_ENGINE_PASSES, else the backend's."""
    if engine_passes is None:
        engine_passes = os.environ.get(ENGINE_PASSES_VAR)
    if engine_passes is None:
        return ",".join(backend_passes)
    if not isinstance(engine_passes, str):
        raise JitlabError(f"engine_passes is a pipeline string like 'p1,p2', got {type(engine_passes).__name__}")
    return engine_passes.strip()


def _pipeline(level: str, target: str, engine_passes: str | None = None, before_claim: tuple[str, ...] = ()) -> str:
    """The level's passes with its marking stage replaced by `before_claim` and the engine
    passes, then the passes the target's backend needs last (e.g. assign-streams on cuda)."""
    if level == "O0":
        return pipeline_for(level)
    backend = backend_for_target(target)
    names = pipeline_for(level).split(",")
    at = names.index(CLAIM_STAGE[0])
    engine = engine_pipeline(backend.translate_passes, engine_passes)
    names[at:at + len(CLAIM_STAGE)] = [*before_claim, *([engine] if engine else [])]
    return ",".join([*names, *backend.late_passes])


@dataclass(frozen=True, kw_only=True)
class CompileOptions:
    """jl.compile's arguments, read and checked once: what its three steps (pipeline, passes, runner) take."""

    level: str
    target: str
    passes: str | None = None            # a pipeline in place of the level's
    engine_passes: str | None = None     # translate passes in place of the backend's
    verify_each: bool | None = None
    memory_limit: int | None = None      # bytes
    donate: tuple[str, ...] = ()         # inputs whose arrays outputs may be written into
    recompute: bool = False              # recompute activations until the memory plan fits memory_limit
    bindings: dict[str, int] | None = None
    instrumentation: dict[str, Any] = field(default_factory=dict)   # the pass manager's: print_after_all...
    given: dict[str, Any] = field(default_factory=dict)     # the options as given: the executable cache's key

    @classmethod
    def read(cls, options: dict[str, Any], level: str, target: str, passes: str | None = None,
             engine_passes: str | None = None, verify_each: bool | None = None) -> CompileOptions:
        """Checks `options` (jl.compile's keyword arguments) for `target`, a resolved target name."""
        check_options(options, target)
        limit = options.get("memory_limit")
        opts = cls(level=level, target=target, passes=passes, engine_passes=engine_passes, verify_each=verify_each,
                   memory_limit=None if limit is None else parse_bytes(limit),
                   donate=tuple(options.get("donate", ())),
                   recompute=bool(options.get("recompute", False)) and passes is None,
                   bindings=options.get("bindings"), instrumentation=split_instrumentation(options)[0],
                   given=dict(options))
        if opts.recompute and opts.memory_limit is None:
            raise JitlabError("jl.compile(recompute=True) needs memory_limit=BYTES")
        return opts

    @property
    def backend(self) -> Backend:
        return backend_for_target(self.target)

    @property
    def limit_on_device(self) -> bool:
        """Whether the backend's runner checks memory_limit against its own device's memory: the
        host plan's check is then skipped (it describes buffers this backend does not allocate)."""
        return (self.memory_limit is not None and self.level != "O0" and not self.recompute
                and self.backend.checks_memory_limit)

    @property
    def executable_limit(self) -> int | None:
        """The limit the Executable checks each call's host plan against: none where the backend
        checks it, or where recompute planned under it (a warning says when it could not)."""
        return None if self.recompute or self.limit_on_device else self.memory_limit

    def backend_options(self) -> dict[str, Any]:
        """The options the backend's hooks read: cache, progress, bindings, its own, donate and
        the memory limit it checks itself."""
        taken = {"memory_limit", "donate", "recompute", "executable_cache", *INSTRUMENTATION}
        options = {k: v for k, v in self.given.items() if k not in taken}
        if self.donate:
            options["donate"] = self.donate
        if self.limit_on_device:
            options["memory_limit"] = self.memory_limit
        return options

    def pass_context(self, report: CompileReport) -> PassContext:
        return PassContext(report=report, target=self.target, backends=backend_for_target, donate=self.donate,
                           bindings=self.bindings, memory_limit=self.memory_limit if self.limit_on_device else None,
                           streams=self.given.get("streams"))


def compile(program: Program, level: str = "O1", target: str = "auto", passes: str | None = None,
            verify_each: bool | None = None, engine_passes: str | None = None, **options) -> Executable:
    """Runs the level's pipeline (or `passes`) on a copy of `program` and returns an Executable.

    `engine_passes` ("p1,p2") are the translate passes that claim ops into engine groups, in
    place of the target backend's own (default: $JITLAB_ENGINE_PASSES, else the backend's).

    Pass-manager options (print_after_all, print_after_change, stop_after) go to the pass
    manager; donate, bindings, memory_limit and streams reach the passes in their context;
    the rest go to the backend."""
    if not isinstance(program, Program):
        raise JitlabError(f"jl.compile takes a jl.Program, got {type(program).__name__} "
                          "(use jl.trace, jl.parse or jl.onnx.load first)")
    if level not in LEVEL_NAMES:
        raise JitlabError(f"unknown level {level!r}; levels are {', '.join(LEVEL_NAMES)}")
    began, inferred, started = time.perf_counter(), InferClock.seconds, time.time()
    if options.get("donate") and program.own_names:      # inputs go by the model's own names too
        options = dict(options, donate=tuple(program.ir_input_name(n) for n in options["donate"]))
    opts = CompileOptions.read(options, level, resolve_target(target), passes, engine_passes, verify_each)
    start = time.perf_counter()
    compiled, report, exe_cache_seconds = compile_passes(program, opts)
    report.seconds["passes"] = time.perf_counter() - start
    run = make_runner(compiled, report, opts)
    exe = Executable(compiled, level, opts.target, report, run, source=program, memory_limit=opts.executable_limit,
                     donations=_donations(compiled, run, report, opts))
    report.warnings += [str(note) for note in program.loops if not note.captured]
    exe.replan = functools.partial(_plan_of_compile, opts=opts)
    exe.donated_in_plan = _donated_in_plan(opts)
    if exe.memory_limit is not None and not any(v.type.symbols for v in compiled.inputs):
        exe.check_memory({})      # static shapes: fail now, before anything runs
    report.timing = _timing(report, program, time.perf_counter() - began, InferClock.seconds - inferred,
                            start - began, exe_cache_seconds)
    compile_log.add(exe, started, report.timing.total)
    return exe


def pipeline(opts: CompileOptions, before_claim: tuple[str, ...] = ()) -> str:
    """Step 1: the passes to run, `opts.passes` or the level's (see `_pipeline`)."""
    if opts.passes is not None:
        return opts.passes
    return _pipeline(opts.level, opts.target, opts.engine_passes, before_claim)


def compile_passes(program: Program, opts: CompileOptions) -> tuple[Program, CompileReport, float]:
    """Step 2: the pipeline run on a copy of `program` (under the memory limit, with recompute),
    or its result from the executable cache; with the seconds the cache took."""
    from .runtime import executable_cache  # with what it imports (platformdirs, pickle), on first use

    start = time.perf_counter()
    entry = _cache_entry(program, opts)
    cached = executable_cache.load(entry, program) if entry is not None else None
    seconds = time.perf_counter() - start
    if cached is not None:
        return *cached, seconds
    if opts.level != "O0":
        opts.backend.prepare(program, opts.level, opts.backend_options())
    if opts.recompute:
        compiled, report = _passes_under_limit(program, opts)
    else:
        compiled, report = _run_passes(program, opts, pipeline(opts))
    report.graph = snapshot(compiled)
    if entry is not None:
        stored = time.perf_counter()
        report.executable_cache = executable_cache.store(entry, compiled, report, program)
        seconds += time.perf_counter() - stored
    return compiled, report, seconds


def make_runner(compiled: Program, report: CompileReport, opts: CompileOptions) -> Runner:
    """Step 3: what runs the compiled program: the interpreter at O0; else the backend's O2 program,
    its executor or the O1 runner over the groups' kernels."""
    from .runtime import executable_cache

    if opts.level == "O0":
        return InterpreterRunner(compiled)
    start = time.perf_counter()
    backend, options = opts.backend, opts.backend_options()
    run = None
    if opts.level == "O2" and report.memory is not None and report.memory.mode == "static":
        run = _kept_program(compiled, report)
        if run is None:
            run = backend.compile_program(compiled, report, options)
            executable_cache.store_kernels(report.executable_cache, getattr(run, "kept", None))
    regions, loops = compile_regions(compiled, opts, report)
    if run is None:
        kernels = lower_groups(compiled, opts.target, report, options)
        run = backend.executor(compiled, kernels, report, options) or \
            O1Runner(compiled, kernels, report.memory, regions, loops)
    if regions and not isinstance(run, O1Runner):
        run.regions = regions       # the O2 runner's fallback steps interpret with them
        run.loops = loops           # and run its native loops
    report.seconds["kernels"] = time.perf_counter() - start
    return run


def compile_regions(compiled: Program, opts: CompileOptions, report: CompileReport, build: bool = True
                    ) -> tuple[dict[tuple[int, int], Runner], dict[int, Callable]]:
    """Each region of the program's control-flow ops as a program of its own, at the same level and
    target (its groups fused inside it, its own loops compiled the same way), keyed by (op uid, region
    number); and the ops the backend runs as one native loop, by uid. The others run from the host,
    calling their regions per iteration; report.loops says which and why.

    A region's kernels are built only where the host runs it every iteration: a native loop's regions
    run from the host only on its error path, so they are built then. With `build` False (the regions
    of a loop inside another), native loops are only written, for the loop around them to inline."""
    runners: dict[tuple[int, int], Runner] = {}
    loops: dict[int, Callable] = {}
    for op in compiled.body.ops:
        if op.name not in REGION_OPS:
            continue
        regions = [Region(region_program(op, r, compiled), opts) for r in range(len(op.regions))]
        nested: dict[int, Callable] = {}
        for r, region in enumerate(regions):
            runners[(op.uid, r)] = region
            nested.update(region.loops)
            report.stats["region_programs"] = report.stats.get("region_programs", 0) + 1
            report.stats["region_groups"] = report.stats.get("region_groups", 0) + region.groups
        loop, reason = opts.backend.compile_loop(op, [region.compiled for region in regions], _host(runners, op),
                                                 opts.backend_options(), nested)
        if loop is not None and build:
            reason = loop.build()
            loop = None if reason else loop
        if loop is None and build:
            for region in regions:
                region.executable   # noqa: B018 (built now: the host runs it every iteration)
        if loop is not None:
            loops[op.uid] = loop
        report.loops.append(_loop_record(op, loop, reason))
    if report.loops:                    # a program without control flow keeps the stats it always had
        report.stats["native_loops"] = len(loops)
    return runners, loops


def _host(runners: dict[tuple[int, int], Runner], op: Operation) -> Callable:
    """Runs region r of `op` from the host (a native loop's error path: static shapes, no bindings)."""
    return lambda r, values: runners[(op.uid, r)](values, {})


def _loop_record(op: Operation, loop, reason: str) -> LoopRecord:
    plan = getattr(loop, "plan", None)
    record = LoopRecord(uid=op.uid, op=op.name, loc=str(op.loc) if op.loc is not None else None,
                        native=loop is not None, reason=reason)
    if plan is not None:
        record.buffers = [{"values": values, "bytes": nbytes} for values, nbytes in plan.buffers]
        record.iteration_bytes, record.carried_bytes = plan.iteration_bytes, plan.carried_bytes
    return record


class Region:
    """One region of a control-flow op as a program of its own: its passes run now (a native loop
    inlines the compiled body), its kernels when it is first run from the host, as a Runner."""

    def __init__(self, program: Program, opts: CompileOptions):
        self.program, self.level, self.target, self.verify_each = program, opts.level, opts.target, opts.verify_each
        self.given = {k: v for k, v in opts.given.items() if k not in ("donate", "memory_limit", "recompute")}
        own = CompileOptions.read(self.given, opts.level, opts.target, verify_each=opts.verify_each)
        self.compiled, report, _ = compile_passes(program, own)
        self.groups = sum(op.name == "jit.group" for op in self.compiled.body.ops)
        # its own loops, written (not built) for a native loop around them to inline
        self.loops = compile_regions(self.compiled, own, report, build=False)[1]

    @functools.cached_property
    def executable(self) -> Executable:
        return compile(self.program, self.level, self.target, verify_each=self.verify_each, **self.given)

    @property
    def runner(self) -> Runner:
        """The compiled region's runner: the cuda executor queues a region's steps itself, on device buffers."""
        return self.executable._runner

    def __call__(self, arrays: list, bindings: dict[str, int]) -> list:
        # through the executable, whose static calls take its generated fast path (a fifth of the
        # runner's own cost per call on a small body)
        return list(self.executable(*arrays))


@dataclass
class InterpreterRunner:
    """O0: the reference interpreter runs the program op by op."""

    program: Program

    def __call__(self, arrays: list, bindings: dict[str, int]) -> list:
        return Interpreter(self.program, bindings).run(arrays)


def _timing(report: CompileReport, program: Program, seconds: float, inferred: float, setup_seconds: float,
            exe_cache_seconds: float) -> CompileTiming:
    """Where the compile went: the frontend's time (on `program`), this compile's `seconds`, the
    stages the report timed and the parts of every kernel."""
    parts = KernelTiming()
    for kernel in report.kernels:
        parts.add(kernel.timing)
    return CompileTiming(total=program.trace_seconds + seconds, trace=program.trace_seconds, setup=setup_seconds,
                         shape_inference=program.trace_inference_seconds + inferred,
                         passes=report.seconds.get("passes", 0.0), executable_cache=exe_cache_seconds,
                         kernels=report.seconds.get("kernels", 0.0), kernel_parts=parts)


def _cache_entry(program: Program, opts: CompileOptions):
    """Where the executable cache keeps this compile's passes' result (an executable_cache.Entry);
    None when it is off or the caller asked for the passes' printouts or a partial pipeline."""
    from .runtime import executable_cache

    if not executable_cache.enabled(opts.given) or opts.instrumentation:
        return None
    keyed = {k: v for k, v in opts.given.items() if k != "executable_cache"}
    return executable_cache.entry_for(program, opts.level, opts.target, pipeline(opts),
                                      dict(keyed, verify_each=opts.verify_each))


def _plan_of_compile(program: Program, bindings: dict[str, int], *, opts: CompileOptions) -> MemoryPlan:
    """The memory plan a compile of `program` with these settings makes: its passes only, no kernel built."""
    quiet = dataclasses.replace(opts, instrumentation={}, verify_each=False)
    if quiet.recompute:
        compiled, _ = _passes_under_limit(program, quiet)
    else:
        compiled, _ = _run_passes(program, quiet, pipeline(quiet))
    return plan_for_level(compiled, opts.level, bindings, _donated_in_plan(opts))


def _donated_in_plan(opts: CompileOptions) -> tuple[str, ...]:
    """The donated inputs plan-memory lets outputs live in (passes/liveness.py, donated_in_place)."""
    return opts.donate if opts.backend.donates_in_place else ()


RECOMPUTE_ATTEMPTS = 4


def _run_passes(program: Program, opts: CompileOptions, passes: str) -> tuple[Program, CompileReport]:
    """The pipeline `passes` run on a copy of `program`, with a fresh report."""
    report = CompileReport(program=program.name, level=opts.level, target=opts.target)
    manager = PassManager.parse(passes, verify_each=opts.verify_each, **opts.instrumentation)
    return manager.run(program.clone(), opts.pass_context(report)), report


def _passes_under_limit(program: Program, opts: CompileOptions) -> tuple[Program, CompileReport]:
    """Runs the pipeline with `recompute`, lowering the pass's target while the memory plan is over `limit`.

    The pass estimates peaks on the program before fusion; fusion and scheduling can move the
    planned peak above that estimate (a fused group may yield two values where one lived), so the
    plan, not the estimate, decides: each retry lowers the target by the plan's overshoot."""
    limit = opts.memory_limit
    target_bytes, attempts = limit, []
    while True:
        # recompute runs right before fusion, after the simplifications that would undo it
        passes = pipeline(opts, (f"recompute{{limit={target_bytes}}}",))
        compiled, report = _run_passes(program, opts, passes)
        planned = report.memory.peak_bytes if report.memory is not None else None
        attempts.append(RecomputeAttempt(target_bytes=target_bytes, planned_peak_bytes=planned))
        reached = report.recompute is not None and report.recompute.reached
        # a target lowered to nothing is out of reach (the plan's overhead alone is over the limit)
        if planned is None or planned <= limit or not reached or len(attempts) == RECOMPUTE_ATTEMPTS \
                or target_bytes <= planned - limit:
            break
        target_bytes -= planned - limit
    if report.recompute is not None:
        report.recompute.limit_bytes, report.recompute.planned_peak_bytes = limit, planned
        report.recompute.attempts = attempts
    if planned is not None and planned > limit and reached:
        report.warnings.append(f"recompute: the memory plan's peak is {planned} bytes, over the limit of {limit} "
                               f"after {len(attempts)} attempt(s) lowering the pass's target")
    return compiled, report


def _donations(compiled: Program, run: Runner, report: CompileReport, opts: CompileOptions) -> list:
    """Pairs outputs with donated inputs, lets the runner write in place where safe, records the pairs.
    O0's interpreter copies; compiled programs are written in place where the backend says its
    runners do (they are then InPlaceRunners)."""
    if not opts.donate:
        return []
    from .passes.donation import plan_donations

    in_place = opts.level != "O0" and opts.backend.donates_in_place
    donations = plan_donations(compiled, opts.donate, in_place=in_place)
    if in_place:
        cast(InPlaceRunner, run).donate(compiled, [d for d in donations if d.mode == "in place"])
    report.donations = donations
    return donations


def lower_groups(program: Program, target: str, report: CompileReport, options: dict) -> dict[int, Kernel]:
    """Compiles every jit.group with its backend; groups with equal keys share a kernel. Once a
    kernel has had to be compiled (it was not in the disk cache), the rest compile side by side in
    worker processes and come back through the cache (runtime/compile_pool.py). A warm start takes
    the kernels the executable cache kept instead, when it kept them (native libraries)."""
    from .runtime import executable_cache

    groups = [op for op in program.body.ops if op.name == "jit.group"]
    shared = {op.uid: _sharing_key(op, target) for op in groups}

    def key(op) -> str:
        return shared[op.uid]

    ready = _kept_kernels(report)
    elsewhere: set[str] = set()        # compiled by a worker: this process loaded the result
    if ready is None:
        ready, elsewhere = _compile_kernels(program, groups, key, target, options)
        executable_cache.store_kernels(report.executable_cache, executable_cache.KeptKernels(ready))
    return _record_kernels(groups, ready, elsewhere, report, key)


def _kept_kernels(report: CompileReport) -> dict[str, Kernel] | None:
    """The kernels the executable cache kept for this entry, as loaded: nothing was compiled."""
    from .runtime import executable_cache

    start = time.perf_counter()
    kept = executable_cache.load_kernels(report.executable_cache)
    if not isinstance(kept, executable_cache.KeptKernels):
        return None
    seconds = (time.perf_counter() - start) / max(len(kept.kernels), 1)
    for kernel in kept.kernels.values():
        kernel.cache_hit, kernel.miss_reason, kernel.compile_seconds = True, "", seconds
        kernel.timing = KernelTiming(kernel_cache=seconds)
    report.stats["kernels_from_executable_cache"] = len(kept.kernels)
    return kept.kernels


def _kept_program(compiled: Program, report: CompileReport):
    """O2: the runner the executable cache kept for this entry (its native segments and kernels
    loaded), or None."""
    from .runtime import executable_cache

    kept = executable_cache.load_kernels(report.executable_cache)
    if kept is None or not hasattr(kept, "runner"):
        return None
    run = kept.runner(compiled, report)
    report.stats["kernels_from_executable_cache"] = len(report.kernels)
    return run


def _compile_kernels(program: Program, groups: list, key: Callable[[Operation], str], target: str,
                     options: dict) -> tuple[dict[str, Kernel], set[str]]:
    first: dict[str, Operation] = {}
    for op in groups:
        first.setdefault(key(op), op)
    by_backend: dict[int, tuple[Backend, list[Operation]]] = {}
    for op in first.values():
        backend = _backend_of(op, target)
        by_backend.setdefault(id(backend), (backend, []))[1].append(op)
    distinct = [op for backend, ops in by_backend.values() for op in backend.prepare_kernels(ops, options)]

    def compile_one(op) -> Kernel:
        return _backend_of(op, target).compile_group(op, options)

    ready: dict[str, Kernel] = {}
    elsewhere: set[str] = set()
    with progress(len(distinct), f"compiling @{program.name}", disable=not options.get("progress", True)) as bar:
        for n, op in enumerate(distinct):
            bar.step(_label(op))
            ready[key(op)] = compile_one(op)
            if _compiled(ready[key(op)]):
                elsewhere = _compile_rest(distinct[n + 1:], compile_one, ready, bar, key)
                break
        for op in distinct:
            if key(op) not in ready:
                if key(op) not in elsewhere:      # a worker's kernels were counted as they finished
                    bar.step(_label(op))
                ready[key(op)] = compile_one(op)
    return ready, elsewhere


def _record_kernels(groups: list, ready: dict[str, Kernel], elsewhere: set[str], report: CompileReport,
                    sharing_key: Callable[[Operation], str]) -> dict[int, Kernel]:
    """Each group's kernel by the group op's uid; a KernelRecord per distinct kernel, in group order."""
    kernels: dict[int, Kernel] = {}
    records: dict[str, KernelRecord] = {}
    for op in groups:
        key = sharing_key(op)
        kernels[op.uid] = kernel = ready[key]
        if key in records:
            records[key].reused_by.append(op.attrs["id"])
            continue
        records[key] = kernel_record(kernel, op, worker=key in elsewhere)
        report.kernels.append(records[key])
    codes = {r.code or r.key for r in records.values()}
    report.stats["kernels_compiled"] = len(codes)
    report.stats["kernels_reused"] = len(kernels) - len(codes)
    if elsewhere:
        report.stats["kernels_by_workers"] = len(elsewhere)
    return kernels


def _compiled(kernel: Kernel) -> bool:
    """Whether numba compiled the kernel (rather than loading it from its cache): others will need it too."""
    return kernel.timing is not None and kernel.timing.llvm > 0


def _compile_rest(rest: list, compile_one, ready: dict[str, Kernel], bar, sharing_key: Callable[[Operation], str]
                  ) -> set[str]:
    """Compiles `rest` here and in worker processes, here's kernels into `ready`; returns the keys
    the workers compiled (loaded afterwards from the cache). Nothing without a second process."""
    workers = min(compile_pool.processes() - 1, len(rest) - 1)
    if workers <= 0:
        return set()
    finished: set[int] = set()

    def done(i: int) -> None:
        finished.add(i)
        bar.step(_label(rest[i]))

    here = compile_pool.run(rest, compile_one, compile_one, workers, done)
    ready.update({sharing_key(rest[i]): kernel for i, kernel in here.items()})
    return {sharing_key(rest[i]) for i in finished - here.keys()}


def _label(group) -> str:
    return f"group {group.attrs['id']}: " + ", ".join(_op_names(group))


def _sharing_key(group, target: str) -> str:
    """Groups share a kernel when their keys agree and so does what else their backend tells
    kernels apart by (which operands arrive read-only: Backend.kernel_variant)."""
    return _backend_of(group, target).sharing_key(group)


def _backend_of(group, target: str) -> Backend:
    """The backend that compiles `group`: the engine's that claimed it, else the target's."""
    return get_backend(group.attrs["backend"]) if group.attrs["backend"] else backend_for_target(target)


def _op_names(group) -> list[str]:
    names = [op.name.split(".", 1)[1] for op in group.body.ops if op.opdef.dialect == "np"
             and op.name != "np.constant"]
    return names if len(names) <= 4 else names[:3] + [f"... {len(names) - 3} more"]


def opt(program: Program, pipeline: str, verify_each: bool = True, report: CompileReport | None = None,
        **options) -> Program:
    """Runs a pass pipeline on a copy of `program`, as mlir-opt does, and returns the result;
    each pass run is appended to `report.passes` when a report is given. Options: the pass
    manager's (print_after_all...), and the pass context's target, donate, bindings,
    memory_limit and streams."""
    if not isinstance(program, Program):
        raise JitlabError(f"jl.opt takes a jl.Program, got {type(program).__name__}")
    instrumentation, options = split_instrumentation(options)
    unknown = sorted(set(options) - {"target", *PASS_OPTIONS})
    if unknown:
        raise JitlabError(f"jl.opt: unknown option{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                          f"it takes target, {', '.join(PASS_OPTIONS)} and {', '.join(INSTRUMENTATION)}")
    if "donate" in options:
        options["donate"] = tuple(options["donate"])
    if options.get("memory_limit") is not None:
        options["memory_limit"] = parse_bytes(options["memory_limit"])
    ctx = PassContext(report=report if report is not None else CompileReport(program=program.name),
                      backends=backend_for_target, **options)
    return PassManager.parse(pipeline, verify_each=verify_each, **instrumentation).run(program.clone(), ctx)

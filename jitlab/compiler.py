"""`jl.compile`: a Program through its level's pipeline into an Executable."""

from __future__ import annotations

import dataclasses
import functools
import os
import time

from .backends.base import Kernel, available_targets, backend_for_target, get_backend
from .errors import JitlabError
from .ir.builder import InferClock
from .ir.core import Operation
from .ir.program import Program
from .passes import PassContext, PassManager, pipeline_for
from .passes.manager import INSTRUMENTATION, split_instrumentation
from .progress import progress
from .report import CompileReport, CompileTiming, KernelRecord, KernelTiming, snapshot
from .runtime import (
    compile_pool,
    memexec,  # noqa: F401  (the interpreter's mem op handlers)
)
from .runtime.dryrun import parse_bytes
from .runtime.executable import Executable
from .runtime.o1 import O1Runner
from .runtime.reference import Interpreter

LEVEL_NAMES = ("O0", "O1", "O2")
ENGINE_PASSES_VAR = "JITLAB_ENGINE_PASSES"
CLAIM_STAGE = ("mark-subgraphs", "fuse")    # the level's marking stage that engine passes replace
COMMON_OPTIONS = ("memory_limit", "donate", "recompute", "bindings", "cache", "progress", "executable_cache")


def resolve_target(target: str) -> str:
    """"auto" is cuda when a GPU (or numba's CUDA simulator) is there, else cpu; "cuda" must be
    there; any other name must be a registered backend (built in or a plugin)."""
    from .backends.numba_cuda import device

    if target == "auto":
        return "cuda" if device.available() else "cpu"
    if not isinstance(target, str):
        raise JitlabError(f"a target is a name, got {type(target).__name__}; targets are "
                          f"{', '.join(available_targets())}")
    backend_for_target(target)          # unknown or broken targets fail here, naming the plugin
    if target == "cuda":
        device.require()
    return target


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


def compile(program: Program, level: str = "O1", target: str = "auto", passes: str | None = None,
            verify_each: bool | None = None, engine_passes: str | None = None, **options) -> Executable:
    """Runs the level's pipeline (or `passes`) on a copy of `program` and returns an Executable.

    `engine_passes` ("p1,p2") are the translate passes that claim ops into engine groups, in
    place of the target backend's own (default: $JITLAB_ENGINE_PASSES, else the backend's).

    Pass-manager options (print_after_all, print_after_change, stop_after) go to the
    pass manager; every other option is handed to the passes in their context."""
    if not isinstance(program, Program):
        raise JitlabError(f"jl.compile takes a jl.Program, got {type(program).__name__} "
                          "(use jl.trace, jl.parse or jl.onnx.load first)")
    if level not in LEVEL_NAMES:
        raise JitlabError(f"unknown level {level!r}; levels are {', '.join(LEVEL_NAMES)}")
    began, inferred = time.perf_counter(), InferClock.seconds
    target = resolve_target(target)
    check_options(options, target)
    start = time.perf_counter()
    setup_seconds = start - began
    from .runtime import executable_cache  # with what it imports (platformdirs, pickle), on first use

    entry = _cache_entry(program, level, target, passes, engine_passes, verify_each, options)
    cached = executable_cache.load(entry, program) if entry is not None else None
    exe_cache_seconds = time.perf_counter() - start
    memory_limit = options.pop("memory_limit", None)
    memory_limit = None if memory_limit is None else parse_bytes(memory_limit)
    donate = options.pop("donate", ())
    recompute = options.pop("recompute", False) and passes is None
    if recompute and memory_limit is None:
        raise JitlabError("jl.compile(recompute=True) needs memory_limit=BYTES")
    options.pop("executable_cache", None)
    instrumentation, options = split_instrumentation(options)
    if donate:
        options["donate"] = tuple(donate)     # fusion and the memory plan take donated inputs into account
    if memory_limit is not None and level != "O0" and backend_for_target(target).checks_memory_limit \
            and not recompute:
        options["memory_limit"], memory_limit = memory_limit, None
    replan = functools.partial(_plan_of_compile, level=level, target=target, passes=passes,
                               engine_passes=engine_passes, limit=memory_limit if recompute else None,
                               options=dict(options))
    if cached is not None:
        compiled, report = cached
        memory_limit = None if recompute else memory_limit    # as in the compile that stored it
    elif recompute:
        compiled, report = _passes_under_limit(program, level, target, engine_passes, memory_limit,
                                               verify_each, instrumentation, options)
        memory_limit = None       # the plan is under the limit, or a warning says how far off it is
    else:
        pipeline = passes if passes is not None else _pipeline(level, target, engine_passes)
        compiled, report = _run_passes(program, level, target, pipeline, verify_each, instrumentation, options)
    if cached is None:
        report.graph = snapshot(compiled)
        if entry is not None:
            stored = time.perf_counter()
            report.executable_cache = executable_cache.store(entry, compiled, report, program)
            exe_cache_seconds += time.perf_counter() - stored
    report.seconds["passes"] = time.perf_counter() - start
    if level == "O0":
        def run(arrays, bindings):
            return Interpreter(compiled, bindings).run(arrays)
    else:
        start = time.perf_counter()
        backend = backend_for_target(target)
        run = None
        if level == "O2" and report.memory is not None and report.memory.mode == "static":
            run = backend.compile_program(compiled, report, options)
        if run is None:
            kernels = lower_groups(compiled, target, report, options)
            run = backend.executor(compiled, kernels, report, options) or O1Runner(compiled, kernels, report.memory)
        report.seconds["kernels"] = time.perf_counter() - start
    exe = Executable(compiled, level, target, report, run, source=program, memory_limit=memory_limit,
                     donations=_donations(compiled, donate, run, report))
    exe.replan = replan
    exe.donated_in_plan = _donated_in_plan(target, options)
    if memory_limit is not None and not any(v.type.symbols for v in compiled.inputs):
        exe.check_memory({})      # static shapes: fail now, before anything runs
    report.timing = _timing(report, program, time.perf_counter() - began, InferClock.seconds - inferred,
                            setup_seconds, exe_cache_seconds)
    return exe


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


def _cache_entry(program: Program, level: str, target: str, passes: str | None, engine_passes: str | None,
                 verify_each, options: dict):
    """Where the executable cache keeps this compile's passes' result (an executable_cache.Entry);
    None when it is off or the caller asked for the passes' printouts or a partial pipeline."""
    from .runtime import executable_cache

    if not executable_cache.enabled(options) or set(options) & set(INSTRUMENTATION):
        return None
    pipeline = passes if passes is not None else _pipeline(level, target, engine_passes)
    keyed = {k: v for k, v in options.items() if k != "executable_cache"}
    return executable_cache.entry_for(program, level, target, pipeline, dict(keyed, verify_each=verify_each))


def _plan_of_compile(program: Program, bindings: dict[str, int], *, level: str, target: str, passes: str | None,
                     engine_passes: str | None, limit: int | None, options: dict):
    """The MemoryPlan a compile of `program` with these settings makes: its passes only, no kernel built."""
    from .runtime.dryrun import plan_for_level

    if limit is not None:
        compiled, _ = _passes_under_limit(program, level, target, engine_passes, limit, False, {}, options)
    else:
        pipeline = passes if passes is not None else _pipeline(level, target, engine_passes)
        compiled, _ = _run_passes(program, level, target, pipeline, False, {}, options)
    return plan_for_level(compiled, level, bindings, _donated_in_plan(target, options))


def _donated_in_plan(target: str, options: dict) -> tuple[str, ...]:
    """The donated inputs plan-memory lets outputs live in (passes/liveness.py, donated_in_place)."""
    return tuple(options.get("donate", ())) if backend_for_target(target).donates_in_place else ()


RECOMPUTE_ATTEMPTS = 4


def _run_passes(program: Program, level: str, target: str, pipeline: str, verify_each, instrumentation: dict,
                options: dict) -> tuple[Program, CompileReport]:
    """The pipeline run on a copy of `program`, with a fresh report."""
    report = CompileReport(program=program.name, level=level, target=target)
    compiled = PassManager.parse(pipeline, verify_each=verify_each, **instrumentation).run(
        program.clone(), PassContext(report=report, target=target, options=dict(options)))
    return compiled, report


def _passes_under_limit(program: Program, level: str, target: str, engine_passes, limit: int, verify_each,
                        instrumentation: dict, options: dict) -> tuple[Program, CompileReport]:
    """Runs the pipeline with `recompute`, lowering the pass's target while the memory plan is over `limit`.

    The pass estimates peaks on the program before fusion; fusion and scheduling can move the
    planned peak above that estimate (a fused group may yield two values where one lived), so the
    plan, not the estimate, decides: each retry lowers the target by the plan's overshoot."""
    target_bytes, attempts = limit, []
    while True:
        # recompute runs right before fusion, after the simplifications that would undo it
        pipeline = _pipeline(level, target, engine_passes, (f"recompute{{limit={target_bytes}}}",))
        compiled, report = _run_passes(program, level, target, pipeline, verify_each, instrumentation, options)
        planned = report.memory.peak_bytes if report.memory is not None else None
        attempts.append({"target_bytes": target_bytes, "planned_peak_bytes": planned})
        record = report.recompute or {}
        # a target lowered to nothing is out of reach (the plan's overhead alone is over the limit)
        if planned is None or planned <= limit or not record.get("reached") or len(attempts) == RECOMPUTE_ATTEMPTS \
                or target_bytes <= planned - limit:
            break
        target_bytes -= planned - limit
    if report.recompute is not None:
        report.recompute.update(limit_bytes=limit, planned_peak_bytes=planned, attempts=attempts)
    if planned is not None and planned > limit and record.get("reached"):
        report.warnings.append(f"recompute: the memory plan's peak is {planned} bytes, over the limit of {limit} "
                               f"after {len(attempts)} attempt(s) lowering the pass's target")
    return compiled, report


def _donations(compiled: Program, donate, run, report: CompileReport) -> list:
    """Pairs outputs with donated inputs, lets the runner write in place where safe, records the pairs."""
    if not donate:
        return []
    from .runtime.donation import plan_donations

    donations = plan_donations(compiled, donate, in_place=hasattr(run, "donate"))
    if hasattr(run, "donate"):
        run.donate(compiled, [d for d in donations if d.mode == "in place"])
    report.donations = [dataclasses.asdict(d) for d in donations]
    return donations


def lower_groups(program: Program, target: str, report: CompileReport, options: dict) -> dict[int, Kernel]:
    """Compiles every jit.group with its backend; groups with equal keys share a kernel. Once a
    kernel has had to be compiled (it was not in the disk cache), the rest compile side by side in
    worker processes and come back through the cache (runtime/compile_pool.py)."""
    groups = [op for op in program.body.ops if op.name == "jit.group"]
    first: dict[str, Operation] = {}
    for op in groups:
        first.setdefault(_sharing_key(op), op)
    distinct = list(first.values())

    def compile_one(op) -> Kernel:
        backend = get_backend(op.attrs["backend"]) if op.attrs["backend"] else backend_for_target(target)
        return backend.compile_group(op, options)

    ready: dict[str, Kernel] = {}
    elsewhere: set[str] = set()        # compiled by a worker: this process loaded the result
    with progress(len(distinct), f"compiling @{program.name}", disable=not options.get("progress", True)) as bar:
        for n, op in enumerate(distinct):
            bar.step(_label(op))
            ready[_sharing_key(op)] = compile_one(op)
            if _compiled(ready[_sharing_key(op)]):
                elsewhere = _compile_rest(distinct[n + 1:], compile_one, ready, bar)
                break
        for op in distinct:
            if _sharing_key(op) not in ready:
                if _sharing_key(op) not in elsewhere:      # a worker's kernels were counted as they finished
                    bar.step(_label(op))
                ready[_sharing_key(op)] = compile_one(op)
    return _record_kernels(groups, ready, elsewhere, report)


def _record_kernels(groups: list, ready: dict[str, Kernel], elsewhere: set[str], report: CompileReport
                    ) -> dict[int, Kernel]:
    """Each group's kernel by the group op's uid; a KernelRecord per distinct kernel, in group order."""
    kernels: dict[int, Kernel] = {}
    records: dict[str, KernelRecord] = {}
    for op in groups:
        key = _sharing_key(op)
        kernels[op.uid] = kernel = ready[key]
        if key in records:
            records[key].reused_by.append(op.attrs["id"])
            continue
        records[key] = KernelRecord(op.attrs["key"], kernel.backend, kernel.source, kernel.compile_seconds,
                                    kernel.cache_hit, kernel.miss_reason, op.attrs["id"], kernel.choice,
                                    timing=kernel.timing or KernelTiming(), worker=key in elsewhere)
        report.kernels.append(records[key])
    report.stats["kernels_compiled"] = len(records)
    report.stats["kernels_reused"] = len(kernels) - len(records)
    if elsewhere:
        report.stats["kernels_by_workers"] = len(elsewhere)
    return kernels


def _compiled(kernel: Kernel) -> bool:
    """Whether numba compiled the kernel (rather than loading it from its cache): others will need it too."""
    return kernel.timing is not None and kernel.timing.llvm > 0


def _compile_rest(rest: list, compile_one, ready: dict[str, Kernel], bar) -> set[str]:
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
    ready.update({_sharing_key(rest[i]): kernel for i, kernel in here.items()})
    return {_sharing_key(rest[i]) for i in finished - here.keys()}


def _label(group) -> str:
    return f"group {group.attrs['id']}: " + ", ".join(_op_names(group))


def _sharing_key(group) -> str:
    """Groups share a kernel when their keys agree and so does which operands arrive read-only
    (weights): a kernel compiled for a writable array does not take a read-only one."""
    from .backends.numba_cpu.backend import is_readonly

    return group.attrs["key"] + "".join("r" if is_readonly(v) else "w" for v in group.operands)


def _op_names(group) -> list[str]:
    names = [op.name.split(".", 1)[1] for op in group.block.ops if op.opdef.dialect == "np"
             and op.name != "np.constant"]
    return names if len(names) <= 4 else names[:3] + [f"... {len(names) - 3} more"]


def opt(program: Program, pipeline: str, verify_each: bool = True, report: CompileReport | None = None,
        **options) -> Program:
    """Runs a pass pipeline on a copy of `program`, as mlir-opt does, and returns the result;
    each pass run is appended to `report.passes` when a report is given."""
    if not isinstance(program, Program):
        raise JitlabError(f"jl.opt takes a jl.Program, got {type(program).__name__}")
    instrumentation, options = split_instrumentation(options)
    ctx = PassContext(report=report if report is not None else CompileReport(program=program.name),
                      options=options)
    return PassManager.parse(pipeline, verify_each=verify_each, **instrumentation).run(program.clone(), ctx)

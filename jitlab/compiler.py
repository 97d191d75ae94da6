"""`jl.compile`: a Program through its level's pipeline into an Executable."""

from __future__ import annotations

import time

from .backends.base import Kernel, backend_for_target, get_backend
from .errors import JitlabError
from .ir.program import Program
from .passes import PassContext, PassManager, pipeline_for
from .progress import progress
from .report import CompileReport, KernelRecord, snapshot
from .runtime.executable import Executable
from .runtime.o1 import O1Runner
from .runtime.reference import Interpreter

LEVEL_NAMES = ("O0", "O1", "O2")
TARGETS = ("cpu", "cuda", "auto")


def resolve_target(target: str) -> str:
    """"auto" is cuda when a GPU (or numba's CUDA simulator) is there, else cpu; "cuda" must be there."""
    from .backends.numba_cuda import device

    if target == "auto":
        return "cuda" if device.available() else "cpu"
    if target not in TARGETS:
        raise JitlabError(f"unknown target {target!r}; targets are {', '.join(TARGETS)}")
    if target == "cuda":
        device.require()
    return target


def _pipeline(level: str, target: str) -> str:
    """The level's passes, then those the target's backend asks for (e.g. assign-streams on cuda)."""
    extra = backend_for_target(target).translate_passes if level != "O0" else ()
    return ",".join([pipeline_for(level), *extra])


def compile(program: Program, level: str = "O1", target: str = "auto", passes: str | None = None,
            verify_each: bool = False, **options) -> Executable:
    """Runs the level's pipeline (or `passes`) on a copy of `program` and returns an Executable."""
    if not isinstance(program, Program):
        raise JitlabError(f"jl.compile takes a jl.Program, got {type(program).__name__} "
                          "(use jl.trace, jl.parse or jl.onnx.load first)")
    if level not in LEVEL_NAMES:
        raise JitlabError(f"unknown level {level!r}; levels are {', '.join(LEVEL_NAMES)}")
    target = resolve_target(target)
    start = time.perf_counter()
    report = CompileReport(program=program.name, level=level, target=target)
    ctx = PassContext(report=report, target=target, options=dict(options))
    manager = PassManager.parse(passes if passes is not None else _pipeline(level, target), verify_each=verify_each)
    compiled = manager.run(program.clone(), ctx)
    report.graph = snapshot(compiled)
    report.seconds["passes"] = time.perf_counter() - start
    if level == "O0":
        def run(arrays, bindings):
            return Interpreter(compiled, bindings).run(arrays)
    else:
        start = time.perf_counter()
        kernels = lower_groups(compiled, target, report, options)
        report.seconds["kernels"] = time.perf_counter() - start
        run = backend_for_target(target).executor(compiled, kernels, report, options) or O1Runner(compiled, kernels)
    return Executable(compiled, level, target, report, run, source=program)


def lower_groups(program: Program, target: str, report: CompileReport, options: dict) -> dict[int, Kernel]:
    """Compiles every jit.group with its backend; groups with equal keys share a kernel."""
    kernels: dict[int, Kernel] = {}
    by_key: dict[str, tuple[Kernel, KernelRecord]] = {}
    groups = [op for op in program.body.ops if op.name == "jit.group"]
    distinct = len({op.attrs["key"] for op in groups})
    with progress(distinct, f"compiling @{program.name}", disable=not options.get("progress", True)) as bar:
        for op in groups:
            key = op.attrs["key"]
            if key in by_key:
                kernel, record = by_key[key]
                record.reused_by.append(op.attrs["id"])
            else:
                bar.step(f"group {op.attrs['id']}: " + ", ".join(_op_names(op)))
                kernel = get_backend(op.attrs["backend"]).compile_group(op, options)
                record = KernelRecord(key, kernel.backend, kernel.source, kernel.compile_seconds,
                                      kernel.cache_hit, kernel.miss_reason, op.attrs["id"], kernel.choice)
                report.kernels.append(record)
                by_key[key] = (kernel, record)
            kernels[op.uid] = kernel
    report.stats["kernels_compiled"] = len(by_key)
    report.stats["kernels_reused"] = len(kernels) - len(by_key)
    return kernels


def _op_names(group) -> list[str]:
    names = [op.name.split(".", 1)[1] for op in group.block.ops if op.opdef.dialect == "np"
             and op.name != "np.constant"]
    return names if len(names) <= 4 else names[:3] + [f"... {len(names) - 3} more"]


def opt(program: Program, pipeline: str, verify_each: bool = True, **options) -> Program:
    """Runs a pass pipeline on a copy of `program`, as mlir-opt does, and returns the result."""
    if not isinstance(program, Program):
        raise JitlabError(f"jl.opt takes a jl.Program, got {type(program).__name__}")
    ctx = PassContext(options=dict(options))
    return PassManager.parse(pipeline, verify_each=verify_each).run(program.clone(), ctx)

"""`jl.compile`: a Program through its level's pipeline into an Executable."""

from __future__ import annotations

import time

from .errors import JitlabError
from .ir.program import Program
from .passes import PassContext, PassManager, pipeline_for
from .report import CompileReport, snapshot
from .runtime import memexec  # noqa: F401  (the interpreter's mem op handlers)
from .runtime.dryrun import parse_bytes
from .runtime.executable import Executable
from .runtime.reference import Interpreter

LEVEL_NAMES = ("O0", "O1", "O2")
TARGETS = ("cpu", "cuda", "auto")


def resolve_target(target: str) -> str:
    if target == "auto":
        return "cpu"
    if target not in TARGETS:
        raise JitlabError(f"unknown target {target!r}; targets are {', '.join(TARGETS)}")
    return target


def compile(program: Program, level: str = "O1", target: str = "auto", passes: str | None = None,
            verify_each: bool = False, **options) -> Executable:
    """Runs the level's pipeline (or `passes`) on a copy of `program` and returns an Executable."""
    if not isinstance(program, Program):
        raise JitlabError(f"jl.compile takes a jl.Program, got {type(program).__name__} "
                          "(use jl.trace, jl.parse or jl.onnx.load first)")
    if level not in LEVEL_NAMES:
        raise JitlabError(f"unknown level {level!r}; levels are {', '.join(LEVEL_NAMES)}")
    target = resolve_target(target)
    memory_limit = options.pop("memory_limit", None)
    memory_limit = None if memory_limit is None else parse_bytes(memory_limit)
    start = time.perf_counter()
    report = CompileReport(program=program.name, level=level, target=target)
    ctx = PassContext(report=report, target=target, options=dict(options))
    manager = PassManager.parse(passes if passes is not None else pipeline_for(level), verify_each=verify_each)
    compiled = manager.run(program.clone(), ctx)
    report.graph = snapshot(compiled)
    report.seconds["passes"] = time.perf_counter() - start

    def run(arrays, bindings):
        return Interpreter(compiled, bindings).run(arrays)

    exe = Executable(compiled, level, target, report, run, source=program, memory_limit=memory_limit)
    if memory_limit is not None and not any(v.type.symbols for v in compiled.inputs):
        exe.check_memory({})      # static shapes: fail now, before anything runs
    return exe


def opt(program: Program, pipeline: str, verify_each: bool = True, **options) -> Program:
    """Runs a pass pipeline on a copy of `program`, as mlir-opt does, and returns the result."""
    if not isinstance(program, Program):
        raise JitlabError(f"jl.opt takes a jl.Program, got {type(program).__name__}")
    ctx = PassContext(options=dict(options))
    return PassManager.parse(pipeline, verify_each=verify_each).run(program.clone(), ctx)

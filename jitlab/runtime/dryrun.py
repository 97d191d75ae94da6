"""Dry run and memory budget: a level's schedule, memory plan and peak for any input shapes,
computed from types alone (nothing is run or allocated, so the shapes may be far larger
than the machine), and the early OutOfMemoryError when the peak is over a limit or over
what the machine holds."""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Mapping, Sequence

from ..backends.base import resolve_target
from ..errors import InputError, JitlabError, OutOfMemoryError
from ..ir.opdef import Trait
from ..ir.program import Program
from ..ir.shapes import evaluate_shape
from ..ir.types import TensorType
from ..passes.memory import dynamic_plan, eager_plan, static_plan
from ..report import MemoryPlan
from ..units import format_bytes
from .signature import bind_symbols, check_dims_nonnegative

PLANNERS = {"O0": eager_plan, "O1": dynamic_plan, "O2": static_plan}
def bindings_for_shapes(program: Program, shapes: Mapping[str, Sequence[int]] | None,
                        names: Sequence[str] | None = None) -> dict[str, int]:
    """The symbol values that input `shapes` (by input name) give; static inputs may be left out."""
    names = list(names or program.own_input_names)
    given = check_shapes(program, shapes, names)
    bindings = bind_symbols(names, [v.type for v in program.inputs], given, program.constraints)
    check_dims_nonnegative(program, bindings)
    return bindings


def check_shapes(program: Program, shapes: Mapping[str, Sequence[int]] | None,
                 names: Sequence[str]) -> list[tuple[int, ...]]:
    """Each input's shape: the one given (an InputError for an unknown name or a wrong rank), or its static one."""
    shapes = dict(shapes or {})
    unknown = sorted(set(shapes) - set(names))
    if unknown:
        raise InputError(f"dry run: @{program.name} has no input named {', '.join(map(repr, unknown))}; "
                         f"its inputs are {', '.join(names)}")
    return [_shape_for(name, v.type, shapes.get(name)) for name, v in zip(names, program.inputs)]


def source_at(program: Program, shapes: Mapping[str, Sequence[int]] | None,
              names: Sequence[str]) -> tuple[Program, dict[str, int], dict[str, int]]:
    """`program` (not yet compiled) as a compile at these input shapes gets it, the symbol values
    it needs, and the sizes for messages and views (a replaced static dim named `d512`). A traced
    function is traced again (frontend/jit.py, Retrace): sizes baked into its ops follow; other
    programs are re-inferred (runtime/reinfer.py), and a static one is made static again."""
    from .reinfer import changed_dims, concretize, reinfer, symbols_for

    changed = changed_dims(program, shapes or {}, names)
    if not changed:
        bindings = bindings_for_shapes(program, shapes, names)
        return program, bindings, bindings
    symbols = symbols_for(changed)
    if program.retrace is not None:
        new = program.retrace(dict(shapes))
        bindings = bindings_for_shapes(new, shapes, names)
        return new, bindings, {**bindings, **{symbols[pos]: size for pos, (_, size) in changed.items()}}
    new = reinfer(program, symbols, names)
    bindings = bindings_for_shapes(new, shapes, names)
    if all(v.type.is_static for v in program.inputs):
        return concretize(new, bindings), {}, bindings
    return new, bindings, bindings


def _shape_for(name: str, t: TensorType, shape: Sequence[int] | None) -> tuple[int, ...]:
    if shape is None:
        if not t.is_static:
            raise InputError(f"dry run: input '{name}' is {t}; give its shape")
        return t.shape
    try:
        dims = tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        raise InputError(f"dry run: the shape of input '{name}' must be a tuple of ints, got {shape!r}") from None
    if len(dims) != t.rank or any(d < 0 for d in dims):
        raise InputError(f"dry run: input '{name}' is {t}, got shape {list(dims)}")
    return dims


def plan_for_level(program: Program, level: str, bindings: Mapping[str, int] | None = None,
                   donate: Sequence[str] = ()) -> MemoryPlan:
    """The memory plan that `level` executes `program` (already compiled for it) with, outputs
    written into the `donate` inputs' arrays as plan-memory planned them."""
    if level not in PLANNERS:
        raise JitlabError(f"unknown level {level!r}; levels are {', '.join(PLANNERS)}")
    if level == "O2":
        return static_plan(program, bindings, donate=donate)
    return dynamic_plan(program, bindings, donate=donate) if level == "O1" else eager_plan(program, bindings)


def dry_run(program: Program, shapes: Mapping[str, Sequence[int]] | None = None, level: str = "O1",
            target: str = "auto") -> MemoryPlan:
    """Compiles `program`'s pipeline for `level` (passes only: no kernel is built) for the
    shapes given (static dims given other sizes are re-inferred), and returns its memory plan;
    nothing runs and nothing is allocated."""
    from ..passes import PassContext, PassManager, pipeline_for

    if not isinstance(program, Program):
        raise JitlabError(f"dry_run takes a jl.Program, got {type(program).__name__} (use exe.dry_run "
                          "for an Executable)")
    shapes = program.by_own_names(shapes or {})
    program, bindings, sizes = source_at(program, shapes, program.own_input_names)
    ctx = PassContext(target=resolve_target(target), bindings=bindings)
    compiled = PassManager.parse(pipeline_for(level), verify_each=False, snapshots=False).run(program.clone(), ctx)
    plan = plan_for_level(compiled, level, bindings)
    plan.bindings = sizes           # the sizes the dry run put in, for messages and views
    return plan


def check_budget(plan: MemoryPlan, limit: int, where: str, what: str = "the memory limit", extra: int = 0) -> None:
    """Raises OutOfMemoryError naming the peak and the largest live tensors when `plan` (and `extra`
    bytes of input copies) needs more than `limit`."""
    if plan.peak_bytes + extra <= limit:
        return
    error = out_of_memory(plan, where, f"is over {what} of {format_bytes(limit)}", extra)
    error.limit_bytes = limit
    raise error


def out_of_memory(plan: MemoryPlan, where: str, why: str, extra: int = 0) -> OutOfMemoryError:
    """The OutOfMemoryError for a call under `plan`: its peak, why that fails, the largest live tensors."""
    largest = plan.largest_live_at_peak(5)
    step = plan.peak_step() or 0
    tensors = "; ".join(f"%{b.name} {format_bytes(b.bytes)} ({b.kind}"
                        + (f", from {b.producer_name}" if b.producer_name else "") + ")" for b in largest)
    shapes = ", ".join(f"{k}={v}" for k, v in sorted(plan.bindings.items()))
    copies = f" plus {format_bytes(extra)} copying non-contiguous inputs" if extra else ""
    regions = plan.region_bytes[step] if step < len(plan.region_bytes) else 0
    if regions:
        tensors += f"; and step {step}'s loop or branch holds {format_bytes(regions)} of its own (one iteration)"
    error = OutOfMemoryError(
        f"{where}: the planned peak of {format_bytes(plan.peak_bytes)} ({plan.mode} plan"
        + (f", {shapes}" if shapes else "") + f"){copies} {why}; "
        f"largest tensors live at step {step}: {tensors or 'none'}")
    error.peak_bytes, error.limit_bytes, error.plan = plan.peak_bytes, None, plan
    return error


@functools.cache
def system_memory_bytes() -> int | None:
    """What this machine can hold: physical memory plus swap, or the cgroup's limit when lower;
    None where neither can be read."""
    total = _meminfo_bytes()
    if total is None and hasattr(os, "sysconf"):
        try:
            total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError):
            total = None
    limit = _cgroup_limit_bytes()
    return limit if total is None or (limit is not None and limit < total) else total


def _meminfo_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        return sum(int(fields[k].split()[0]) * 1024 for k in ("MemTotal", "SwapTotal") if k in fields) or None
    except (OSError, ValueError):
        return None


def _cgroup_limit_bytes() -> int | None:
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            text = f.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


class SystemFit:
    """Checks that calls fit in this machine's memory before anything is allocated: numpy would
    fail on a buffer past it, or the first touch of overcommitted pages would end the process.

    Per binding of the symbols, the sum of every value's bytes (inputs, constants and every buffer
    the program allocates, as the plan's peak counts them) is a cheap bound; only past the
    machine's memory is the level's plan made, and its peak decides."""

    def __init__(self, program: Program, level: str, where: str):
        self.program, self.level, self.where = program, level, where
        self.types = [v.type for v in program.inputs]
        self.types += [r.type for op in program.body.ops if _holds_memory(op) for r in op.results]
        self.needed: dict[tuple, int] = {}       # binding -> bytes a call needs (bound, or the plan's peak)

    def check(self, bindings: dict[str, int], copies: int = 0) -> None:
        """Raises OutOfMemoryError when a call with these symbols, `copies` bytes of input copies
        besides, cannot fit."""
        system = system_memory_bytes()
        key = tuple(sorted(bindings.items()))
        needed = self.needed.get(key)
        if needed is None:
            needed = self.needed[key] = sum(_nbytes(t, bindings) for t in self.types)
        if system is None or needed + copies <= system:
            return
        plan = plan_for_level(self.program, self.level, bindings)
        self.needed[key] = plan.peak_bytes
        check_budget(plan, system, self.where, "this machine's memory (RAM and swap)", copies)


def _holds_memory(op) -> bool:
    return not (op.has(Trait.VIEW) or op.has(Trait.MEMORY) or op.has(Trait.TERMINATOR))


def _nbytes(t: TensorType, bindings: dict[str, int]) -> int:
    return math.prod(evaluate_shape(t.shape, bindings)) * t.dtype.itemsize

"""Compiling a whole program for O2: its segments as one cached module, and the runner."""

from __future__ import annotations

import hashlib
import time
from typing import Any

import numpy as np

from ...dialects.reference import weight_data
from ...ir.opdef import Trait
from ...ir.program import Program
from ...report import CompileReport, KernelRecord, KernelTiming
from ..base import Kernel, ParamRole, get_backend, kernel_record
from ..kernel_cache import default_cache
from .backend import _compile_or_recover, _key_parts_for, is_readonly, numba_type
from .o2_runner import O2Runner
from .whole_graph import SEGMENT_GROUPS, Fallback, KernelCall, Segment, whole_graph


def _signature(program: Program, seg: Segment) -> tuple:
    values = {v.name: v for v in program.inputs}
    for op in program.body.ops:
        values.update({r.name: r for r in op.results})
    return tuple(numba_type(p, p.role is ParamRole.VALUE and is_readonly(values[p.value])) for p in seg.params)


def _constants(program: Program) -> dict[str, np.ndarray]:
    out = {}
    for op in program.body.ops:
        if op.name == "np.weight":
            out[op.result.name] = np.asarray(weight_data(program, op.attrs["name"]), order="C")
        elif op.has(Trait.CONSTANT):
            out[op.result.name] = np.asarray(op.attrs["value"].array, order="C")
    return out


def _compile_calls(calls: list[KernelCall], report: CompileReport, options: dict[str, Any]) -> None:
    """Compiles the kernel of each heavy group (the O1 kernel: one compile per structure, shared
    across sizes and with O1) and records it; groups as O1 shares them share one kernel and record."""
    backend = get_backend("numba_cpu")
    shared: dict[str, tuple[Kernel, KernelRecord]] = {}
    for call in calls:
        key = backend.sharing_key(call.op)
        if key not in shared:
            kernel = backend.compile_group(call.op, options)
            record = kernel_record(kernel, call.op, choice=f"{kernel.choice}; O2 calls it from Python between "
                                                           f"segments ({call.reason})")
            shared[key] = kernel, record
            report.kernels.append(record)
        else:
            shared[key][1].reused_by.append(call.op.attrs["id"])
        call.run = shared[key][0].run


def compile_program(program: Program, report: CompileReport, options: dict[str, Any],
                    segment_groups: int = SEGMENT_GROUPS) -> O2Runner:
    """Generates, caches and compiles the segments of `program`; the report says what fell back.
    `segment_groups=1` makes the instrumented variant that profiling times segment by segment."""
    from ...passes.memory import static_plan

    start = time.perf_counter()
    graph = whole_graph(program, report.memory, segment_groups)
    parts = _key_parts_for("program:" + hashlib.sha256(graph.source.encode()).hexdigest()[:16], "", graph.source)
    generated = time.perf_counter()
    entry = (options.get("cache") or default_cache()).load(parts, graph.source)
    timing = KernelTiming(codegen=generated - start, kernel_cache=time.perf_counter() - generated)
    segments = [item for item in graph.items if isinstance(item, Segment)]
    for seg in segments:
        timing.add(_compile_or_recover(getattr(entry.module, seg.name), _signature(program, seg),
                                       entry.module.__file__))
    calls = [item for item in graph.items if isinstance(item, KernelCall)]
    fallbacks = [item for item in graph.items if isinstance(item, Fallback)]
    for item in fallbacks:
        report.warnings.append(f"O2: {item.op.name} (%{item.op.results[0].name}) falls back to numpy: {item.reason}")
    report.stats["o2_segments"] = len(segments)
    report.stats["o2_fallbacks"] = len(fallbacks)
    report.stats["o2_kernel_calls"] = len(calls)
    report.kernels.append(KernelRecord(
        key=parts["structure"], backend="numba_cpu", source=graph.source, compile_seconds=time.perf_counter() - start,
        cache_hit=entry.hit, miss_reason=entry.miss_reason,
        choice=f"O2: {len(segments)} compiled segment(s), {len(calls)} group(s) calling their own kernel, "
               f"{len(fallbacks)} numpy fallback(s)", group_lines=graph.group_lines, timing=timing))
    _compile_calls(calls, report, options)
    bindings = dict(report.memory.bindings) if report.memory else {}
    compile_time = {tuple(sorted(bindings.items())): report.memory}

    def planner(b: dict[str, int]):
        key = tuple(sorted(b.items()))
        return compile_time[key] if key in compile_time else static_plan(program, b)

    return O2Runner(program, graph.items, entry.module, graph.buffer_index, report.memory, planner,
                    _constants(program))

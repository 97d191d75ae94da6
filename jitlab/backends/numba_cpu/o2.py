"""Compiling a whole program for O2: its segments as one cached module, and the runner."""

from __future__ import annotations

import hashlib
import time
from typing import Any

from ...ir.core import Operation
from ...ir.program import Program
from ...report import CompileReport, KernelRecord, KernelTiming
from ..base import Kernel, ParamRole, get_backend, kernel_record
from ..kernel_cache import default_cache
from ..native import ENTRY, NativeSegment
from . import native_build
from .codegen import raises
from .kernels import compile_or_recover, is_readonly, key_parts_for, numba_type
from .numpy_blas import addresses as blas_addresses
from .o2_runner import KeptProgram, O2Runner, Planner, constants
from .whole_graph import GEMM_IMPORT, NATIVE_GEMM_IMPORT, SEGMENT_GROUPS, Fallback, KernelCall, Segment, whole_graph


def _signature(program: Program, seg: Segment) -> tuple:
    values = {v.name: v for v in program.inputs}
    for op in program.body.ops:
        values.update({r.name: r for r in op.results})
    return tuple(numba_type(p, p.role is ParamRole.VALUE and is_readonly(values[p.value])) for p in seg.params)


def _compile_calls(calls: list[KernelCall], order: list[Operation], report: CompileReport,
                   options: dict[str, Any]) -> None:
    """Compiles the kernel of each heavy group (the O1 kernel: one compile per structure, shared
    across sizes and with O1) in `order`, Backend.prepare_kernels' (convolutions last), and records
    it in the program's order; groups as O1 shares them share one kernel and record."""
    backend = get_backend("numba_cpu")
    kernels: dict[str, Kernel] = {}
    for op in order:
        key = backend.sharing_key(op)
        if key not in kernels:
            kernels[key] = backend.compile_group(op, options)
    records: dict[str, KernelRecord] = {}
    for call in calls:
        key = backend.sharing_key(call.op)
        if key in records:
            records[key].reused_by.append(call.op.attrs["id"])
        else:
            records[key] = kernel_record(kernels[key], call.op, choice=f"{kernels[key].choice}; O2 calls it from "
                                                                       f"Python between segments ({call.reason})")
            report.kernels.append(records[key])
        call.run = kernels[key].run


def compile_program(program: Program, report: CompileReport, options: dict[str, Any],
                    segment_groups: int = SEGMENT_GROUPS) -> O2Runner:
    """Generates, caches and compiles the segments of `program` (as one native library where they
    can be, else numba's), the report says what fell back. `segment_groups=1` makes the
    instrumented variant that profiling times segment by segment. The runner's `kept` is what the
    executable cache may keep of it (None where a segment needs numba)."""
    start = time.perf_counter()
    graph = whole_graph(program, report.memory, segment_groups)
    parts = key_parts_for("program:" + hashlib.sha256(graph.source.encode()).hexdigest()[:16], "", graph.source)
    generated = time.perf_counter()
    timing = KernelTiming(codegen=generated - start)
    segments = [item for item in graph.items if isinstance(item, Segment)]
    cache = options.get("cache") or default_cache()
    calls = [item for item in graph.items if isinstance(item, KernelCall)]
    # before the segments compile: a convolution library's build this starts overlaps them
    order = get_backend("numba_cpu").prepare_kernels([call.op for call in calls], options)
    hit, miss, how = _native_segments(graph.source, program, segments, parts, cache, timing)
    module = None
    if not how:         # what numba did (a build) is timed already: the rest is finding and loading the library
        timing.kernel_cache = time.perf_counter() - generated - (timing.sum() - timing.codegen)
    else:
        entry = cache.load(parts, graph.source)
        timing.kernel_cache = time.perf_counter() - generated
        for seg in segments:
            timing.add(compile_or_recover(getattr(entry.module, seg.name), _signature(program, seg),
                                           entry.module.__file__))
        module, hit, miss = entry.module, entry.hit, entry.miss_reason
    fallbacks = [item for item in graph.items if isinstance(item, Fallback)]
    for item in fallbacks:
        report.warnings.append(f"O2: {item.op.name} (%{item.op.results[0].name}) falls back to numpy: {item.reason}")
    report.stats["o2_segments"] = len(segments)
    report.stats["o2_fallbacks"] = len(fallbacks)
    report.stats["o2_kernel_calls"] = len(calls)
    report.kernels.append(KernelRecord(
        key=parts["structure"], backend="numba_cpu", source=graph.source, compile_seconds=time.perf_counter() - start,
        cache_hit=hit, miss_reason=miss,
        choice=f"O2: {len(segments)} compiled segment(s) ({how or 'one native library'}), {len(calls)} group(s) "
               f"calling their own kernel, {len(fallbacks)} numpy fallback(s)", group_lines=graph.group_lines,
        timing=timing))
    _compile_calls(calls, order, report, options)
    runner = O2Runner(program, graph.items, module, graph.buffer_index, report.memory,
                      Planner(program, report.memory), constants(program))
    runner.kept = KeptProgram.of(program, graph.items, graph.buffer_index, report)
    return runner


def _native_segments(source: str, program: Program, segments: list[Segment], parts: dict[str, str],
                     cache, timing: KernelTiming) -> tuple[bool, str, str]:
    """Gives each segment its entry in one native library (sequential: groups big enough for threads
    are kernel calls). Returns (hit, why it was not on disk, "") or (False, "", why there is none)."""
    if not segments:
        return True, "", ""
    if raises(source):
        return False, "", "numba dispatchers: a segment raises errors (bounds checks, negative integer powers)"
    if "conv2d_nb(" in source:
        # known before numba compiles the module: the build would fail at the link (ResNet-50: 3 s)
        return False, "", "numba dispatchers: a segment runs a convolution, whose parallel im2col needs numba's runtime"
    if not blas_addresses().all():
        return False, "", "numba dispatchers: numpy's BLAS has no cblas symbols to call"
    sequential = (source.replace("parallel=True, ", "").replace(", cache=True", "")
                  .replace(GEMM_IMPORT, NATIVE_GEMM_IMPORT))
    entries = [native_build.Entry(seg.name, tuple(seg.params), False, f"{ENTRY}_{k}") for k, seg in enumerate(segments)]
    libraries, miss, why = native_build.libraries_for(sequential, entries, parts, cache, timing)
    if libraries is None:
        return False, "", f"numba dispatchers: {why}"
    for seg, library in zip(segments, libraries):
        seg.fn = NativeSegment(library, tuple(p.is_array for p in seg.params))
    return not miss, miss, ""

"""The numba.cuda backend: which ops it compiles, and a group into launchable kernels.

It fuses what the CPU backend fuses (the same fusion kinds and index maps), and
compiles each group into one kernel module: an elementwise, row or column kernel
(codegen.py), or a tiled contraction with its epilogue (contraction.py). Its runtime
(executor.py) keeps arrays on the device and launches kernels on streams.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ...ir.core import Operation, Value
from ...ir.opdef import Trait
from ...report import FusionKind
from ..base import Backend, Kernel, KernelParam, register_backend
from ..loopnest import reads_result_in_place
from ..numba_cpu.backend import fusion_kind, loop_nest_support
from . import device, library
from .launch import Policy
from .memory import KeptBuffers

if TYPE_CHECKING:
    from .kernels import Launcher

_SHUFFLED = {np.dtype(t) for t in ("int32", "int64", "uint32", "uint64", "float32", "float64")}
_CONTRACTED = {np.dtype(t) for t in ("int32", "int64", "float32", "float64")}


@dataclass
class Part:
    """One kernel of a group: its source, layout, parameters, how to make its launcher, what it writes."""

    source: str
    layout: str
    params: list[KernelParam]
    make: Callable[[Any], Launcher]
    outputs: list[Value]
    flat: bool = False          # arrays are passed 1-D


@register_backend
class NumbaCUDABackend(Backend):
    """Kernels generated from groups for NVIDIA GPUs (or numba's simulator)."""

    name = "numba_cuda"
    options = ("threads_per_block", "max_blocks", "device_outputs", "streams", "allow_tf32", "graphs")
    device = "cuda"
    late_passes = ("assign-streams",)
    checks_memory_limit = True
    donates_in_place = False        # its executor copies results into donated arrays

    def fusion_kind(self, op: Operation) -> FusionKind:
        return fusion_kind(op)

    def supports(self, op: Operation) -> str | None:
        reason = loop_nest_support(op, self.name)
        if reason is not None:
            return reason
        kind = fusion_kind(op)
        if kind == FusionKind.WRITE:
            return "writes (update_slice, scatters) run as library kernels on numba_cuda"
        if kind == FusionKind.CONTRACTION and min(v.type.rank for v in op.operands) < 2:
            return "matrix-vector products run as library kernels on numba_cuda"
        dtype = np.dtype(op.results[0].type.dtype)
        if op.name == "np.pow" and dtype.kind == "c":
            return "complex power has no device function in numba.cuda; it runs as a library kernel"
        if op.name == "np.pow" and dtype.kind == "i":
            return ("a signed integer power must refuse a negative exponent, as numpy does, which a device "
                    "function cannot raise; it runs as a library kernel")
        if kind == FusionKind.REDUCTION and op.name not in ("np.any", "np.all") and dtype not in _SHUFFLED:
            return f"block reductions shuffle 32- and 64-bit values; {dtype} runs as a library kernel"
        if kind == FusionKind.CONTRACTION and dtype not in _CONTRACTED:
            return f"tiled contractions take int32/int64/float32/float64; {dtype} runs as a library kernel"
        return None

    def compile_group(self, group: Operation, options: dict[str, Any]) -> Kernel:
        device.require()
        policy = Policy(device.info(), options.get("threads_per_block"), options.get("max_blocks"))
        con = next((op for op in group.body.ops if op.has(Trait.CONTRACTION)), None)
        start = time.perf_counter()
        selection = library.select(group, con, library.probe(), bool(options.get("allow_tf32"))) if con else None
        call = _library_call(con, selection, options)
        parts = _parts(group, con, policy, call is not None)
        source, entry, launchers = _compile_parts(group, parts, options)
        run, kept = _runner(group, con, ([call] if call is not None else []) + launchers)
        choice = _describe(group, con, parts, selection)
        return Kernel(group.attrs["key"], "numba_cuda", run, source, time.perf_counter() - start,
                      entry is not None and entry.hit, entry.miss_reason if entry is not None else "", choice,
                      meta={"launchers": launchers, "library": selection.library if selection else None,
                            "kept": kept},
                      params=tuple(parts[0].params) if len(parts) == 1 and call is None else ())

    # -- runtime hooks ----------------------------------------------------------------
    def allocate(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        return device.cuda().device_array(shape, dtype)

    def copy_in(self, array: np.ndarray) -> Any:
        return device.cuda().to_device(np.asarray(array, order="C"))

    def copy_out(self, array: Any) -> np.ndarray:
        return array.copy_to_host() if hasattr(array, "copy_to_host") else np.asarray(array)

    def synchronize(self) -> None:
        device.cuda().synchronize()

    def peak_bandwidth(self) -> float | None:
        from .device import info

        peak = info().peak_bytes_per_second
        return peak if peak > 0 else None        # the simulator has no memory to stream

    def copy_bandwidth(self) -> float | None:
        """The device's measured copy bandwidth (the bench's streaming bound); None under the simulator."""
        from .measure import copy_bandwidth

        return None if device.simulator_enabled() else copy_bandwidth()

    def measured_bounds(self) -> dict[str, Any]:
        from .measure import measure

        return measure()

    def executor(self, program, kernels, report, options):
        from .executor import DeviceExecutor

        return DeviceExecutor(program, kernels, report, options)


def _name(k: int) -> str:
    return f"k{k}"


def _parts(group: Operation, con: Operation | None, policy: Policy, library_call: bool) -> list:
    """The generated kernels of a group: beside a library call, only the epilogue (if any) is generated."""
    if library_call:
        return [] if library.writes_output(group, con) else generated_parts(group, policy, [con.result])
    return contraction_parts(group, con, policy) if con is not None else generated_parts(group, policy)


def _library_call(con: Operation | None, selection, options: dict[str, Any]):
    """The library call `selection` chose for the contraction, or None where generated kernels run it."""
    if selection is None or selection.library is None:
        return None
    return library.library_call(con, bool(options.get("allow_tf32")))


def _compile_parts(group: Operation, parts: list, options: dict[str, Any]) -> tuple[str, Any, list]:
    """The parts' module source, its compile-cache entry and one launcher per part (none: "", None, [])."""
    from .kernels import compile_launcher, load_module, module_source  # numba.cuda: on first use

    if not parts:
        return "", None, []
    source = module_source(group, [(part.source, part.layout) for part in parts])
    entry = load_module(group, source, options)
    launchers = []
    for k, part in enumerate(parts):
        launcher = part.make(getattr(entry.module, _name(k)))
        compile_launcher(launcher, entry.module.__file__)
        launchers.append(launcher)
    return source, entry, launchers


def generated_parts(group: Operation, policy: Policy, materialized: Sequence[Value] = (), index: int = 0) -> list:
    from .codegen import generate
    from .kernels import Launcher

    kernel = generate(group.body, _name(index), materialized)
    plan = kernel.plan

    def make(fn):
        return Launcher(fn, kernel.params, () if kernel.flat else tuple(plan.space), kernel.layout, kernel.flat,
                        policy, plan_dims=(plan.outer, plan.inner))

    return [Part(kernel.source, kernel.layout, kernel.params, make, list(group.body.last_op.operands), kernel.flat)]


def contraction_parts(group: Operation, con: Operation, policy: Policy) -> list:
    """The group as a tiled contraction kernel with its epilogue, plus a generated kernel for what it cannot fuse."""
    from .contraction import generate_tiled
    from .kernels import Launcher

    shape = con.result.type.shape
    static = [d for d in shape[-2:] if isinstance(d, int)]
    tile = policy.tile_size(*(static + [1 << 10] * (2 - len(static))))
    conv = None
    if con.name == "np.conv2d":
        o = int(con.operands[1].type.shape[0])
        conv = (con.attrs["groups"], o // con.attrs["groups"])
    fused = reads_result_in_place(con)
    outputs = list(group.body.last_op.operands) if fused else [con.result]
    source, params = generate_tiled(group.body, con, _name(0), tile, None if fused else outputs)
    make = lambda fn: Launcher(fn, params, tuple(shape), "tile", False, policy, tile, conv)  # noqa: E731
    parts = [Part(source, "tile", params, make, outputs)]
    if not fused:
        parts += generated_parts(group, policy, [con.result], index=1)
    return parts


def _runner(group: Operation, con: Operation | None, launchers: list):
    """`run(inputs, outputs, bindings, stream)` on device arrays, and the KeptBuffers it holds; `launchers`
    are Launchers or a library call taking the same arguments (the contraction first, then the epilogue
    reading its result)."""
    kept = [launcher.kept for launcher in launchers if hasattr(launcher, "kept")]
    if len(launchers) == 1:
        launcher = launchers[0]

        def run_one(inputs, outputs, bindings=None, stream=0):
            launcher(inputs, outputs, (), bindings or {}, stream)

        return run_one, kept
    tile, epilogue = launchers
    temp = _TempBuffer(con.result)

    def run(inputs, outputs, bindings=None, stream=0):
        bindings = bindings or {}
        result = temp.get(bindings, stream)
        tile(inputs, [result], (), bindings, stream)
        epilogue(inputs, outputs, (result,), bindings, stream)

    return run, [*kept, temp.kept]


class _TempBuffer:
    """The contraction result when the epilogue reads it at other elements (or a library wrote it):
    a device buffer per shape, kept across calls (memory.KeptBuffers)."""

    def __init__(self, value: Value):
        self.value, self.kept = value, KeptBuffers(value.type.dtype)

    def get(self, bindings: dict[str, int], stream) -> Any:
        from ...ir.shapes import evaluate_shape

        return self.kept.get(evaluate_shape(self.value.type.shape, bindings), stream)


def _describe(group: Operation, con: Operation | None, parts: list, selection=None) -> str:
    n = sum(1 for op in group.body.ops if not (op.has(Trait.TERMINATOR) or op.has(Trait.CONSTANT)))
    if con is None:
        return f"generated CUDA kernel ({parts[0].layout} layout): {n} op(s) in one pass over memory"
    if selection.library is not None:
        after = f", then a generated {parts[0].layout} kernel for the epilogue ({n - 1} op(s))" if parts else ""
        return f"{selection.reason}{after}"
    kind = "tiled matmul" if con.name == "np.matmul" else "implicit-GEMM conv2d"
    why = f" (not a library: {selection.reason})"
    if len(parts) == 1:
        return f"{kind} with the epilogue fused ({n - 1} op(s) per result element){why}"
    return (f"{kind} into a temporary, then a generated {parts[1].layout} kernel for the epilogue "
            f"(it reads the contraction's result at other elements){why}")

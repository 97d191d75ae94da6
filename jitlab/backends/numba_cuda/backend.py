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
from . import device
from .launch import Policy

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
    options = ("threads_per_block", "max_blocks", "device_outputs", "streams")
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
        from .kernels import compile_launcher, load_module, module_source  # numba.cuda: on first use

        device.require()
        policy = Policy(device.info(), options.get("threads_per_block"), options.get("max_blocks"))
        con = next((op for op in group.body.ops if op.has(Trait.CONTRACTION)), None)
        start = time.perf_counter()
        parts = _contraction_parts(group, con, policy) if con is not None else _generated_parts(group, policy)
        source = module_source(group, [(part.source, part.layout) for part in parts])
        entry = load_module(group, source, options)
        launchers = []
        for k, part in enumerate(parts):
            launcher = part.make(getattr(entry.module, _name(k)))
            compile_launcher(launcher, entry.module.__file__)
            launchers.append(launcher)
        run = _runner(group, con, launchers)
        choice = _describe(group, con, parts)
        return Kernel(group.attrs["key"], "numba_cuda", run, source, time.perf_counter() - start,
                      entry.hit, entry.miss_reason, choice, meta={"launchers": launchers},
                      params=tuple(parts[0].params) if len(parts) == 1 else ())

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

    def measured_bounds(self) -> dict[str, Any]:
        from .measure import measure

        return measure()

    def executor(self, program, kernels, report, options):
        from .executor import DeviceExecutor

        return DeviceExecutor(program, kernels, report, options)


def _name(k: int) -> str:
    return f"k{k}"


def _generated_parts(group: Operation, policy: Policy, materialized: Sequence[Value] = (), index: int = 0) -> list:
    from .codegen import generate
    from .kernels import Launcher

    kernel = generate(group.body, _name(index), materialized)
    plan = kernel.plan

    def make(fn):
        return Launcher(fn, kernel.params, () if kernel.flat else tuple(plan.space), kernel.layout, kernel.flat,
                        policy, plan_dims=(plan.outer, plan.inner))

    return [Part(kernel.source, kernel.layout, kernel.params, make, list(group.body.last_op.operands), kernel.flat)]


def _contraction_parts(group: Operation, con: Operation, policy: Policy) -> list:
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
        parts += _generated_parts(group, policy, [con.result], index=1)
    return parts


def _runner(group: Operation, con: Operation | None, launchers: list[Launcher]):
    """`run(inputs, outputs, bindings, stream)` on device arrays."""
    if len(launchers) == 1:
        launcher = launchers[0]

        def run_one(inputs, outputs, bindings=None, stream=0):
            launcher(inputs, outputs, (), bindings or {}, stream)

        return run_one
    tile, epilogue = launchers
    temp = _TempBuffer(con.result)

    def run(inputs, outputs, bindings=None, stream=0):
        bindings = bindings or {}
        result = temp.get(bindings, stream)
        tile(inputs, [result], (), bindings, stream)
        epilogue(inputs, outputs, (result,), bindings, stream)

    return run


class _TempBuffer:
    """The contraction result when the epilogue reads it at other elements: a device buffer
    kept across calls (launches on one stream are ordered, so reuse is safe)."""

    def __init__(self, value: Value):
        self.value, self.buffer = value, None

    def get(self, bindings: dict[str, int], stream) -> Any:
        from ...ir.shapes import evaluate_shape

        shape = evaluate_shape(self.value.type.shape, bindings)
        if self.buffer is None or self.buffer.shape != shape:
            self.buffer = device.cuda().device_array(shape, self.value.type.dtype, stream=stream)
        return self.buffer


def _describe(group: Operation, con: Operation | None, parts: list) -> str:
    n = sum(1 for op in group.body.ops if not (op.has(Trait.TERMINATOR) or op.has(Trait.CONSTANT)))
    if con is None:
        return f"generated CUDA kernel ({parts[0].layout} layout): {n} op(s) in one pass over memory"
    kind = "tiled matmul" if con.name == "np.matmul" else "implicit-GEMM conv2d"
    if len(parts) == 1:
        return f"{kind} with the epilogue fused ({n - 1} op(s) per result element)"
    return (f"{kind} into a temporary, then a generated {parts[1].layout} kernel for the epilogue "
            "(it reads the contraction's result at other elements)")

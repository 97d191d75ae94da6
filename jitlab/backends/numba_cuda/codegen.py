"""CUDA kernel source for elementwise and reduction groups, on the CPU backend's emitter.

The emitter (numba_cpu.codegen.KernelSource) reads every value at an index map and
places each line at the loop level where its variables are bound; only the loops
differ here. Three layouts:

- elementwise: one thread per output element, a grid-stride loop over the flattened
  space (the last dim fastest, so neighbouring threads touch neighbouring addresses);
  each thread takes PER_THREAD elements a grid apart per pass (groups of up to
  MAX_COPIED_OPS ops) and loads them all before it computes and stores any: several loads
  in flight per thread, each still coalesced across the warp. (Contiguous elements per thread
  would not buy 8- or 16-byte loads: numba-cuda emits scalar `ld.global.f32` even for four
  adjacent elements, it cannot tell NVVM an array is 16-byte aligned.)
- rows (the last dim is reduced): one block per row, grid-striding over rows; the
  block's threads stride over the row, PER_THREAD elements a block apart per pass (loads
  first, as below), each reduction ends in a block reduction
  (warp shuffles, then shared memory across warps), full-size outputs are written by
  the threads in a last strided pass, row outputs by thread 0;
- columns (the last dim is kept): one thread per output element looping over the
  reduced dims, so neighbouring threads read neighbouring columns.

Every loop bound in a row kernel depends on the block only, so all threads of a block
reach the same barriers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from ...ir.core import Operation, Value
from ...ir.opdef import Trait
from ..base import KernelParam
from ..loopnest import REDUCTIONS, Plan, ctor, identity, is_flat, normalize
from ..numba_cpu.codegen import KernelSource
from .launch import PER_THREAD
from .scalar import CUDA_RULES

BLOCK_REDUCE = {"np.sum": "_block_sum", "np.mean": "_block_sum", "np.prod": "_block_prod",
                "np.max": "_block_max", "np.min": "_block_min", "np.any": "_block_any", "np.all": "_block_all"}


MAX_COPIED_OPS = 64


class CudaKernelSource(KernelSource):
    """One CUDA kernel for a group block, in one of the three layouts."""

    rules = CUDA_RULES

    def __init__(self, block, plan: Plan, name: str, layout: str, materialized: Sequence[Value] = (),
                 flat: bool = False):
        super().__init__(block, plan, name, materialized, flat)
        self.layout = layout
        self.shared: dict[str, str] = {}           # dtype name -> shared array for block reductions
        # a long chain (tiny_500) is one copy: four would quadruple NVVM's time and the registers it needs
        copies = PER_THREAD if sum(1 for _ in block.ops) <= MAX_COPIED_OPS else 1
        self.copies = ["", *(f"_{k}" for k in range(1, copies))]      # each copy's index suffix
        self.copied: set[str] = set()              # the index vars the open strided loop copies
        self.active = [""]                         # the copies of the open loop (one outside it)

    def _keep_in_scratch(self, key, name, value, needs) -> None:
        """Threads recompute row values instead: a per-thread row scratch would not fit on chip."""

    # -- the nest ---------------------------------------------------------------------
    def build(self, parallel: bool = True) -> str:
        if self.layout == "elementwise":
            return self._build_elementwise()
        self._open_outer()
        for k, red in enumerate(self.plan.reductions):
            self.phase = k
            self._reduction(red, parallel_inner=False)
        self.phase = None
        self._full_outputs(False)
        if self.layout == "rows" and not all(self._is_full(v) for v in self.outputs):
            self.open([], "if cuda.threadIdx.x == 0:")
        self._row_outputs()
        for k, (dtype, name) in enumerate(self.shared.items()):
            self.root.items.insert(k, f"{name} = cuda.shared.array(REDUCE_SLOTS, np.{dtype})")
        return "\n".join(self.root.render(""))

    def _build_elementwise(self) -> str:
        """PER_THREAD copies of the element a grid apart per pass (_copies)."""
        outer = self.plan.outer
        total = " * ".join(f"n{d}" for d in outer) or "1"
        self.root.add("step = cuda.gridsize(1)")
        self._open_copies("t", "cuda.grid(1)", total, "step", outer)
        self._store_copies([(k, self._full_map()) for k in range(len(self.outputs))], "t", "step", total)
        self.close()
        return "\n".join(self.root.render(""))

    # -- several elements a thread: each copy's index vars carry a suffix (i1 -> i1_1, ...) ---------------
    def _open_copies(self, var: str, start: str, total: str, step: str, dims: list[int]) -> None:
        """A strided loop taking len(self.copies) elements `step` apart per pass; a copy past the end is
        clamped to the last element, so it reads in bounds (its stores are guarded, its reductions skip it)."""
        suffixes = self.copies
        binds = [var, *(f"{var}{s}" for s in suffixes[1:]), *(f"i{d}{s}" for s in suffixes for d in dims)]
        self.open(binds, f"for {var} in range({start}, {total}, {step} * {len(suffixes)}):")
        self.copied, self.active = {f"i{d}" for d in dims}, suffixes
        for k, s in enumerate(suffixes):
            if k:
                self.current.add(f"{var}{s} = min({var} + {k} * {step}, {total} - 1)")
            self._unpack(f"{var}{s}", dims, s)

    def _emit_copies(self, values: list[Value], m) -> list[list[str]]:
        """Each value at `m` for every copy, op by op in lockstep, every copy's array reads first:
        the loads are all in flight before the first arithmetic waits on one."""
        suffixes = self.active
        steps = [step for v in values for step in [*self._dependencies(v, m), (v, m)]]
        for operand, om in self._loads(steps):
            for s in suffixes:
                self._emit_one(operand, self._renamed(om, s))
        for value, vm in steps:
            for s in suffixes:
                self._emit_one(value, self._renamed(vm, s))
        return [[self._emit_one(v, self._renamed(m, s)) for s in suffixes] for v in values]

    def _store_copies(self, outputs: list[tuple[int, tuple]], var: str, step: str, total: str) -> None:
        """Stores after every load and computation; a copy's stores only when it is inside the space."""
        names = self._emit_copies([self.outputs[k] for k, _ in outputs], self._full_map())
        for c, s in enumerate(self.copies):
            if c:
                self.open([], f"if {var} + {c} * {step} < {total}:")
            for (k, m), row in zip(outputs, names):
                coords = ", ".join(x.text() for x in self._renamed(m, s)) or "()"
                self.current.add(f"o{k}[{coords}] = {row[c]}")
            if c:
                self.close()

    def _renamed(self, m, suffix: str):
        """Map `m` at a copy's indices: the copied vars take its suffix."""
        return tuple(replace(c, var=c.var + suffix) if c.var in self.copied else c for c in m) if suffix else m

    def _loads(self, steps: list) -> list:
        """The array reads (operand, map) the ops of `steps` make, in order."""
        return [(v, om) for value, m in steps if self._needs_operands(value, (id(value), m))
                for v, om in zip(value.op.operands, self._operand_maps(value.op, m)) if v in self.args]

    def _open_outer(self) -> None:
        """The grid-stride loop over rows (blocks) or elements (threads), index vars unpacked."""
        outer = self.plan.outer
        start, step = (("cuda.blockIdx.x", "cuda.gridDim.x") if self.layout == "rows"
                       else ("cuda.grid(1)", "cuda.gridsize(1)"))
        if len(outer) == 1:
            self.open([f"i{outer[0]}"], f"for i{outer[0]} in range({start}, n{outer[0]}, {step}):")
            return
        total = " * ".join(f"n{d}" for d in outer) or "1"
        self.open(["t", *(f"i{d}" for d in outer)], f"for t in range({start}, {total}, {step}):")
        self._unpack("t", outer)

    def _unpack(self, flat: str, dims: list[int], suffix: str = "") -> None:
        rest = flat
        for d in reversed(dims[1:]):
            self.current.add(f"i{d}{suffix} = {rest} % n{d}")
            rest = f"({rest} // n{d})"
        if dims:
            self.current.add(f"i{dims[0]}{suffix} = {rest}")

    def _inner_loops(self, parallel: bool) -> None:
        inner = self.plan.inner
        if self.layout != "rows":
            for d in inner:
                self.open([f"i{d}"], f"for i{d} in range(n{d}):")
            return
        self._open_copies("r", "cuda.threadIdx.x", self._row_total(), "cuda.blockDim.x", inner)

    def _row_total(self) -> str:
        return " * ".join(f"n{d}" for d in self.plan.inner) or "1"

    def _close_inner(self) -> None:
        for _ in (self.plan.inner if self.layout != "rows" else [0]):
            self.close()
        self.copied, self.active = set(), [""]

    def _full_outputs(self, parallel: bool) -> None:
        full = [k for k, v in enumerate(self.outputs) if self._is_full(v)]
        if self.layout != "rows" or not full:
            super()._full_outputs(parallel)
            return
        self._inner_loops(parallel)
        self._store_copies([(k, self._full_map()) for k in full], "r", "cuda.blockDim.x", self._row_total())
        self._close_inner()

    def _reduction(self, op: Operation, parallel_inner: bool) -> None:
        init, combine = REDUCTIONS[op.name]
        acc = f"acc{self.counter}"
        self.counter += 1
        dtype = np.dtype(op.result.type.dtype)
        start = identity(init, dtype)
        self.current.add(f"{acc} = {start}")
        self._inner_loops(False)
        [values] = self._emit_copies([op.operands[0]], self._full_map())
        for k, value in enumerate(values):      # a copy past the row's end adds the identity
            v = value if k == 0 else f"({value} if r + {k} * cuda.blockDim.x < {self._row_total()} else {start})"
            self.current.add(f"{acc} = {combine.format(acc=acc, v=v, max='_maximum', min='_minimum')}")
        self._close_inner()
        if self.layout == "rows":
            self.current.add(f"{acc} = {BLOCK_REDUCE[op.name]}({acc}, {self._shared_for(dtype)}, {start})")
        if op.name == "np.mean":
            count = " * ".join(f"n{d}" for d in self.plan.inner) or "1"
            self.current.add(f"{acc} = {acc} / {ctor(dtype)}({count})")
        self.current.cache[(id(op.result), normalize(op.result, self._result_map(op)))] = acc
        self.vars_of[acc] = self.current.binds      # defined in the row loop, even when no index var names it

    def _shared_for(self, dtype: np.dtype) -> str:
        if dtype.kind == "b":
            dtype = np.dtype(np.int32)      # any/all reduce 0/1 flags (devicefns._block_any)
        return self.shared.setdefault(dtype.name, f"red_{dtype.name}")


def plan_kernel(block) -> tuple[Plan, str, bool]:
    """The iteration plan, layout and flatness of a group's kernel."""
    reductions = [op for op in block.ops if op.has(Trait.REDUCTION)]
    if reductions:
        space = tuple(reductions[0].operands[0].type.shape)
        axes = sorted(reductions[0].attrs["axes"])
        plan = Plan(space, [d for d in range(len(space)) if d not in axes], axes, reductions)
        return plan, ("rows" if len(space) - 1 in axes else "columns"), False
    space = tuple(max((v.type.shape for v in block.last_op.operands), key=len))
    if is_flat(block, Plan(space, [], [])):
        return Plan((None,), [0], []), "elementwise", True
    return Plan(space, list(range(len(space))), []), "elementwise", False


@dataclass
class CudaKernel:
    """The source of one CUDA kernel function and how to launch it."""

    source: str
    plan: Plan
    layout: str                        # elementwise, rows or columns
    flat: bool                         # every array is passed viewed 1-D
    params: list[KernelParam]


def generate(block, name: str, materialized: Sequence[Value] = ()) -> CudaKernel:
    """The kernel function `name` for a group block, with its plan, layout and parameters."""
    plan, layout, flat = plan_kernel(block)
    source = CudaKernelSource(block, plan, name, layout, materialized, flat)
    return CudaKernel(source.build(), plan, layout, flat, source.params)

"""O2 on the CPU: the scheduled program as generated numba functions over one arena.

The static memory plan gives every intermediate an offset in one byte arena (or in an
output buffer it borrows). Each maximal run of ops that compile — fused groups,
contractions with their epilogues (BLAS from inside numba), views — becomes one
`segment` function (up to SEGMENT_GROUPS groups long): a call enters compiled code once
for the whole run. An op that cannot be compiled ends a segment; it runs with numpy
between segments, and the report says which op and why. A group heavy enough that a call from
Python is nothing next to its work (HEAVY_*) runs its own kernel between segments instead (a
KernelCall): that kernel is compiled once for every group of its structure, where a segment is
compiled with every group in it. Offsets and symbolic sizes are arguments, so one
compiled segment serves every binding of the program's symbols.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ...ir.core import Operation, OpResult, Value
from ...ir.opdef import Trait
from ...ir.program import Program
from ...ir.shapes import Sym
from ...report import BufferRecord, MemoryPlan
from ..base import KernelParam, ParamRole
from ..loopnest import PARALLEL_THRESHOLD
from .backend import NUMBA_DTYPES, contraction_of, contraction_operands, epilogue_target, has_epilogue
from .codegen import GeneratedKernel, generate
from .kernels import module_header
from .o2_runner import Fallback, KernelCall, Segment

# numba's compile time grows faster than linearly with a function's length: ResNet-50's 150
# groups in one segment took minutes to compile cold. Segments of at most this many groups
# compile in a fraction of that, and the few more calls from Python cost microseconds.
SEGMENT_GROUPS = 24

# A group doing at least this much work runs its own kernel from Python (a KernelCall) instead
# of inside a segment: the call costs a few microseconds, a few percent of the group's time at most
# (about 0.1 ms of work at these sizes on this machine's cores), and the
# kernel is the one compiled for every group of its structure whatever its sizes (ResNet-50's
# conv epilogues: a handful of compiles), where a segment is compiled anew with every group in it
# inlined (LLVM re-optimizes each callee in each segment: most of O2's compile time).
HEAVY_ELEMENTS = 1 << 18         # elements a group's largest result holds
HEAVY_MACS = 1 << 22             # multiply-adds of a contraction
_BYTE, _INT = np.dtype(np.uint8), np.dtype(np.int64)


@dataclass
class WholeGraph:
    """The program as segments and fallbacks in order, with the source of every segment."""

    items: list = field(default_factory=list)
    source: str = ""
    buffer_index: dict[str, int] = field(default_factory=dict)   # value name -> slot in the offsets array
    # group id -> (first, last) 1-based lines of `source` generated for it: its calls in a segment, its kernel
    group_lines: dict[int, list[tuple[int, int]]] = field(default_factory=dict)


def why_not_compiled(op: Operation) -> str | None:
    """None if O2 compiles this top-level op into a segment, else why it stays outside."""
    odd = next((v.type.dtype for v in (*op.operands, *op.results) if v.type.dtype not in NUMBA_DTYPES), None)
    if odd is not None and op.name != "func.return":
        return f"{op.name} on {odd.name}: numba compiles no {odd.name} arrays"
    if op.name == "jit.group":
        con = contraction_of(op)
        if con is not None and con.result.type.dtype.name not in ("float32", "float64"):
            return f"{con.name} on {con.result.type.dtype.name}: numba's BLAS calls take only float32 and float64"
        if con is not None and con.name == "np.matmul" and not _dot_ok(con):
            return "a batched matmul with broadcast batch dims has no single BLAS call"
        return None
    if op.has(Trait.VIEW) or op.has(Trait.CONSTANT) or op.name in ("np.weight", "func.return"):
        return None
    return f"{op.name} has no compiled kernel; it runs with numpy between compiled segments"


def heavy_group(op: Operation) -> str | None:
    """Why a group runs its own kernel from Python rather than inside a segment (HEAVY_*), or None."""
    results = [r.type for r in op.results]
    if not results or not all(t.is_static for t in results):
        return None
    con = contraction_of(op)
    if con is not None and all(v.type.is_static for v in con.operands):
        macs = contraction_macs(con)
        if macs >= HEAVY_MACS:
            return f"{con.name} of {macs:,} multiply-adds"
    elements = max(math.prod(t.shape) for t in results)
    if elements >= HEAVY_ELEMENTS:
        return f"{elements:,} elements"
    return None


def contraction_macs(con: Operation) -> int:
    """Multiply-adds of a static matmul or convolution: its result's size times the reduced length."""
    out = math.prod(con.result.type.shape)
    if con.name == "np.conv2d":
        w = con.operands[1].type.shape          # (out channels, in channels per group, kh, kw)
        return out * math.prod(w[1:])
    return out * con.operands[0].type.shape[-1]


def _dot_ok(con: Operation) -> bool:
    a, b = (v.type for v in con.operands)
    return (a.rank >= 2 and b.rank == 2 or (a.rank == b.rank and a.shape[:-2] == b.shape[:-2])
            or (a.rank, b.rank) in ((2, 1), (1, 2)))


def _sym(d, prefix: str = "s_") -> str:
    """A dim as a numba expression over the symbol parameters."""
    if not isinstance(d, Sym):
        return str(int(d))
    terms = []
    for mono, coeff in d.terms:
        factors = [str(coeff)] + [prefix + s for s in mono]
        terms.append("*".join(factors))
    return "(" + " + ".join(terms) + ")"


def _int(d) -> str:
    """A dim as a kernel argument: numba would type a bare literal as Literal[int] and compile the
    callee once per distinct value (one compile per shape, and slower loops for constant trip counts)."""
    return f"np.int64({int(d)})" if not isinstance(d, Sym) else _sym(d)


def _shape(t) -> str:
    dims = [_sym(d) for d in t.shape]
    return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"


def _size(t) -> str:
    return " * ".join([_sym(d) for d in t.shape] + [str(t.dtype.itemsize)])


class _Builder:
    """Emits the segments of one program."""

    def __init__(self, program: Program, plan: MemoryPlan, segment_groups: int = SEGMENT_GROUPS):
        self.program = program
        self.segment_groups = segment_groups
        self.buffers: dict[str, BufferRecord] = {b.name: b for b in plan.buffers}
        self.graph = WholeGraph()
        self.kernels: dict[str, str] = {}          # group key -> function name prefix
        self.bodies: dict[str, str] = {}           # kernel source (named kernel_*) -> function name prefix
        self.body_index: dict[str, int] = {}       # function name prefix -> its index in `sources`
        self.plans: dict[str, GeneratedKernel] = {}   # group key -> its kernel's plan and parameters
        self.sources: list[str] = []
        self.spans: list[tuple[int, int, int, int]] = []   # (group, source index, first, last line in it; 0-based)
        self.symbols = sorted({s for v in program.inputs for s in v.type.symbols})
        self.values: dict[str, Value] = {v.name: v for v in program.inputs}
        self.values.update((r.name, r) for op in program.body.ops for r in op.results)
        self.outputs = {v.name for v in program.outputs}

    def build(self) -> WholeGraph:
        run: list[Operation] = []
        for op in self.program.body.ops:
            if op.has(Trait.TERMINATOR):
                continue
            reason = why_not_compiled(op)
            heavy = heavy_group(op) if reason is None and op.name == "jit.group" else None
            if heavy is not None:
                self._close(run)
                run = []
                self.graph.items.append(KernelCall(op, reason=heavy))
                continue
            if reason is None:
                run.append(op)
                if sum(o.name == "jit.group" for o in run) >= self.segment_groups:
                    self._close(run)
                    run = []
                continue
            self._close(run)
            run = []
            self.graph.items.append(Fallback(op, reason))
        self._close(run)
        self.graph.source = "\n\n\n".join(self.sources) + "\n"
        return self.graph

    def locate(self, offset: int) -> None:
        """Fills `group_lines` once the sources sit `offset` lines down the module."""
        starts = []
        for text in self.sources:
            starts.append(offset)
            offset += text.count("\n") + 3               # each source, then two blank lines
        for gid, index, first, last in self.spans:
            self.graph.group_lines.setdefault(gid, []).append((starts[index] + first + 1, starts[index] + last + 1))

    def _close(self, ops: list[Operation]) -> None:
        work = [op for op in ops if op.name == "jit.group" or op.has(Trait.VIEW)]
        if not work:
            return
        name = f"segment{sum(isinstance(i, Segment) for i in self.graph.items)}"
        seg = Segment(name, ops, [])
        self.graph.items.append(seg)
        source = _SegmentSource(self, seg)
        self.sources.append(source.render())
        below = 2                                          # the decorator and def lines
        for gid, first, last in source.spans:
            self.spans.append((gid, len(self.sources) - 1, below + first, below + last))


class _SegmentSource:
    """The source of one segment function."""

    def __init__(self, builder: _Builder, seg: Segment):
        self.b, self.seg = builder, seg
        self.lines: list[str] = []
        self.local: dict[str, str] = {}           # value name -> local variable
        self.external: list[str] = []             # value names passed in
        self.hosts: list[str] = []                # outputs whose bytes are passed in to lodge temporaries
        self.blas = False                         # whether a contraction needs numpy's BLAS addresses
        self.spans: list[tuple[int, int, int]] = []    # (group, first, last index in `lines`)

    def render(self) -> str:
        for op in self.seg.ops:
            if op.name == "jit.group":
                self._group(op)
            elif op.has(Trait.VIEW):
                src = self.array(op.operands[0])
                self._define(op.result, f"{src}.reshape({_shape(op.result.type)})")
        self.seg.params = params = self._params()
        names = ", ".join(p.name for p in params)
        header = f"@njit(fastmath=FLAGS, error_model=\"numpy\", cache=True)\ndef {self.seg.name}({names}):"
        return header + "\n" + "\n".join("    " + line for line in self.lines or ["pass"])

    def _params(self) -> list[KernelParam]:
        params = [KernelParam("arena", ParamRole.ARENA, _BYTE, 1), KernelParam("offsets", ParamRole.OFFSETS, _INT, 1)]
        if self.blas:
            params.append(KernelParam("blas", ParamRole.BLAS, _INT, 1))
        for name in self.external:
            t = self.b.values[name].type
            params.append(KernelParam(self._param(name), ParamRole.VALUE, t.dtype, t.rank, tuple(t.shape), value=name))
        params += [KernelParam(self._param(n, "b_"), ParamRole.HOST, _BYTE, 1, value=n) for n in self.hosts]
        return params + [KernelParam(f"s_{s}", ParamRole.SYMBOL, _INT, value=s) for s in self.b.symbols]

    @staticmethod
    def _param(name: str, prefix: str = "p_") -> str:
        return prefix + name.replace(".", "_").replace("$", "_")

    def _define(self, value: Value, expr: str) -> str:
        var = f"t_{len(self.local)}"
        self.lines.append(f"{var} = {expr}")
        self.local[value.name] = var
        return var

    def array(self, value: Value) -> str:
        """The local holding `value`'s array: passed in, or a view into the arena or an output."""
        if value.name in self.local:
            return self.local[value.name]
        record = self.b.buffers.get(value.name)
        producer = value.op if isinstance(value, OpResult) else None
        produced_here = producer is not None and producer in self.seg.ops
        if not produced_here or record is None or record.kind in ("input", "weight", "constant") \
                or record.kind == "output" or (producer is not None and producer.has(Trait.CONSTANT)):
            if value.name not in self.external:
                self.external.append(value.name)
            self.local[value.name] = self._param(value.name)
            return self.local[value.name]
        return self._place(value, record)

    def _place(self, value: Value, record: BufferRecord) -> str:
        if record.alias_of is not None:
            source = self.b.values[record.alias_of]
            return self._define(value, f"{self.array(source)}.reshape({_shape(value.type)})")
        slot = self.b.graph.buffer_index.setdefault(value.name, len(self.b.graph.buffer_index))
        # A host output comes in as raw bytes: its own dtype may be one numba cannot type (f16).
        if record.region not in (None, "arena") and record.region not in self.hosts:
            self.hosts.append(record.region)
        base = "arena" if record.region in (None, "arena") else self._param(record.region, "b_")
        dtype = f"np.{value.type.dtype.name}"
        return self._define(value, f"{base}[offsets[{slot}]:offsets[{slot}] + {_size(value.type)}]"
                                   f".view({dtype}).reshape({_shape(value.type)})")

    # -- groups ---------------------------------------------------------------------
    def _group(self, op: Operation) -> None:
        first = len(self.lines)
        self._emit_group(op)
        if len(self.lines) > first:
            self.spans.append((int(op.attrs["id"]), first, len(self.lines) - 1))

    def _emit_group(self, op: Operation) -> None:
        ins = [self.array(v) for v in op.operands]
        outs = [self.array(r) for r in op.results]
        con = contraction_of(op)
        extra: list[str] = []
        if con is not None:
            extra = [self._contraction(op, con, ins, outs)]
            if not has_epilogue(op, con):
                return
        prefix = self._kernel(op, [con.result] if con is not None else [])
        dims, size = self._dims(op, con)
        kernel = self.b.plans[op.attrs["key"]]
        lists = {ParamRole.INPUT: ins, ParamRole.INTERMEDIATE: extra, ParamRole.OUTPUT: outs}
        arrays = [lists[p.role][p.index] for p in kernel.params if p.is_array]
        if kernel.flat:          # a flat kernel reads every array 1-D
            arrays = [f"{a}.reshape(-1)" for a in arrays]
        args = ", ".join(arrays + dims)
        if isinstance(size, int):
            which = "par" if size >= PARALLEL_THRESHOLD else "seq"
            self.lines.append(f"{prefix}_{which}({args})")
        else:
            self.lines.append(f"if {size} >= {PARALLEL_THRESHOLD}:")
            self.lines.append(f"    {prefix}_par({args})")
            self.lines.append("else:")
            self.lines.append(f"    {prefix}_seq({args})")

    def _kernel(self, op: Operation, materialized: list[Value]) -> str:
        key = op.attrs["key"]
        if key not in self.b.kernels:
            kernel = generate(op.body, "kernel", materialized)
            body = kernel_functions(kernel)
            # Groups differing only in their shapes (ResNet's conv + batch-norm epilogues) generate the
            # same source: one function serves them all, and numba compiles it once, not per group.
            if body not in self.b.bodies:
                self.b.bodies[body] = prefix = f"g{len(self.b.bodies)}"
                self.b.sources.append(body.replace("def kernel_", f"def {prefix}_"))
                self.b.body_index[prefix] = len(self.b.sources) - 1
            self.b.kernels[key] = self.b.bodies[body]
            self.b.plans[key] = kernel
        index = self.b.body_index[self.b.kernels[key]]
        self.b.spans.append((int(op.attrs["id"]), index, 0, self.b.sources[index].count("\n")))
        return self.b.kernels[key]

    def _dims(self, op: Operation, con) -> tuple[list[str], object]:
        kernel = self.b.plans[op.attrs["key"]]
        plan = kernel.plan
        if kernel.flat:
            t = op.results[0].type
            size = math.prod(t.shape) if t.is_static else " * ".join(_sym(d) for d in t.shape)
            return [_int(size) if isinstance(size, int) else f"({size})"], size
        dims = [_int(d) for d in plan.space]
        static = all(not isinstance(d, Sym) for d in plan.space)
        return dims, (math.prod(int(d) for d in plan.space) if static else " * ".join(dims) or "1")

    def _contraction(self, group: Operation, con: Operation, ins: list[str], outs: list[str]) -> str:
        block = group.body
        (a, ta), (b, tb) = ((ins[i], transposed) for i, transposed in contraction_operands(block, con))
        outputs = list(block.last_op.operands)
        if con.result in outputs:
            dst = outs[outputs.index(con.result)]
        else:
            k = epilogue_target(con, outputs)
            if k is not None:
                dst = outs[k]
            else:
                dst = f"m_{len(self.lines)}"
                self.lines.append(f"{dst} = np.empty({_shape(con.result.type)}, np.{con.result.type.dtype.name})")
        self.blas = True
        if con.name == "np.conv2d":
            at = con.attrs
            geometry = (*at["strides"][:2], *at["pads"][:2], *at["dilations"][:2], at["groups"])
            self.lines.append(f"conv2d_nb({a}, {b}, {dst}, {', '.join(_int(g) for g in geometry)}, blas)")
        else:
            self.lines.append(dot_call(a, b, dst, con, ta, tb))
        return dst


def dot_call(a: str, b: str, dst: str, con: Operation, ta: bool, tb: bool) -> str:
    """The BLAS call(s) of a matmul; `ta`/`tb`: the operand is stored transposed (2-D only)."""
    at, bt = (v.type for v in con.operands)
    flags = f"{ta}, {tb}"
    if at.rank == 2 and bt.rank == 2:
        return f"gemm(blas, {a}, {b}, {dst}, {flags})"
    if bt.rank == 1:        # (M, K) @ (K,): a gemm with one column
        return f"gemm(blas, {a}, {b}.reshape(-1, 1), {dst}.reshape(-1, 1), {ta}, False)"
    if bt.rank == 2:        # (..., M, K) @ (K, N): one call over the flattened leading dims
        k, n = _sym(at.shape[-1]), _sym(bt.shape[-1])
        return f"gemm(blas, {a}.reshape(-1, {k}), {b}, {dst}.reshape(-1, {n}), {flags})"
    m, k, n = _sym(at.shape[-2]), _sym(at.shape[-1]), _sym(bt.shape[-1])
    return (f"for _i in range({a}.reshape(-1, {m}, {k}).shape[0]):\n"
            f"        gemm(blas, {a}.reshape(-1, {m}, {k})[_i], {b}.reshape(-1, {k}, {n})[_i], "
            f"{dst}.reshape(-1, {m}, {n})[_i], False, False)")


def kernel_functions(kernel) -> str:
    """A generated kernel's parallel and sequential functions, decorated, as one module text."""
    # a kernel that raises has no prange loop (codegen.generate): parallel=True would only warn
    return _decorate(kernel.par, "prange(" in kernel.par) + "\n\n\n" + _decorate(kernel.seq, False)


def _decorate(src: str, parallel: bool) -> str:
    flags = "parallel=True, " if parallel else ""
    return f"@njit({flags}fastmath=FLAGS, error_model=\"numpy\", cache=True)\n{src}"


GEMM_IMPORT = "from jitlab.backends.numba_cpu.blas import gemm  # noqa: F401\n"
# what a native library's segments import instead: they are built only where numpy's cblas is found
NATIVE_GEMM_IMPORT = "from jitlab.backends.numba_cpu.blas import gemm_cblas as gemm  # noqa: F401\n"


def whole_graph(program: Program, plan: MemoryPlan, segment_groups: int = SEGMENT_GROUPS) -> WholeGraph:
    """Segments (of at most `segment_groups` groups; 1 for profiling) and fallbacks for a
    scheduled, statically planned program."""
    builder = _Builder(program, plan, segment_groups)
    graph = builder.build()
    header = (f'"""O2 segments of @{program.name}."""\n\n' + module_header()
              + GEMM_IMPORT
              + "from jitlab.backends.numba_cpu.library import conv2d_nb  # noqa: F401\n\n\n")
    graph.source = header + graph.source
    builder.locate(header.count("\n"))
    return graph


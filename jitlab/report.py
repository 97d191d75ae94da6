"""The CompileReport: everything the compiler decided, as plain JSON-serialisable data.

Every stage appends to one report; the explorer widgets, the static HTML and the CLI
only read it. Ops are referred to by their stable `uid`, so views can link an op in a
pass diff, a group, the schedule and the memory plan.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from dataclasses import dataclass, field
from typing import Any, TypedDict


@dataclass(kw_only=True)
class OpNode:
    """One op of a graph snapshot: enough to draw and link it, nothing to recompute."""

    uid: int
    name: str
    results: list[str]            # printed value names
    types: list[str]              # printed result types
    operands: list[str]           # printed value names of its operands
    attrs: dict[str, str]         # printed attribute values
    group: int | None = None      # id of the jit.group holding it, if any
    loc: str | None = None        # source location from tracing
    view: bool = False            # a no-task op (reshape, squeeze...): re-views its first operand
    block_args: list[str] = field(default_factory=list)  # a region op's block arguments, matching its operands
    yields: list[str] = field(default_factory=list)      # a region op's yielded values, matching its results
    scope: list[str] = field(default_factory=list)       # namespaces it sits in, outermost first (Location.scope)
    function: str = ""            # the function (or ONNX node) that made it
    regions: list[RegionNode] = field(default_factory=list)  # a control-flow op's regions (scf.for, scf.while, scf.if)
    parent: int | None = None     # uid of the control-flow op whose region holds it, if any
    region: int = 0               # which of that op's regions holds it


@dataclass(kw_only=True)
class RegionNode:
    """One region of a control-flow op: its block's arguments and what its terminator passes on."""

    args: list[str]
    yields: list[str]             # scf.yield's operands; scf.condition's (the loop's condition)


@dataclass(kw_only=True)
class GraphSnapshot:
    """A program's ops in order (group bodies flattened in, tagged with their group)."""

    inputs: list[str]
    input_types: list[str]
    outputs: list[str]
    nodes: list[OpNode]


@dataclass(kw_only=True)
class RewriteRecord:
    """One applied rewrite: which rule, at which root op, what it created and erased."""

    rule: str
    root: int
    root_name: str
    created: list[int] = field(default_factory=list)
    erased: list[int] = field(default_factory=list)
    modified: list[int] = field(default_factory=list)   # ops left in place whose operands or attrs changed
    moved: list[int] = field(default_factory=list)      # ops moved (to another place or into a region), uids kept
    source: str = ""              # where the rule is defined ("path/file.py:line"), for the explorer's stepper
    before: list[str] = field(default_factory=list)     # the lines of the ops it erased or changed, before it
    after: list[str] = field(default_factory=list)      # the lines of the ops it made or changed, after it


@dataclass(kw_only=True)
class RuleMiss:
    """A rule tried at an op that did not apply, and the first constraint that failed."""

    rule: str
    op: int
    op_name: str
    reason: str


@dataclass(kw_only=True)
class PassRecord:
    """One run of one pass."""

    name: str
    options: str
    before: str
    after: str
    seconds: float
    changed: bool
    ops_before: dict[str, int]
    ops_after: dict[str, int]
    rewrites: list[RewriteRecord] = field(default_factory=list)
    misses: list[RuleMiss] = field(default_factory=list)
    graph_before: GraphSnapshot | None = None
    graph_after: GraphSnapshot | None = None
    notes: list[str] = field(default_factory=list)


@dataclass(kw_only=True)
class FoldedWeight:
    """A value the fold-weights pass computed at compile time: now a weight (or, small, a constant)."""

    name: str                     # the new weight's name; "" for a constant
    type: str
    bytes: int
    ops: list[str]                # the ops folded into it, in the order they ran
    sources: list[str]            # the program's original weights it was computed from
    op: int = 0                   # uid of the np.weight (np.constant) op that holds it


@dataclass(kw_only=True)
class WeightFolding:
    """What fold-weights computed once at compile time instead of at every call, and its cost in bytes."""

    folded: list[FoldedWeight] = field(default_factory=list)
    into_conv: list[int] = field(default_factory=list)      # uids of the conv2d ops that took a per-channel chain
    skipped: list[RuleMiss] = field(default_factory=list)   # weight-only ops left to run: too large, over the limit
    bytes_before: int = 0         # bytes of the weights the program read before the pass
    bytes_after: int = 0          # and after: the folded values in, the weights they replace out
    limit_bytes: int = 0
    ops_folded: int = 0           # ops run once at compile time (those of folds later folded again included)


class FusionKind(str, enum.Enum):
    """How an op takes part in fusion, as its backend says; a group's kind is its strongest member's.
    The values are the spellings reports and the explorer show."""

    ELEMENTWISE = "elementwise"
    INJECTIVE = "injective"        # reads its input through an index map (slice, transpose, broadcast)
    VIEW = "view"                  # no-task alias of its input: no kernel
    REDUCTION = "reduction"
    CONTRACTION = "contraction"    # matmul, conv: a library call with elementwise epilogues
    WRITE = "write"                # update_slice, scatter: stores into an array
    OPAQUE = "opaque"              # compiled on its own

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


@dataclass(kw_only=True)
class GroupRecord:
    """A fused group: its ops (uids), kind, backend and kernel key."""

    id: int
    ops: list[int]
    op_names: list[str]
    backend: str
    key: str
    kind: FusionKind
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)


@dataclass(kw_only=True)
class Rejection:
    """An op left out of every group, and why."""

    op: int
    name: str
    reason: str


@dataclass(kw_only=True)
class FusionDecision:
    """Why two neighbouring ops (producer -> consumer) were or were not fused."""

    producer: int
    consumer: int
    fused: bool
    reason: str


@dataclass(kw_only=True)
class ScheduleRecord:
    """The execution order used and the peak memory of every order compared."""

    order: list[int]
    strategy: str
    peaks: dict[str, int] = field(default_factory=dict)
    orders: dict[str, list[int]] = field(default_factory=dict)
    timelines: dict[str, list[int]] = field(default_factory=dict)   # live bytes per step, per order
    bindings: dict[str, int] = field(default_factory=dict)          # symbol values the peaks assume
    source: str = ""              # which candidate the memory-aware order came from


@dataclass(kw_only=True)
class StreamEvent:
    """A cross-stream dependency: `consumer` waits for an event recorded after `producer`."""

    producer: int
    consumer: int
    from_stream: int
    to_stream: int


@dataclass(kw_only=True)
class StreamPlan:
    """Which stream each top-level op runs on (`ops[k]` on `stream_of[k]`) and the events between streams."""

    streams: int
    ops: list[int] = field(default_factory=list)
    stream_of: list[int] = field(default_factory=list)
    events: list[StreamEvent] = field(default_factory=list)

    def stream(self, uid: int) -> int:
        return self.stream_of[self.ops.index(uid)] if uid in self.ops else 0


@dataclass(kw_only=True)
class GraphCapture:
    """One input signature's captured CUDA graph, replayed by every later call with that signature."""

    signature: str                 # each input's shape, dtype and whether it came from the host or the device
    nodes: int                     # nodes of the captured graph
    kernel_nodes: int              # generated kernels and library kernels (cuBLAS) among them
    copy_nodes: int                # host <-> device copies of the inputs and results staged through pinned memory
    launches_replaced: int         # kernel launches and copies one call queued one by one before the capture
    seconds: float                 # capture and instantiation


@dataclass(kw_only=True)
class CudaGraphRecord:
    """Whether cuda calls replay captured CUDA graphs (one launch per call), why not, and each capture."""

    replay: bool
    reason: str                    # why calls replay graphs, or why each call launches its steps directly
    captures: list[GraphCapture] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)   # signatures whose capture failed, with the error


@dataclass(kw_only=True)
class BufferRecord:
    """One buffer of the memory plan: where and when it lives."""

    name: str
    bytes: int
    offset: int | None
    first: int
    last: int
    producer: int | None
    producer_name: str = ""
    kind: str = "temp"            # input, output, weight, temp, view
    alias_of: str | None = None
    region: str | None = None     # what `offset` counts from: "arena", or the output whose buffer a
                                  # temporary borrows before that output is written (static plans)
    role: str = ""                # "activation": made by a forward op, kept for a backward op


@dataclass(kw_only=True)
class MemoryPlan:
    """Peak, bounds and per-buffer placement of a schedule's memory."""

    peak_bytes: int
    lower_bound_bytes: int
    naive_bytes: int
    buffers: list[BufferRecord]
    mode: str = "static"          # static (one arena) or dynamic (pool)
    alignment: int = 64
    live_bytes: list[int] = field(default_factory=list)      # per step
    region_bytes: list[int] = field(default_factory=list)    # per step: a loop's or if's own, in live_bytes
    heuristic: str = ""
    heuristics: dict[str, int] = field(default_factory=dict)
    pool: list[dict[str, int]] = field(default_factory=list)  # per step pool stats (dynamic mode)
    bindings: dict[str, int] = field(default_factory=dict)
    arena_bytes: int = 0          # static: the arena's size; dynamic: the pool's reserved peak
    arena_lower_bound_bytes: int = 0   # largest live set of the buffers the arena or pool holds
    fixed_bytes: int = 0          # inputs, weights and constants: live throughout, never allocated
    first_chunk_bytes: int = 0    # dynamic: the pool's first chunk, as large as the peak in use
    order: list[int] = field(default_factory=list)            # op uid of each step

    def peak_step(self) -> int | None:
        """The step where the most bytes are live: when the peak (`peak_bytes`) is reached. Every
        view and message names `peak_bytes` as the peak, and this step as its time."""
        if not self.live_bytes:
            return None
        return max(range(len(self.live_bytes)), key=self.live_bytes.__getitem__)

    def overhead_bytes(self) -> int:
        """What the peak holds beyond the tensors live at its step: the arena's or pool's
        fragmentation and alignment, and outputs kept outside it."""
        step = self.peak_step()
        return max(self.peak_bytes - (self.live_bytes[step] if step is not None else 0), 0)

    def largest_live_at_peak(self, n: int = 5) -> list[BufferRecord]:
        step = self.peak_step()
        if step is None:
            return []
        live = [b for b in self.buffers if b.first <= step <= b.last and b.alias_of is None]
        return sorted(live, key=lambda b: -b.bytes)[:n]


@dataclass(kw_only=True)
class DonationRecord:
    """An output written into a donated input's array: `output` (index and name) takes the array
    of input `input`, in place or copied in at the end (runtime/donation.py)."""

    output: int
    output_name: str
    input: int
    input_name: str
    mode: str = "copy"            # "in place" (written directly) or "copy" (copied in at the end)
    bytes: int = 0


@dataclass(kw_only=True)
class RecomputeAttempt:
    """One run of the pipeline under a memory limit: the recompute pass's target and the plan's peak."""

    target_bytes: int
    planned_peak_bytes: int | None


@dataclass(kw_only=True)
class RecomputeRecord:
    """The trade a recompute run made: which values, memory saved, ops added; and, under
    jl.compile's memory_limit, the plan's peak after each attempt (passes/recompute.py)."""

    limit_bytes: int
    peak_before: int              # the pass's estimates: the program order's largest live set
    peak_after: int
    ops_added: int = 0
    values: list[str] = field(default_factory=list)
    reached: bool = True
    planned_peak_bytes: int | None = None       # the memory plan's peak after the last attempt
    attempts: list[RecomputeAttempt] = field(default_factory=list)


@dataclass(kw_only=True)
class KernelTiming:
    """Where one kernel's compile time went, in seconds: disjoint parts of its `compile_seconds`."""

    codegen: float = 0.0          # our Python writing the kernel's source
    kernel_cache: float = 0.0     # jitlab's kernel cache: finding, checking (or writing) and importing the module
    numba_init: float = 0.0       # numba readying its typing and target contexts (once a process: ~1 s)
    numba_cache_read: float = 0.0   # numba's disk cache: looking up the compiled code and loading it
    numba_cache_write: float = 0.0  # numba's disk cache: saving code it has just compiled
    typing: float = 0.0           # numba's type inference (helpers it compiles or loads on the way included)
    llvm: float = 0.0             # LLVM parsing, optimising and emitting machine code (numba's LLVM lock held)
    numba_other: float = 0.0      # numba's other passes: bytecode, rewrites, parfors, building LLVM IR

    def add(self, other: KernelTiming) -> None:
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def sum(self) -> float:
        return sum(getattr(self, f.name) for f in dataclasses.fields(self))


@dataclass(kw_only=True)
class CompileTiming:
    """Where one compile went, in seconds. trace, setup, passes and kernels are disjoint parts of `total`;
    shape_inference is part of trace and passes, executable_cache part of passes, and `kernel_parts`
    (the sum of every kernel's KernelTiming) part of kernels."""

    total: float = 0.0            # trace (when the program was traced in this process) and jl.compile
    trace: float = 0.0            # tracing the function or importing the model
    setup: float = 0.0            # resolving the target, importing its backend (numba: once a process, ~0.6 s)
    shape_inference: float = 0.0  # inferring result types while tracing and in the passes
    passes: float = 0.0           # the pipeline, or its result loaded from the executable cache
    executable_cache: float = 0.0  # keying, loading or storing the executable cache entry
    kernels: float = 0.0          # compiling every kernel (O2: the program's segments)
    kernel_parts: KernelTiming = field(default_factory=KernelTiming)


@dataclass(kw_only=True)
class KernelRecord:
    """A compiled kernel: its source, compile time and cache outcome."""

    key: str
    backend: str
    source: str
    compile_seconds: float
    cache_hit: bool
    miss_reason: str = ""
    group: int | None = None
    choice: str = ""              # why this kernel (generated vs library) was selected
    reused_by: list[int] = field(default_factory=list)
    # O2's program-wide source: group id -> (first, last) 1-based line ranges generated for that group
    group_lines: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    timing: KernelTiming = field(default_factory=KernelTiming)    # the parts of compile_seconds
    worker: bool = False          # compiled by a worker process: compile_seconds and timing are this
                                  # process loading its result from the cache
    code: str = ""                # the compiled code it runs (kernel cache key); records of groups that differ
                                  # only in their sizes share it, "" for a library call alone

    def shares_code_with(self, records: list[KernelRecord]) -> list[int]:
        """The other groups whose kernels run this record's compiled code (one compile served them)."""
        if not self.code:
            return []
        return [g for r in records if r.code == self.code for g in [r.group, *r.reused_by]
                if g is not None and g != self.group and g not in self.reused_by]


class TimeStats(TypedDict):
    """Seconds over a profile's repeats."""

    median: float
    min: float
    max: float
    spread: float         # max - min


class StepProfile(TimeStats):
    """One top-level step of a profiled call (a group's launch, a library op, a view, an O2 segment)."""

    index: int
    uid: int              # the step's op (its first group for an O2 segment)
    name: str
    group: int | None
    kernel: str | None    # the kernel key the step ran
    start: float          # median offset from the call's first step
    stream: int
    launches: int
    bytes: int            # read and written
    flops: int | None     # floating-point operations (runtime/flops.py); None: unknown (a loop)
    ops: list[int]


class KernelProfile(TimeStats):
    """A kernel over every step that ran it: stats per launch, totals per call."""

    calls: int
    launches: int
    seconds: float
    bytes: int
    flops: int | None     # per program call, as `bytes`
    groups: list[int | None]


class ProfileRecord(TypedDict, total=False):
    """What `jl.profile` measured (runtime/profile.py). A typed dict, not a dataclass: `jl.profile`
    returns it and users index it; `{}` before any profile."""

    level: str
    target: str
    mode: str             # "steps", "instrumented", "events" or "total"
    repeats: int
    warmup: int
    bindings: dict[str, int]
    total: TimeStats      # the whole call
    steps: list[StepProfile]
    kernels: dict[str, KernelProfile]
    bounds: dict[str, Any]   # the device's measured copy bandwidth and peak FLOP/s (runtime/bounds.py)


@dataclass(kw_only=True)
class ExecutableCacheRecord:
    """Whether the passes' result came from the executable cache (runtime/executable_cache.py), and
    where its entry is; on a miss whether this compile stored one and, if not, why."""

    hit: bool
    path: str
    stored: bool = False
    reason: str = ""
    key_seconds: float = 0.0      # hashing the program and finding the folder
    load_seconds: float = 0.0     # reading the entry (a hit)


@dataclass(kw_only=True)
class LoopRecord:
    """How one control-flow op runs: as a native loop, or from the host (and why)."""

    uid: int                      # the op's uid
    op: str                       # scf.for, scf.while or scf.if
    loc: str | None = None        # where it was traced
    native: bool = False          # the whole loop runs as one compiled function
    reason: str = ""              # why it runs from the host, calling its compiled body per iteration
    # A native loop's memory: its buffers, allocated once and reused every iteration (one
    # iteration's live set), each with the body values it holds in turn and its bytes
    buffers: list[dict[str, Any]] = field(default_factory=list)
    iteration_bytes: int = 0      # the sum of those buffers: the peak inside the loop over the live set outside
    carried_bytes: int = 0        # the carried values, double-buffered (twice each)


@dataclass(kw_only=True)
class CompileReport:
    """All of one compilation, for the explorer, the CLI and the tests."""

    program: str = ""
    level: str = ""
    target: str = ""
    passes: list[PassRecord] = field(default_factory=list)
    groups: list[GroupRecord] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)
    fusion: list[FusionDecision] = field(default_factory=list)
    schedule: ScheduleRecord | None = None
    memory: MemoryPlan | None = None
    streams: StreamPlan | None = None
    launch_sequence: str = ""     # O2 on a device: the generated function that queues every launch
    cuda_graphs: CudaGraphRecord | None = None    # cuda: graph capture and replay (None on other targets)
    kernels: list[KernelRecord] = field(default_factory=list)
    profile: ProfileRecord = field(default_factory=lambda: ProfileRecord())
    graph: GraphSnapshot | None = None
    warnings: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    stats: dict[str, int] = field(default_factory=dict)    # counts: kernels compiled/reused, launches saved
    donations: list[DonationRecord] = field(default_factory=list)  # outputs written into donated inputs
    recompute: RecomputeRecord | None = None    # the recompute pass's trade: peaks, values, ops added
    folding: WeightFolding | None = None         # the fold-weights pass: values computed at compile time
    executable_cache: ExecutableCacheRecord | None = None   # None when the cache was not asked
    timing: CompileTiming | None = None          # where the compile's time went
    loops: list[LoopRecord] = field(default_factory=list)   # each control-flow op: native or from the host

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, default=str)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompileReport:
        return _from_dict(cls, data)


def _from_dict(cls, data):
    """Rebuilds nested dataclasses from `asdict` output, guided by the field types."""
    import typing

    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in data:
            kwargs[f.name] = _convert(hints[f.name], data[f.name])
    return cls(**kwargs)


def _convert(hint, value):
    import typing

    if value is None:
        return None
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if dataclasses.is_dataclass(hint):
        return _from_dict(hint, value)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint(value)
    if origin is list and args and dataclasses.is_dataclass(args[0]):
        return [_from_dict(args[0], v) for v in value]
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        for a in args:
            if dataclasses.is_dataclass(a):
                return _from_dict(a, value)
    return value


def snapshot(program) -> GraphSnapshot:
    """The graph of `program` as plain data (values named as the printer names them); the ops of a
    control-flow op's regions follow it, each tagged with the op and the region holding it."""
    from .ir.attributes import Dense, format_attr
    from .ir.opdef import Trait
    from .ir.printer import assign_names

    assign_names(program)
    nodes = []

    def node(op, group, where):
        attrs = {k: (f"dense {v.array.dtype}{list(v.array.shape)}" if isinstance(v, Dense) and v.array.size > 8
                     else format_attr(v)) for k, v in op.attrs.items()}
        inner = op.regions[0].blocks[0] if op.name == "jit.group" and op.regions[0].blocks else None
        return OpNode(
            uid=op.uid, name=op.name, results=[r.name for r in op.results],
            types=[str(r.type) for r in op.results], operands=[v.name for v in op.operands], attrs=attrs,
            group=group, loc=str(op.loc) if op.loc is not None else None, view=op.has(Trait.VIEW),
            block_args=[a.name for a in inner.args] if inner else [],
            yields=[v.name for v in inner.last_op.operands] if inner and inner.last_op else [],
            scope=list(op.loc.scope) if op.loc is not None else [],
            function=op.loc.function if op.loc is not None else "", parent=where[0], region=where[1],
            regions=[] if op.name == "jit.group" else [_region_node(r) for r in op.regions])

    def visit(block, group, where):
        for op in block.ops:
            if op.has(Trait.TERMINATOR):
                continue
            if op.name == "jit.group":
                visit(op.body, op.attrs["id"], where)
            nodes.append(node(op, group, where))
            if op.name != "jit.group":
                for r, region in enumerate(op.regions):
                    for inner in region.blocks:
                        visit(inner, group, (op.uid, r))

    visit(program.body, None, (None, 0))
    return GraphSnapshot(inputs=[a.name for a in program.inputs], input_types=[str(a.type) for a in program.inputs],
                         outputs=[v.name for v in program.outputs], nodes=nodes)


def _region_node(region) -> RegionNode:
    block = region.blocks[0] if region.blocks else None
    last = block.last_op if block is not None else None
    return RegionNode(args=[a.name for a in block.args] if block else [],
                      yields=[v.name for v in last.operands] if last is not None else [])

"""The `plan-memory` pass and the memory plans of each level, for concrete shape bindings.

- static (O2, as MindSpore's SOMAS): every temporary gets an offset in one arena, packed
  by several heuristics of which the smallest arena wins (see packing.py);
- dynamic (O1, as Paddle's BufferMalloc/BufferFree): `mem.alloc` / `mem.reuse` / `mem.free`
  ops are inserted right before a buffer's first use and right after its last, and the
  pool's behaviour over that sequence is replayed to give its peak;
- eager (O0): the reference interpreter holds every value until the program returns.

In every mode inputs, weights and constants are never allocated or freed by compiled
code, and outputs go to the caller (outside the arena in static mode, from the pool with
ownership tracking in dynamic mode). A plan's `peak_bytes` counts all of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..dialects.mem import is_mem_op
from ..dialects.scf import REGION_OPS, region_program
from ..errors import PassError
from ..ir.core import Operation
from ..ir.printer import assign_names
from ..ir.program import Program
from ..ir.shapes import num_elements
from ..report import BufferRecord, MemoryPlan
from .activations import activation_roots
from .liveness import FIXED, Lifetimes, StepGraph, donated_in_place, round_up
from .manager import Pass, PassContext, register_pass
from .packing import Host, Interval, arena_lower_bound, best_packing
from .pool_core import DEFAULT_ALIGNMENT, DEFAULT_CHUNK_BYTES, PoolCore
from .rewriter import Rewriter
from .schedule import hint_bindings

MODES = ("static", "dynamic")


def buffer_records(life: Lifetimes, placement: Mapping[int, tuple[str, int]] | None = None) -> list[BufferRecord]:
    """One record per value: owners with their lifetime, views and in-place results pointing
    at their owner; `placement` gives owners their (region, offset)."""
    placement = placement or {}
    pos = {n: s for s, n in enumerate(life.order)}
    records = [_record(life, i, pos, placement.get(life.buffer_of(i), (None, None)))
               for i in range(len(life.graph.values))]
    for i in activation_roots(life.graph):
        records[i].role = "activation"
    return records


def _record(life: Lifetimes, i: int, pos: dict[int, int], place: tuple) -> BufferRecord:
    g = life.graph
    v, buf = g.values[i], life.buffer_of(i)
    op = getattr(v, "op", None)
    producer = {"producer": op.uid, "producer_name": op.name} if op is not None else {"producer": None}
    region, offset = place
    if buf == i:
        return BufferRecord(name=v.name, bytes=g.bytes[i], offset=offset, first=life.first[i], last=life.last[i],
                            **producer, kind=life.kind(i), region=region)
    born = pos[g.producer[i]] if g.producer[i] >= 0 else 0
    last = max(len(life.order) - 1, 0) if i in g.outputs else max((pos[u] for u in g.users[i]), default=born)
    return BufferRecord(name=v.name, bytes=g.bytes[i], offset=offset, first=born, last=last, **producer,
                        kind="view" if g.kind[i] == "view" else "inplace", alias_of=g.values[buf].name, region=region)


def region_bytes(op: Operation, program: Program, bindings: Mapping[str, int]) -> int:
    """What one run of a control-flow op's region holds beyond the op's operands and results: the
    largest live set of its own values, nested regions included (a loop's yields too: each carried
    value has its next iteration's buffer beside it); 0 for any other op."""
    if op.name not in REGION_OPS:
        return 0
    return max(_own_bytes(op, r, program, bindings) for r in range(len(op.regions)))


def _own_bytes(op: Operation, region: int, program: Program, bindings: Mapping[str, int]) -> int:
    sub = region_program(op, region, program)
    life = StepGraph(sub, bindings).analyze()
    # a branch's yields are the if's results, counted outside; a loop's are the next carries
    own = ("temp",) if op.name == "scf.if" else ("temp", "output")
    live = life.live_bytes(size=lambda b: life.graph.bytes[b] if life.kind(b) in own else 0)
    return max((n + region_bytes(life.graph.ops[k], sub, bindings) for n, k in zip(live, life.order)), default=0)


def _plan(life: Lifetimes, mode: str, alignment: int, placement=None) -> MemoryPlan:
    """The plan's records and live sets, each step's with what its regions hold (region_bytes)."""
    g = life.graph
    regions = [region_bytes(g.ops[n], g.program, g.bindings) for n in life.order]
    live = [n + extra for n, extra in zip(life.live_bytes(), regions)]
    fixed = sum(g.bytes[b] for b in life.buffers if life.kind(b) in FIXED)
    naive = sum(g.bytes[r] for r in g.root_kind)
    return MemoryPlan(peak_bytes=0, lower_bound_bytes=max(live, default=fixed), naive_bytes=naive,
                      buffers=buffer_records(life, placement), mode=mode, alignment=alignment, live_bytes=live,
                      bindings=dict(g.bindings), fixed_bytes=fixed, order=[g.ops[n].uid for n in life.order],
                      region_bytes=regions)


def static_plan(program: Program, bindings: Mapping[str, int] | None = None,
                alignment: int = DEFAULT_ALIGNMENT, donate: Sequence[str] = ()) -> MemoryPlan:
    """One arena for every temporary of the program in its block order (temporaries that die
    before an output is written may borrow that output's buffer instead).

    Borrowing is for static shapes only: code compiled once for a symbolic program reads
    offsets per binding, but which buffer holds a temporary must not change with the sizes.
    Outputs written into donated inputs (`donate`) live in those arrays and host nothing."""
    life = StepGraph(program, bindings, donate).analyze()
    g = life.graph
    items = [Interval(b, round_up(g.bytes[b], alignment), life.first[b], life.last[b])
             for b in life.buffers if life.kind(b) == "temp"]
    symbolic = any(v.type.symbols for v in program.inputs)
    outputs = [b for b in life.buffers if life.kind(b) == "output"]
    hosts = [] if symbolic else [Host(b, g.bytes[b] // alignment * alignment, life.first[b]) for b in outputs]
    winner, placed, arena, sizes = best_packing(items, hosts)
    placement = {b: ("arena" if host is None else g.values[host].name, offset) for b, (host, offset) in placed.items()}
    plan = _plan(life, "static", alignment, placement)
    # a control-flow op's regions allocate their own buffers while the arena is held
    plan.peak_bytes = plan.fixed_bytes + sum(g.bytes[b] for b in outputs) + arena + max(plan.region_bytes, default=0)
    plan.arena_bytes, plan.heuristic, plan.heuristics = arena, winner, sizes
    plan.arena_lower_bound_bytes = arena_lower_bound(items, len(life.order))
    return plan


@dataclass
class StepEvents:
    """What dynamic mode does around one step: allocate, reuse in place, then free after it."""

    allocs: list[int]
    reuses: list[tuple[int, int]]     # (source value, result value)
    frees: list[int]


def step_events(life: Lifetimes) -> list[StepEvents]:
    """The alloc, reuse and free events of each step, in the order the IR carries them."""
    events = [StepEvents([], [], []) for _ in life.order]
    for b in life.buffers:
        kind = life.kind(b)
        if kind in ("temp", "output"):
            events[life.first[b]].allocs.append(b)
        if kind == "temp":
            events[life.last[b]].frees.append(b)
    for ip in life.in_place:
        events[ip.step].reuses.append((ip.source, ip.result))
    return events


def dynamic_plan(program: Program, bindings: Mapping[str, int] | None = None,
                 alignment: int = DEFAULT_ALIGNMENT, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                 donate: Sequence[str] = ()) -> MemoryPlan:
    """Buffers allocated from the pool right before first use and freed right after last use;
    the pool's behaviour is replayed on offsets only, so nothing is allocated."""
    life = StepGraph(program, bindings, donate).analyze()
    plan = _plan(life, "dynamic", alignment)
    # The executor's pool starts with one chunk as large as the peak in use (a first replay
    # finds it), so a call grows the pool only where best fit leaves gaps, not chunk by chunk.
    probe = PoolCore(chunk_bytes, alignment)
    replay_pool(life, probe)
    plan.first_chunk_bytes = probe.peak_in_use
    core = PoolCore(chunk_bytes, alignment)
    core.reserve(plan.first_chunk_bytes)
    plan.pool = replay_pool(life, core)
    plan.arena_bytes = core.peak_reserved
    plan.arena_lower_bound_bytes = core.peak_in_use
    # a control-flow op's regions allocate beside what the pool holds at its step
    plan.peak_bytes = plan.fixed_bytes + max([core.peak_reserved] + [t["reserved"] + extra for t, extra
                                                                      in zip(plan.pool, plan.region_bytes) if extra])
    return plan


def replay_pool(life: Lifetimes, core: PoolCore) -> list[dict]:
    """Runs the step events through `core` as the executor would; its stats after each step's allocations."""
    blocks, held, timeline = {}, 0, []
    for ev in step_events(life):
        for b in ev.allocs:
            blocks[b] = core.allocate(life.graph.bytes[b])
            held += blocks[b].size if life.kind(b) == "output" else 0
        timeline.append(core.stats(held).as_dict())
        for b in ev.frees:
            core.free(blocks[b].chunk, blocks[b].start)
    return timeline


def eager_plan(program: Program, bindings: Mapping[str, int] | None = None) -> MemoryPlan:
    """O0: the reference interpreter keeps every value until the program returns."""
    life = StepGraph(program, bindings).analyze(in_place=False)
    end = max(len(life.order) - 1, 0)
    for b in life.buffers:
        life.last[b] = end
    plan = _plan(life, "eager", 1)
    plan.peak_bytes = plan.lower_bound_bytes
    return plan


def insert_mem_ops(program: Program, life: Lifetimes, rw: Rewriter) -> None:
    """Writes the step events of `life` into the program as mem.alloc / mem.reuse / mem.free ops."""
    assign_names(program)
    g = life.graph
    for ev, n in zip(step_events(life), life.order):
        op = g.ops[n]
        rw.set_insertion_point(op)
        for b in ev.allocs:
            v = g.values[b]
            rw.create("mem.alloc", [], {"value": v.name, "bytes": num_elements(v.type.shape) * v.type.dtype.itemsize,
                                        "kind": life.kind(b)}, result_types=[])
        for source, result in ev.reuses:
            rw.create("mem.reuse", [g.values[source]], {"value": g.values[result].name}, result_types=[])
        rw.set_insertion_point(op.next_op)
        for b in ev.frees:
            rw.create("mem.free", [g.values[b]], result_types=[])


@register_pass
@dataclass
class PlanMemory(Pass):
    name = "plan-memory"
    summary = "Plans buffers: an arena with offsets (static) or mem.alloc/mem.free ops for the pool (dynamic)."

    mode: str = "static"
    alignment: int = DEFAULT_ALIGNMENT

    def apply(self, program: Program, ctx: PassContext) -> Program:
        self._check_options()
        rw = Rewriter(program)
        for op in [op for op in program.body.ops if is_mem_op(op)]:
            rw.erase_op(op)
        bindings = hint_bindings(program, ctx.bindings)
        donate = donated_in_place(ctx)
        if self.mode == "static":
            plan = static_plan(program, bindings, self.alignment, donate)
        else:
            insert_mem_ops(program, StepGraph(program, bindings, donate).analyze(), rw)
            plan = dynamic_plan(program, bindings, self.alignment, donate=donate)
        ctx.report.memory = plan
        ctx.log.notes.append(f"plan-memory ({self.mode}): peak {plan.peak_bytes} bytes, lower bound "
                             f"{plan.lower_bound_bytes}, naive {plan.naive_bytes}"
                             + (f" (symbols assumed {bindings})" if bindings else ""))
        return program

    def _check_options(self) -> None:
        if self.mode not in MODES:
            raise PassError(f"pass plan-memory: mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.alignment < 1 or self.alignment & (self.alignment - 1) or self.alignment > 4096:
            raise PassError(f"pass plan-memory: alignment must be a power of two up to 4096, got {self.alignment}")

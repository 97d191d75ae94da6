"""`assign-streams`: independent work on separate streams, events where they meet.

After MindSpore's stream and event managers. Ops are taken in program order; an op
continues the stream whose last op it depends on (a chain stays on one stream and
needs no event), otherwise it opens a new stream, up to `max_streams`, after which it
takes the stream that has been idle longest. Each operand produced on another stream
becomes an event: recorded after the producer, waited on before the consumer (once
per producer and consuming stream). Views and constants do no work: an operand seen
through views counts as produced by the op behind them.

The plan is recorded in `report.streams`; the program itself is not changed. Results
never depend on timing, because every cross-stream read waits on its event.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.core import Operation, OpResult, Value
from ..ir.opdef import Trait
from ..ir.program import Program
from ..report import StreamEvent, StreamPlan
from .manager import Pass, PassContext, register_pass


def _is_work(op: Operation) -> bool:
    return not (op.has(Trait.TERMINATOR) or op.has(Trait.CONSTANT) or op.has(Trait.VIEW)
                or op.has(Trait.MEMORY) or op.name == "np.weight")


def producer(value: Value) -> Operation | None:
    """The op whose work made `value` (looking through views); None for inputs and constants."""
    while isinstance(value, OpResult) and value.op.has(Trait.VIEW):
        value = value.op.operands[0]
    if isinstance(value, OpResult) and _is_work(value.op):
        return value.op
    return None


@register_pass
@dataclass
class AssignStreams(Pass):
    """Puts independent top-level ops on separate streams, with events for cross-stream reads."""

    name = "assign-streams"
    summary = "Independent groups go on separate streams; events order the reads across streams."
    max_streams: int = 4

    def apply(self, program: Program, ctx: PassContext) -> Program:
        limit = max(1, int(ctx.streams if ctx.streams is not None else self.max_streams))
        plan = StreamPlan(streams=0)
        last: list[Operation] = []           # the last op on each stream
        stream_of: dict[int, int] = {}
        waited: set[tuple[int, int]] = set()
        for op in (o for o in program.body.ops if _is_work(o)):
            producers = list(dict.fromkeys(p for p in map(producer, op.operands) if p is not None))
            s = _choose(op, producers, last, stream_of, limit)
            for p in producers:
                if stream_of[p.uid] != s and (p.uid, s) not in waited:
                    waited.add((p.uid, s))
                    plan.events.append(StreamEvent(producer=p.uid, consumer=op.uid, from_stream=stream_of[p.uid],
                                               to_stream=s))
            stream_of[op.uid] = s
            plan.ops.append(op.uid)
            plan.stream_of.append(s)
        plan.streams = len(last)
        ctx.report.streams = plan
        ctx.log.notes.append(f"{len(plan.ops)} op(s) on {plan.streams} stream(s), {len(plan.events)} event(s)")
        return program


def _choose(op: Operation, producers: list[Operation], last: list[Operation], stream_of: dict[int, int],
            limit: int) -> int:
    """The stream for `op`: continue a producer's chain, else a new stream, else the idlest."""
    chained = [s for s, tail in enumerate(last) if tail in producers]
    if chained:
        s = min(chained)
    elif len(last) < limit:
        s = len(last)
        last.append(op)
    else:
        position = {uid: k for k, uid in enumerate(stream_of)}    # assignment order
        s = min(range(len(last)), key=lambda k: position[last[k].uid])
    last[s] = op
    return s


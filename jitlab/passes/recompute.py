"""The `recompute` pass: rematerialization under a memory limit.

Forward activations live until the backward pass reads them. Under a limit, the pass
picks activations one at a time, greedily by bytes of peak saved per op added, and
clones their producer chains right before their first backward reader, so the forward
copy dies early (checkpointing). A chain stops at values that stay live anyway: inputs,
weights, constants and activations that backward ops still read at that point. Peaks
are the largest live set of the program order (liveness.py), before fusion; plan-memory
plans the result afterwards. When the limit cannot be reached the pass keeps the best
program found and says so in a warning with that peak.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.core import Operation, Value
from ..ir.opdef import Trait
from ..ir.program import Program
from ..report import RecomputeRecord
from .activations import backward_location, is_backward
from .liveness import StepGraph
from .manager import Pass, PassContext, register_pass
from .rewriter import Rewriter
from .schedule import hint_bindings


def peak(program: Program, bindings=None) -> int:
    """The largest live set of the program in block order (inputs and weights included)."""
    return StepGraph(program, bindings).analyze().lower_bound()


def activations(program: Program) -> list[Value]:
    """Forward results read by a backward op, in block order."""
    return [r for op in program.body.ops if not is_backward(op) and not op.regions
            and not op.has(Trait.CONSTANT) and op.name != "np.weight"
            for r in op.results if any(is_backward(u.op) for u in r.uses)]


def _chain(v: Value, at: Operation, index: dict[Operation, int]) -> list[Operation]:
    """The producer ops to clone for v, earliest first, stopping at values live at `at` anyway."""
    chain: list[Operation] = []
    stack = [v.op]
    pos = index[at]
    while stack:
        op = stack.pop()
        if op in chain:
            continue
        chain.append(op)
        for w in op.operands:
            p = getattr(w, "op", None)
            if p is None or p.has(Trait.CONSTANT) or p.name == "np.weight" or p.regions:
                continue
            if any(is_backward(u.op) and index[u.op] >= pos for u in w.uses):
                continue
            stack.append(p)
    return sorted(chain, key=index.__getitem__)


def rematerialize(program: Program, v: Value) -> int:
    """Clones v's producer chain before its first backward user and redirects backward uses; ops added."""
    index = {op: i for i, op in enumerate(program.body.ops)}
    at = min((u.op for u in v.uses if is_backward(u.op)), key=index.__getitem__)
    chain = _chain(v, at, index)
    rw = Rewriter(program)
    rw.set_insertion_point(at)
    mapping: dict[Value, Value] = {}
    for op in chain:
        new = op.clone(mapping, fresh_uid=True)
        for r in new.results:
            r.name = None
        rw.insert(_as_backward(new))
    for use in [u for u in list(v.uses) if is_backward(u.op)]:
        rw.set_operand(use.op, use.index, mapping[v])
    return len(chain)


def _as_backward(op: Operation) -> Operation:
    op.loc = backward_location(op.loc)
    return op


def _index_of(program: Program, v: Value) -> tuple[int, int]:
    for i, op in enumerate(program.body.ops):
        if v in op.results:
            return i, op.results.index(v)
    raise ValueError(v)


def _value_at(program: Program, where: tuple[int, int]) -> Value:
    return list(program.body.ops)[where[0]].results[where[1]]


def greedy(program: Program, limit: int, bindings=None) -> tuple[Program, RecomputeRecord]:
    """Recomputes activations until the peak is at most `limit` or nothing helps."""
    before = peak(program, bindings)
    record = RecomputeRecord(limit_bytes=limit, peak_before=before, peak_after=before)
    current, now = program, record.peak_before
    while now > limit:
        best = None
        for v in activations(current):
            trial = current.clone()
            added = rematerialize(trial, _value_at(trial, _index_of(current, v)))
            gain = now - peak(trial, bindings)
            if gain > 0 and (best is None or gain / added > best[0]):
                best = (gain / added, trial, added, v.name)
        if best is None:
            break
        _, current, added, name = best
        now = peak(current, bindings)
        record.ops_added += added
        record.values.append(str(name))
    record.peak_after, record.reached = now, now <= limit
    return current, record


@register_pass
@dataclass
class Recompute(Pass):
    name = "recompute"
    summary = "Recomputes forward activations in the backward pass to bring the peak under `limit` bytes."

    limit: str = "0"      # bytes ("64MB" works); 0: take jl.compile's memory_limit

    def apply(self, program: Program, ctx: PassContext) -> Program:
        from ..units import parse_bytes

        limit = parse_bytes(self.limit) if self.limit not in ("0", 0) else ctx.memory_limit
        if not limit:
            ctx.log.notes.append("recompute: no limit given; nothing to do")
            return program
        out, record = greedy(program, int(limit), hint_bindings(program, ctx.bindings))
        ctx.report.recompute = record
        ctx.log.notes.append(f"recompute: peak {record.peak_before} -> {record.peak_after} bytes (limit {limit}), "
                             f"{record.ops_added} op(s) added recomputing {', '.join(record.values) or 'nothing'}")
        if not record.reached:
            ctx.report.warnings.append(f"recompute: the limit of {limit} bytes cannot be reached by recomputing "
                                       f"activations; the best peak found is {record.peak_after} bytes")
        return out

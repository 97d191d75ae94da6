"""What the explorer asks a CompileReport about rewrites: which rules produced an op,
which rewrites touched it, and why a rule did not apply at it.

Plain functions over the report's data (op uids and rule names), so they answer for a
report read back from JSON as well. `op` is an Operation or its uid.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..report import CompileReport, RewriteRecord


@dataclass
class Step:
    """One rewrite in an op's story: the pass run it happened in, and its record."""

    pass_index: int
    pass_name: str
    record: RewriteRecord

    def __str__(self) -> str:
        r = self.record
        return (f"{self.pass_name} (pass #{self.pass_index}): {r.rule} at {r.root_name} (op {r.root}) "
                f"created {r.created}, erased {r.erased}" + (f", moved {r.moved}" if r.moved else ""))


def _uid(op: Any) -> int:
    return op if isinstance(op, int) else op.uid


def steps(report: CompileReport) -> Iterator[Step]:
    """Every recorded rewrite, in the order it happened."""
    for i, record in enumerate(report.passes):
        for rewrite in record.rewrites:
            yield Step(i, record.name, rewrite)


def produced_by(report: CompileReport, op: Any) -> list[Step]:
    """The rewrites that produced `op`, newest first: the one that created it, then the
    one that created that rewrite's root, and so on. Empty for an op of the input program."""
    uid, chain, seen = _uid(op), [], set()
    history = list(steps(report))
    while uid not in seen:
        seen.add(uid)
        step = next((s for s in reversed(history) if uid in s.record.created), None)
        if step is None:
            break
        chain.append(step)
        uid = step.record.root
    return chain


def history(report: CompileReport, op: Any) -> list[Step]:
    """Every rewrite that created, erased, modified, moved or was rooted at `op`, in order."""
    uid = _uid(op)
    return [s for s in steps(report) if uid == s.record.root or uid in s.record.created
            or uid in s.record.erased or uid in s.record.modified or uid in s.record.moved]


def why_not(report: CompileReport, rule: str, op: Any) -> str:
    """Why `rule` did not apply at `op`: the first failed constraint recorded at its last
    try, or what happened instead."""
    uid = _uid(op)
    applied = [s for s in steps(report) if s.record.rule == rule and s.record.root == uid]
    if applied:
        return f"{rule} applied at {applied[-1].record.root_name} (op {uid}) in {applied[-1].pass_name}"
    misses = [(record.name, m) for record in report.passes for m in record.misses if m.rule == rule and m.op == uid]
    if misses:
        pass_name, miss = misses[-1]
        return f"{rule} did not apply at {miss.op_name} (op {uid}) in {pass_name}: {miss.reason}"
    return _never_tried(report, rule, uid)


def _never_tried(report: CompileReport, rule: str, uid: int) -> str:
    from .rules import RULES

    name = op_name(report, uid)
    pattern = RULES.get(rule)
    roots = pattern.roots if pattern is not None else None
    if name is not None and roots and name not in roots:
        return f"{rule} only applies to {', '.join(roots)}; op {uid} is {name}"
    ran = [r.name for r in report.passes if any(m.rule == rule for m in r.misses)
           or any(w.rule == rule for w in r.rewrites)]
    where = f" (it ran in {', '.join(dict.fromkeys(ran))})" if ran else ""
    return (f"{rule} has no record at op {uid}{' (' + name + ')' if name else ''}: the op was not there when "
            f"the rule ran, or it offered nothing to match{where}")


def op_name(report: CompileReport, uid: int) -> str | None:
    """The name of op `uid` as some snapshot or record of the report saw it."""
    for record in report.passes:
        for graph in (record.graph_before, record.graph_after):
            for node in graph.nodes if graph is not None else ():
                if node.uid == uid:
                    return node.name
        for rewrite in record.rewrites:
            if rewrite.root == uid:
                return rewrite.root_name
    return None

"""Pattern rewriting: the Rewriter (the single choke point for IR changes), patterns,
and the greedy worklist driver that applies them to a fixpoint.

Because every change goes through the Rewriter, the driver knows exactly which ops a
rewrite created and erased; that feeds its worklist and the report's rewrite records,
from which the explorer answers "which rule produced this op".
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import PassError
from ..ir.attributes import normalize_attrs
from ..ir.builder import check_operand_count, infer_types
from ..ir.core import Operation, OpResult, Region, Value
from ..ir.opdef import Trait, get_opdef
from ..ir.program import Program
from ..ir.types import TensorType
from ..report import RewriteRecord, RuleMiss


@dataclass
class RewriteLog:
    """Rewrites applied and rule misses recorded during one compilation."""

    rewrites: list[RewriteRecord] = field(default_factory=list)
    misses: list[RuleMiss] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class Rewriter:
    """Creates, replaces and erases ops, telling its listener about each change."""

    def __init__(self, program: Program):
        self.program = program
        self.anchor: Operation | None = None
        self.created: list[Operation] = []
        self.erased: list[Operation] = []
        self.modified: list[Operation] = []
        self.failure: str | None = None

    # -- insertion ----------------------------------------------------------------
    def set_insertion_point(self, op: Operation) -> None:
        """New ops go right before `op`."""
        self.anchor = op

    def create(self, name: str, operands: Sequence[Value] = (), attrs: dict[str, Any] | None = None,
               result_types: Sequence[TensorType] | None = None, regions: Sequence[Region] = ()) -> Operation:
        if self.anchor is None:
            raise PassError("the rewriter has no insertion point")
        opdef = get_opdef(name)
        attrs = normalize_attrs(name, opdef.attrs, dict(attrs or {}))
        if result_types is None:
            result_types = infer_types(opdef, [v.type for v in operands], attrs, self.program.constraints)
        else:
            check_operand_count(opdef, len(operands))
        op = Operation(name, operands, result_types, attrs, regions, loc=self.anchor.loc)
        self.anchor.parent.insert_before(self.anchor, op)
        self.created.append(op)
        return op

    def op(self, name: str, *operands: Value, **attrs: Any) -> Value:
        """Shorthand for a single-result op."""
        return self.create(name, operands, attrs).result

    def insert(self, op: Operation) -> Operation:
        """Inserts an op built elsewhere (e.g. a clone) at the insertion point."""
        self.anchor.parent.insert_before(self.anchor, op)
        self.created.append(op)
        return op

    # -- changes --------------------------------------------------------------------
    def replace_op(self, op: Operation, new_values: Sequence[Value]) -> None:
        """Replaces every use of op's results by `new_values`, then erases op."""
        if len(new_values) != len(op.results):
            raise PassError(f"replacing {op.name}: {len(op.results)} results, {len(new_values)} replacements")
        for old, new in zip(op.results, new_values):
            if old.type != new.type:
                raise PassError(f"replacing {op.name}: result type {old.type} != replacement type {new.type}")
            old.replace_all_uses_with(new)
        self.erase_op(op)

    def replace_uses(self, old: Value, new: Value) -> None:
        for user in old.users:
            self.modified.append(user)
        old.replace_all_uses_with(new)

    def erase_op(self, op: Operation) -> None:
        for inner in op.walk():
            self.erased.append(inner)
        op.erase()

    def set_operand(self, op: Operation, index: int, value: Value) -> None:
        op.set_operand(index, value)
        self.modified.append(op)

    def set_attr(self, op: Operation, key: str, value: Any) -> None:
        attrs = dict(op.attrs)
        attrs[key] = value
        op.attrs = normalize_attrs(op.name, op.opdef.attrs, attrs)
        self.modified.append(op)

    def fail(self, reason: str) -> bool:
        """Records why a pattern did not apply; returns False for `return rw.fail(...)`."""
        self.failure = reason
        return False

    def reset(self) -> None:
        self.created, self.erased, self.modified, self.failure = [], [], [], None


class Pattern:
    """An imperative rewrite rule rooted at ops named `root` (None: any op)."""

    name: str = ""
    root: str | None = None
    benefit: int = 1

    def match_and_rewrite(self, op: Operation, rw: Rewriter) -> bool:
        """Rewrites through `rw` and returns True, or returns rw.fail(reason)."""
        raise NotImplementedError


def is_trivially_dead(op: Operation) -> bool:
    return (op.has(Trait.PURE) and not op.has(Trait.TERMINATOR)
            and all(not r.uses for r in op.results))


class GreedyDriver:
    """Applies patterns with a worklist until nothing changes (or the limit is reached)."""

    def __init__(self, patterns: Iterable[Pattern], log: RewriteLog | None = None,
                 max_iterations: int = 10, remove_dead: bool = True, record_misses: bool = True):
        self.by_root: dict[str | None, list[Pattern]] = {}
        for p in sorted(patterns, key=lambda p: -p.benefit):
            self.by_root.setdefault(p.root, []).append(p)
        self.log = log or RewriteLog()
        self.max_iterations = max_iterations
        self.remove_dead = remove_dead
        self.record_misses = record_misses

    def run(self, program: Program) -> bool:
        """True if anything changed."""
        changed_any = False
        for _ in range(self.max_iterations):
            if not self._sweep(program):
                return changed_any
            changed_any = True
        recent = ", ".join(dict.fromkeys(r.rule for r in self.log.rewrites[-10:]))
        raise PassError(f"pattern rewriting did not converge in {self.max_iterations} iterations "
                        f"(rules still firing: {recent})")

    def _patterns_for(self, op: Operation) -> list[Pattern]:
        return self.by_root.get(op.name, []) + self.by_root.get(None, [])

    def _sweep(self, program: Program) -> bool:
        worklist = deque(op for op in program.walk() if not op.has(Trait.TERMINATOR))
        queued = set(map(id, worklist))
        erased: set[int] = set()
        changed = False
        budget = 50 * (len(worklist) + 10)
        while worklist:
            op = worklist.popleft()
            queued.discard(id(op))
            if id(op) in erased or op.parent is None:
                continue
            rw = Rewriter(program)
            if self.remove_dead and is_trivially_dead(op):
                operands = [v.op for v in op.operands if isinstance(v, OpResult)]
                rw.erase_op(op)
                self._record("remove-dead", op, rw)
            else:
                if not self._try_patterns(op, rw):
                    continue
                operands = []
            changed = True
            budget -= 1
            if budget < 0:
                raise PassError(f"pattern rewriting kept changing the IR (last rule: {self.log.rewrites[-1].rule}); "
                                "two rules may undo each other")
            erased.update(id(e) for e in rw.erased)
            for new in rw.created + rw.modified + operands + self._affected(rw):
                if id(new) not in queued and new.parent is not None and not new.has(Trait.TERMINATOR):
                    worklist.append(new)
                    queued.add(id(new))
        return changed

    def _affected(self, rw: Rewriter) -> list[Operation]:
        """Users of created ops' results and producers of their operands may match now."""
        out = []
        for op in rw.created:
            for r in op.results:
                out.extend(r.users)
            out.extend(v.op for v in op.operands if isinstance(v, OpResult))
        return out

    def _try_patterns(self, op: Operation, rw: Rewriter) -> bool:
        for pattern in self._patterns_for(op):
            rw.reset()
            rw.set_insertion_point(op)
            if pattern.match_and_rewrite(op, rw):
                self._record(pattern.name, op, rw)
                return True
            if rw.created or rw.erased:
                raise PassError(f"pattern {pattern.name} changed the IR but reported no match")
            if self.record_misses and rw.failure:
                self.log.misses.append(RuleMiss(pattern.name, op.uid, op.name, rw.failure))
        return False

    def _record(self, rule: str, op: Operation, rw: Rewriter) -> None:
        self.log.rewrites.append(RewriteRecord(rule, op.uid, op.name, [o.uid for o in rw.created],
                                               [o.uid for o in rw.erased]))


def apply_patterns(program: Program, patterns: Iterable[Pattern], log: RewriteLog | None = None,
                   **options) -> bool:
    """Runs the greedy driver; True if the program changed."""
    return GreedyDriver(patterns, log, **options).run(program)

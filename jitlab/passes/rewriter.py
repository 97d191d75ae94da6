"""Pattern rewriting: the Rewriter (the single choke point for IR changes), patterns,
and the greedy worklist driver that applies them to a fixpoint.

Because every change goes through the Rewriter, the driver knows exactly which ops a
rewrite created, erased and modified; that feeds its worklist and the report's rewrite
records, from which the explorer answers "which rule produced this op".
"""

from __future__ import annotations

import itertools
import weakref
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


_NAME_COUNTERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def fresh_name(program: Program) -> str:
    """A value name never used before in `program`, so before/after diffs never show a
    new value under the name of an erased one."""
    counter = _NAME_COUNTERS.get(program)
    if counter is None:
        values = list(program.inputs)
        for op in program.walk():
            values += op.results + [a for region in op.regions for block in region.blocks for a in block.args]
        used = [int(v.name) for v in values if v.name and v.name.isdigit()]
        counter = _NAME_COUNTERS[program] = itertools.count(max(used, default=-1) + 1)
    return str(next(counter))


class Rewriter:
    """Creates, replaces and erases ops, keeping a list of each kind of change.

    A value created to replace an op's result takes that result's printed name; other
    new values get fresh names."""

    def __init__(self, program: Program):
        self.program = program
        self.anchor: Operation | None = None
        self.created: list[Operation] = []
        self.erased: list[Operation] = []
        self.modified: list[Operation] = []
        self.released: list[Operation] = []     # producers whose results lost a use: may be dead now
        self.failure: str | None = None

    # -- insertion ----------------------------------------------------------------
    def set_insertion_point(self, op: Operation) -> None:
        """New ops go right before `op`."""
        self.anchor = op

    def create(self, name: str, operands: Sequence[Value] = (), attrs: dict[str, Any] | None = None,
               result_types: Sequence[TensorType] | None = None, regions: Sequence[Region] = ()) -> Operation:
        """Builds op `name` (result types inferred unless given) at the insertion point."""
        if self.anchor is None:
            raise PassError("the rewriter has no insertion point")
        opdef = get_opdef(name)
        attrs = normalize_attrs(name, opdef.attrs, dict(attrs or {}))
        if result_types is None:
            result_types = infer_types(opdef, [v.type for v in operands], attrs, self.program.constraints)
        else:
            check_operand_count(opdef, len(operands))
        return self.insert(Operation(name, operands, result_types, attrs, regions, loc=self.anchor.loc))

    def op(self, name: str, *operands: Value, **attrs: Any) -> Value:
        """Shorthand for a single-result op."""
        return self.create(name, operands, attrs).result

    def insert(self, op: Operation) -> Operation:
        """Inserts an op built elsewhere (e.g. a clone) at the insertion point."""
        if self.anchor is None:
            raise PassError("the rewriter has no insertion point")
        self.anchor.parent.insert_before(self.anchor, op)
        self.created.append(op)
        for r in op.results:
            r.name = fresh_name(self.program)
        return op

    # -- changes --------------------------------------------------------------------
    def replace_op(self, op: Operation, new_values: Sequence[Value]) -> None:
        """Replaces every use of op's results by `new_values`, then erases op."""
        if len(new_values) != len(op.results):
            raise PassError(f"replacing {op.name}: {len(op.results)} results, {len(new_values)} replacements")
        for old, new in zip(op.results, new_values):
            if old.type != new.type:
                raise PassError(f"replacing {op.name}: result type {old.type} != replacement type {new.type}")
        for old, new in zip(op.results, new_values):
            if old.name is not None and isinstance(new, OpResult) and any(new.op is c for c in self.created):
                new.name = old.name
            self.replace_uses(old, new)
        self.erase_op(op)

    def replace_uses(self, old: Value, new: Value) -> None:
        self.modified.extend(old.users)
        old.replace_all_uses_with(new)

    def erase_op(self, op: Operation) -> None:
        for inner in op.walk():
            self.erased.append(inner)
            self.released.extend(v.op for v in inner.operands if isinstance(v, OpResult))
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

    @property
    def changed(self) -> bool:
        return bool(self.created or self.erased or self.modified)

    def reset(self) -> None:
        self.created, self.erased, self.modified, self.released, self.failure = [], [], [], [], None


class Pattern:
    """An imperative rewrite rule rooted at ops named `root` (a name, a tuple of names,
    or None for any op)."""

    name: str = ""
    root: str | tuple[str, ...] | None = None
    benefit: int = 1

    def match_and_rewrite(self, op: Operation, rw: Rewriter) -> bool:
        """Rewrites through `rw` and returns True, or returns rw.fail(reason)."""
        raise NotImplementedError

    @property
    def roots(self) -> tuple[str, ...] | None:
        return (self.root,) if isinstance(self.root, str) else self.root

    def __str__(self) -> str:
        return (type(self).__doc__ or self.name).strip().replace("\n    ", " ")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


def is_trivially_dead(op: Operation) -> bool:
    return (op.has(Trait.PURE) and not op.has(Trait.TERMINATOR)
            and all(not r.uses for r in op.results))


class GreedyDriver:
    """Applies patterns with a worklist until nothing changes.

    Order is deterministic: ops are visited in program order, then in the order changes
    queued them; patterns for an op are tried by descending benefit, then in the order
    given. A sweep ends when the worklist is empty; the driver sweeps again until a
    sweep changes nothing. More than `max_iterations` changing sweeps, or more than
    `max_rewrites` rewrites in one sweep, is an error naming the rules still firing."""

    def __init__(self, patterns: Iterable[Pattern], log: RewriteLog | None = None,
                 max_iterations: int = 10, remove_dead: bool = True, record_misses: bool = True,
                 max_rewrites: int | None = None):
        self.by_root: dict[str | None, list[Pattern]] = {}
        for p in sorted(patterns, key=lambda p: -p.benefit):
            for root in p.roots or (None,):
                self.by_root.setdefault(root, []).append(p)
        self.log = log if log is not None else RewriteLog()
        self.max_iterations = max_iterations
        self.max_rewrites = max_rewrites
        self.remove_dead = remove_dead
        self.record_misses = record_misses
        self._misses: dict[tuple[str, int], RuleMiss] = {}

    def run(self, program: Program) -> bool:
        """True if anything changed."""
        start = len(self.log.rewrites)
        try:
            for _ in range(self.max_iterations):
                if not self._sweep(program):
                    return len(self.log.rewrites) > start
            raise PassError(f"pattern rewriting did not converge in {self.max_iterations} iterations "
                            f"(rules still firing: {self._recent_rules()})")
        finally:
            self.log.misses.extend(self._misses.values())
            self._misses.clear()

    def _recent_rules(self) -> str:
        return ", ".join(dict.fromkeys(r.rule for r in self.log.rewrites[-10:]))

    def _patterns_for(self, op: Operation) -> list[Pattern]:
        specific = self.by_root.get(op.name, [])
        generic = self.by_root.get(None, [])
        if not generic:
            return specific
        return sorted(specific + generic, key=lambda p: -p.benefit)

    def _sweep(self, program: Program) -> bool:
        worklist = deque(op for op in program.walk() if not op.has(Trait.TERMINATOR))
        queued = {id(op) for op in worklist}
        budget = self.max_rewrites if self.max_rewrites is not None else 50 * (len(worklist) + 10)
        rewrites = 0
        while worklist:
            op = worklist.popleft()
            queued.discard(id(op))
            if op.parent is None:
                continue
            rw = self._visit(program, op)
            if rw is None:
                continue
            rewrites += 1
            if rewrites > budget:
                raise PassError(f"pattern rewriting kept changing the IR: more than {budget} rewrites in "
                                f"one sweep (rules firing last: {self._recent_rules()}); "
                                "two rules may undo each other")
            for new in self._affected(rw):
                if id(new) not in queued and new.parent is not None and not new.has(Trait.TERMINATOR):
                    worklist.append(new)
                    queued.add(id(new))
        return rewrites > 0

    def _visit(self, program: Program, op: Operation) -> Rewriter | None:
        """Rewrites `op` (by a pattern or as dead code); the rewriter if anything changed."""
        rw = Rewriter(program)
        if self.remove_dead and is_trivially_dead(op):
            rw.erase_op(op)
            self._record("remove-dead", op, rw)
            return rw
        return rw if self._try_patterns(op, rw) else None

    @staticmethod
    def _affected(rw: Rewriter) -> list[Operation]:
        """Ops that may match now: what changed, and the neighbours of what was created."""
        out = rw.created + rw.modified + rw.released
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
                self._misses.pop((pattern.name, op.uid), None)
                self._record(pattern.name, op, rw)
                return True
            if rw.changed:
                raise PassError(f"pattern {pattern.name} changed the IR at {op.name} but reported no match")
            if self.record_misses and rw.failure:
                self._misses[(pattern.name, op.uid)] = RuleMiss(rule=pattern.name, op=op.uid, op_name=op.name,
                                                                  reason=rw.failure)
        return False

    def _record(self, rule: str, op: Operation, rw: Rewriter) -> None:
        created = {id(o) for o in rw.created}
        erased = {id(o) for o in rw.erased}
        modified = [o.uid for o in dict.fromkeys(rw.modified)
                    if id(o) not in created and id(o) not in erased and o.parent is not None]
        kept = [o.uid for o in rw.created if id(o) not in erased]
        self.log.rewrites.append(RewriteRecord(rule=rule, root=op.uid, root_name=op.name, created=kept,
                                               erased=[o.uid for o in rw.erased], modified=modified))


def apply_patterns(program: Program, patterns: Iterable[Pattern], log: RewriteLog | None = None,
                   **options) -> bool:
    """Runs the greedy driver; True if the program changed."""
    return GreedyDriver(patterns, log, **options).run(program)

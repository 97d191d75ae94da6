"""Pattern rewriting: the Rewriter (the single choke point for IR changes), patterns,
and the greedy worklist driver that applies them to a fixpoint.

Because every change goes through the Rewriter, the driver knows exactly which ops a
rewrite created, erased and modified; that feeds its worklist and the report's rewrite
records, from which the explorer answers "which rule produced this op".
"""

from __future__ import annotations

import bisect
import contextvars
import itertools
import os
import sys
import weakref
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import PassError
from ..ir.attributes import normalize_attrs
from ..ir.builder import check_operand_count, infer_types
from ..ir.core import Block, Operation, OpResult, Region, Value
from ..ir.opdef import Trait, get_opdef
from ..ir.printer import op_line
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

# Whether rewrite records carry the IR lines of what they changed (the explorer's stepper): the
# pass manager turns it off where it keeps no snapshots (dry runs), which no explorer reads.
RECORD_LINES: contextvars.ContextVar[bool] = contextvars.ContextVar("jitlab_rewrite_lines", default=True)


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
    new values get fresh names. Moved ops keep their uids and names."""

    def __init__(self, program: Program):
        self.program = program
        self.anchor: Operation | None = None
        self.created: list[Operation] = []
        self.erased: list[Operation] = []
        self.modified: list[Operation] = []
        self.moved: list[Operation] = []
        self.released: list[Operation] = []     # producers whose results lost a use: may be dead now
        self.failure: str | None = None
        self.before: dict[int, str] = {}         # by id: the line of each op erased or changed, before it was

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
        for user in old.users:
            self._note(user)
        self.modified.extend(old.users)
        old.replace_all_uses_with(new)

    def erase_op(self, op: Operation) -> None:
        self._note(op)
        for inner in op.walk():
            self.erased.append(inner)
            self.released.extend(v.op for v in inner.operands if isinstance(v, OpResult))
        op.erase()

    def set_operand(self, op: Operation, index: int, value: Value) -> None:
        self._note(op)
        op.set_operand(index, value)
        self.modified.append(op)

    def add_operands(self, op: Operation, values: Sequence[Value]) -> None:
        """Appends operands to `op` (a region op's new captures)."""
        op.set_operands([*op.operands, *values])
        self.modified.append(op)

    def set_attr(self, op: Operation, key: str, value: Any) -> None:
        self._note(op)
        attrs = dict(op.attrs)
        attrs[key] = value
        op.attrs = normalize_attrs(op.name, op.opdef.attrs, attrs)
        self.modified.append(op)

    # -- moves ----------------------------------------------------------------------
    def move_before(self, op: Operation, anchor: Operation) -> None:
        """Moves `op` right before `anchor`, in anchor's block."""
        op.detach()
        anchor.parent.insert_before(anchor, op)
        self.moved.append(op)

    def move_to_end(self, op: Operation, block: Block) -> None:
        op.detach()
        block.append(op)
        self.moved.append(op)

    def wrap_ops(self, ops: Sequence[Operation], name: str, attrs: dict[str, Any], inputs: Sequence[Value],
                 inlined: Sequence[Value] = (), terminator: str = "jit.yield") -> Operation:
        """Moves `ops` (in block order, all in one block) into the one-block region of a new op `name`
        placed after the last of them. The new op takes `inputs` as operands, read inside as its block's
        arguments; the producers of `inlined` (splat constants) are cloned inside instead. The values used
        outside become its results, in order and under their names, which `terminator` yields."""
        members = {id(op) for op in ops}
        outputs = [r for op in ops for r in op.results if any(id(u) not in members for u in r.users)]
        block = Block([v.type for v in inputs])
        mapping: dict[Value, Value] = dict(zip(inputs, block.args))
        for v in inlined:
            clone = block.append(v.op.clone(fresh_uid=True))
            clone.result.name = None
            self.created.append(clone)
            mapping[v] = clone.result
        wrapper = Operation(name, inputs, [v.type for v in outputs], attrs, [Region([block])], loc=ops[-1].loc)
        ops[-1].parent.insert_after(ops[-1], wrapper)
        self.created.append(wrapper)
        for op in ops:
            self.move_to_end(op, block)
            for i, v in enumerate(op.operands):
                if v in mapping:
                    op.set_operand(i, mapping[v])
        for old, new in zip(outputs, wrapper.results):
            for use in list(old.uses):
                if id(use.op) not in members:
                    self.set_operand(use.op, use.index, new)
            new.name, old.name = old.name, None
        self.created.append(block.append(Operation(terminator, outputs)))
        return wrapper

    def _lines_before(self, root: Operation, created: set[int]) -> list[str]:
        """The lines noted before the changes, the root's first; none of ops this rewrite made."""
        first = [self.before[id(root)]] if id(root) in self.before else []
        return first + [text for key, text in self.before.items() if key != id(root) and key not in created]

    def _note(self, op: Operation) -> None:
        """Keeps op's line as it is before its first change in this rewrite."""
        if id(op) not in self.before and not op.has(Trait.TERMINATOR) and RECORD_LINES.get():
            self.before[id(op)] = op_line(op)

    def fail(self, reason: str) -> bool:
        """Records why a pattern did not apply; returns False for `return rw.fail(...)`."""
        self.failure = reason
        return False

    @property
    def changed(self) -> bool:
        return bool(self.created or self.erased or self.modified or self.moved)

    def reset(self) -> None:
        self.created, self.erased, self.modified, self.moved, self.released = [], [], [], [], []
        self.failure = None
        self.before = {}

    def record(self, rule: str, root: Operation, source: str | None = None) -> RewriteRecord:
        """The changes made since the last reset, as one application of `rule` at `root`, defined at
        `source` ("file:line"; by default where this is called from)."""
        created = {id(o) for o in self.created}
        erased = {id(o) for o in self.erased}
        moved = [o.uid for o in dict.fromkeys(self.moved) if id(o) not in created and id(o) not in erased]
        counted = created | erased | {id(o) for o in self.moved}
        modified = [o.uid for o in dict.fromkeys(self.modified) if id(o) not in counted and o.parent is not None]
        made = [o for o in self.created if id(o) not in erased]
        changed = [o for o in dict.fromkeys(self.modified) if id(o) not in counted and o.parent is not None]
        return RewriteRecord(rule=rule, root=root.uid, root_name=root.name, created=[o.uid for o in made],
                             erased=[o.uid for o in self.erased], modified=modified, moved=moved,
                             source=source if source is not None else caller(),
                             before=self._lines_before(root, created),
                             after=[op_line(o) for o in made + changed if not o.has(Trait.TERMINATOR)]
                             if RECORD_LINES.get() else [])


def caller(depth: int = 1) -> str:
    """"file:line" of the code `depth` frames above the caller, the path relative to jitlab's folder."""
    frame = sys._getframe(depth + 1)
    return f"{relative_path(frame.f_code.co_filename)}:{frame.f_lineno}"


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def relative_path(path: str) -> str:
    """`path` from jitlab's folder's parent (jitlab/passes/x.py), else as it is."""
    root = os.path.dirname(_PACKAGE)
    return os.path.relpath(path, root) if path.startswith(_PACKAGE) else path


def pattern_source(pattern: Pattern) -> str:
    """Where a pattern is defined: a declarative rule where it was built, a Pattern class its match_and_rewrite."""
    where = getattr(pattern, "defined_at", None)
    if where:
        return where
    code = type(pattern).match_and_rewrite.__code__
    return f"{relative_path(code.co_filename)}:{code.co_firstlineno}"


def reorder(block: Block, ops: Sequence[Operation], program: Program, rule: str, log: RewriteLog) -> None:
    """Puts `ops` (every op of `block` but its terminator) in this order, moving only the ops off a
    longest run already in order; one rewrite record of `rule` per op moved, rooted at it."""
    source = caller()
    if len(ops) != len(block) - (block.terminator is not None):
        raise PassError(f"reordering a block of {len(block)} ops: the order names {len(ops)}")
    position = {id(op): i for i, op in enumerate(block.ops)}
    kept = _longest_increasing([position[id(op)] for op in ops])
    anchor, moves = block.terminator, []
    for i in reversed(range(len(ops))):
        if i in kept:
            anchor = ops[i]
        else:
            moves.append((ops[i], anchor))
    rw = Rewriter(program)
    for op, anchor in reversed(moves):
        rw.reset()
        if anchor is None:
            rw.move_to_end(op, block)
        else:
            rw.move_before(op, anchor)
        log.rewrites.append(rw.record(rule, op, source))


def _longest_increasing(seq: Sequence[int]) -> set[int]:
    """Indices of one longest strictly increasing subsequence of `seq` (patience sorting)."""
    tails: list[int] = []                   # tails[k]: index of the smallest end of a run of length k + 1
    ends: list[int] = []                    # seq[tails[k]]
    back: list[int] = [-1] * len(seq)
    for i, x in enumerate(seq):
        k = bisect.bisect_left(ends, x)
        back[i] = tails[k - 1] if k else -1
        if k == len(tails):
            tails.append(i)
            ends.append(x)
        else:
            tails[k], ends[k] = i, x
    out, i = set(), tails[-1] if tails else -1
    while i >= 0:
        out.add(i)
        i = back[i]
    return out


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


DEAD_SOURCE = f"{relative_path(is_trivially_dead.__code__.co_filename)}:{is_trivially_dead.__code__.co_firstlineno}"


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
        self._sources: dict[int, str] = {}

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
            self._record("remove-dead", op, rw, DEAD_SOURCE)
            return rw
        return rw if self._try_patterns(op, rw) else None

    @staticmethod
    def _affected(rw: Rewriter) -> list[Operation]:
        """Ops that may match now: what changed, and the neighbours of what was created."""
        out = rw.created + rw.modified + rw.moved + rw.released
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
                self._record(pattern.name, op, rw, self._source(pattern))
                return True
            if rw.changed:
                raise PassError(f"pattern {pattern.name} changed the IR at {op.name} but reported no match")
            if self.record_misses and rw.failure:
                self._misses[(pattern.name, op.uid)] = RuleMiss(rule=pattern.name, op=op.uid, op_name=op.name,
                                                                  reason=rw.failure)
        return False

    def _source(self, pattern: Pattern) -> str:
        if id(pattern) not in self._sources:
            self._sources[id(pattern)] = pattern_source(pattern)
        return self._sources[id(pattern)]

    def _record(self, rule: str, op: Operation, rw: Rewriter, source: str) -> None:
        self.log.rewrites.append(rw.record(rule, op, source))


def apply_patterns(program: Program, patterns: Iterable[Pattern], log: RewriteLog | None = None,
                   **options) -> bool:
    """Runs the greedy driver; True if the program changed."""
    return GreedyDriver(patterns, log, **options).run(program)

"""Loop iterations as scopes: an unrolled Python loop reads as one node per iteration.

Tracing runs a loop's body once per iteration, so its ops repeat. To give each
iteration a scope (`fn / for L12 / #3`) the tracer has to know when an iteration
starts, which Python 3.11 does not report. It is read from the bytecode instead: a
loop is the range of a backward jump; within one iteration the frame's instruction
offset only grows (an inner loop counts as the offset it starts at), so an op recorded
at a smaller offset, or by a new call from the same instruction, starts the next
iteration. Iterations that record no op are not counted: `#k` is the k-th iteration
that recorded ops.

A `for` loop is told more surely by its target: the names it stores on each step.
A new value bound to them (a new object) is a new iteration, which also separates
the iterations of an outer loop whose body is only an inner loop.
"""

from __future__ import annotations

import dis
from dataclasses import dataclass
from functools import lru_cache
from types import CodeType, FrameType


@dataclass(frozen=True)
class Loop:
    """A loop in a code object: the bytecode range [start, end] of its body and the line it is written on."""

    start: int
    end: int
    line: int
    kind: str                   # "for" or "while"
    targets: tuple[str, ...]    # the names a for loop binds each step; empty for while loops

    @property
    def label(self) -> str:
        return f"{self.kind} L{self.line}"


@lru_cache(maxsize=1024)
def loops_of(code: CodeType) -> tuple[Loop, ...]:
    """The loops of `code`, outer before inner (by start, longer first)."""
    instructions = list(dis.get_instructions(code))
    at = {ins.offset: ins for ins in instructions}
    ends: dict[int, tuple[int, int | None]] = {}
    for ins in instructions:
        if "BACKWARD" in ins.opname and isinstance(ins.argval, int) and ins.argval <= ins.offset:
            end, line = ends.get(ins.argval, (ins.offset, ins.positions.lineno if ins.positions else None))
            ends[ins.argval] = (max(end, ins.offset), line)
    loops = []
    for start, (end, line) in ends.items():
        head = at.get(start)
        is_for = head is not None and head.opname == "FOR_ITER"
        if is_for or line is None:
            line = head.positions.lineno if head is not None and head.positions else code.co_firstlineno
        targets = _targets(instructions, instructions.index(head)) if is_for else ()
        loops.append(Loop(start, end, line, "for" if is_for else "while", targets))
    return tuple(sorted(loops, key=lambda loop: (loop.start, -loop.end)))


_STORES = ("STORE_FAST", "STORE_NAME", "STORE_DEREF", "STORE_GLOBAL")


def _targets(instructions: list, head: int) -> tuple[str, ...]:
    """The names the instructions after a FOR_ITER store the step's value in (`for i, (a, b) in ...`)."""
    names, pending = [], 1
    for ins in instructions[head + 1:]:
        if ins.opname == "UNPACK_SEQUENCE":
            pending += ins.arg - 1
        elif ins.opname in _STORES:
            names.append(ins.argval)
            pending -= 1
        else:
            return ()
        if pending == 0:
            return tuple(names)
    return ()


@dataclass
class _Iteration:
    frame: FrameType
    position: int               # the offset of the last op recorded in it, inner loops collapsed to their start
    caller: object              # what the instruction at `position` called when it recorded its op
    bound: tuple                # the values a for loop's targets held
    count: int = 0


class LoopTracker:
    """Counts the iterations of the loops that tracing runs, from the offsets that ops are recorded at."""

    def __init__(self):
        # by (code, loop start): a code's loops bound the table; a new frame of the code starts afresh
        self._state: dict[tuple[CodeType, int], _Iteration] = {}

    def scope(self, frame: FrameType, callee: object) -> tuple[str, ...]:
        """The loop scopes of the op `frame` records now (through `callee`, the frame it is calling)."""
        offset, code = frame.f_lasti, frame.f_code
        loops = loops_of(code)
        enclosing = [loop for loop in loops if loop.start <= offset <= loop.end]
        if not enclosing:
            return ()
        names = frame.f_locals if any(loop.targets for loop in enclosing) else {}
        path: list[str] = []
        for depth, loop in enumerate(enclosing):
            inner = enclosing[depth + 1] if depth + 1 < len(enclosing) else None
            position = inner.start if inner is not None else offset
            bound = tuple(names.get(name) for name in loop.targets)
            it = self._state.get((code, loop.start))
            if it is None or it.frame is not frame:
                it = self._state[(code, loop.start)] = _Iteration(frame, position, None, bound)
            elif _next_iteration(it, loop, position, callee if inner is None else None, bound):
                it.count += 1
                for nested in loops:
                    if loop.start < nested.start <= loop.end:
                        self._state.pop((code, nested.start), None)
            it.position, it.caller, it.bound = position, callee if inner is None else None, bound
            path += [loop.label, f"#{it.count}"]
        return tuple(path)


def _next_iteration(it: _Iteration, loop: Loop, position: int, callee: object, bound: tuple) -> bool:
    if loop.targets:
        return any(a is not b for a, b in zip(bound, it.bound))
    return position < it.position or position == it.position and callee is not None and callee is not it.caller

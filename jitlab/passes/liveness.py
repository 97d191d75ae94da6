"""Buffers and their lifetimes under an execution order.

A step is one top-level op; a `jit.group` is one step whose operands and results are its
inputs and outputs (the values inside it are its kernel's own). Every value needs a
buffer, except that a view (an op with Trait.VIEW) shares the buffer of its first operand
and extends its life, and an elementwise op (or a group of writes, into the array it
writes: dialects/np/writes.py) may write its result in place into an operand whose buffer
dies at that op. Inputs, weights and constants live for the whole program and
are never freed; outputs live from their producer to the end (the caller keeps them);
temps live from their producer to the last use of any value sharing their buffer.

`StepGraph` is built once per program and shape bindings; `StepGraph.analyze(order)` is
linear in the graph's size, so the scheduler can afford to call it for every order.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..dialects.mem import is_mem_op
from ..dialects.np.writes import in_place_operand
from ..ir.core import Operation, Value
from ..ir.opdef import Trait
from ..ir.program import Program
from ..ir.shapes import evaluate_shape
from ..ir.types import TensorType
from .donation import in_place_pairs

if TYPE_CHECKING:
    from .manager import PassContext

FIXED = ("input", "weight", "constant")


def nbytes(t: TensorType, bindings: Mapping[str, int]) -> int:
    """Bytes of a value of type `t` under `bindings`, in Python ints (never overflows)."""
    # Call-time bindings never make a dim negative (the signature check refuses them), but
    # sizes assumed at compile time can (S-100 with S=64): such a value is taken as empty.
    return math.prod(max(d, 0) for d in evaluate_shape(t.shape, bindings)) * t.dtype.itemsize


def round_up(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment


def compute_steps(program: Program) -> list[Operation]:
    """The program's steps in block order: top-level ops other than the return and mem ops."""
    return [op for op in program.body.ops if not op.has(Trait.TERMINATOR) and not is_mem_op(op)]


def _base_kind(v: Value) -> str:
    op = getattr(v, "op", None)
    if op is None:
        return "input"
    if op.name == "np.weight":
        return "weight"
    if op.has(Trait.CONSTANT):
        return "constant"
    return "view" if op.has(Trait.VIEW) else "temp"


def _in_place_operands(op: Operation) -> range | list[int] | None:
    """Operand positions whose buffer `op`'s result may take when it dies there: any operand of
    an elementwise op; the array a group of writes writes into (dialects/np/writes.py)."""
    if op.has(Trait.ELEMENTWISE) and not op.regions and len(op.results) == 1:
        return range(len(op.operands))
    j = in_place_operand(op)
    return None if j is None else [j]


class StepGraph:
    """The data dependences between a program's steps, and every value's size and buffer owner."""

    def __init__(self, program: Program, bindings: Mapping[str, int] | None = None, donate: Sequence[str] = (),
                 ordered: bool = True):
        """`donate`: donated input names; outputs written straight into their arrays (passes/donation.py)
        take no memory of their own. `ordered=False` for the schedule pass, which orders their readers first."""
        self.program = program
        self.bindings = dict(bindings or {})
        self.ops = compute_steps(program)
        self.values: list[Value] = list(program.inputs) + [r for op in self.ops for r in op.results]
        index = {v: i for i, v in enumerate(self.values)}
        self.bytes = [nbytes(v.type, self.bindings) for v in self.values]
        self.kind = [_base_kind(v) for v in self.values]
        self.producer = [-1] * len(program.inputs) + [n for n, op in enumerate(self.ops) for _ in op.results]
        self.operands = [[index[v] for v in op.operands] for op in self.ops]
        self.results = [[index[r] for r in op.results] for op in self.ops]
        self.users: list[list[int]] = [[] for _ in self.values]      # steps using each value, each once
        for n, operands in enumerate(self.operands):
            for v in dict.fromkeys(operands):
                self.users[v].append(n)
        self.outputs = {index[v] for v in program.outputs}
        self._find_roots()
        self.in_place_from = [_in_place_operands(op) for op in self.ops]
        # output value -> donated input value whose array it is written into
        self.donated = {index[program.outputs[d.output]]: d.input
                        for d in (in_place_pairs(program, donate, ordered) if donate else [])}

    def _find_roots(self) -> None:
        """Each value's buffer owner (views follow their first operand) and each owner's facts."""
        self.root = list(range(len(self.values)))
        for n, op in enumerate(self.ops):
            if op.has(Trait.VIEW):
                for r in self.results[n]:
                    self.root[r] = self.root[self.operands[n][0]]
        aliases: dict[int, list[int]] = {}
        for v, r in enumerate(self.root):
            aliases.setdefault(r, []).append(v)
        self.root_kind: dict[int, str] = {}
        self.root_users: dict[int, list[int]] = {}
        for r, members in aliases.items():
            kind = self.kind[r]
            if kind not in FIXED and any(v in self.outputs for v in members):
                kind = "output"
            self.root_kind[r] = kind
            self.root_users[r] = [u for v in members for u in self.users[v]]

    @property
    def num_steps(self) -> int:
        return len(self.ops)

    def program_order(self) -> list[int]:
        return list(range(len(self.ops)))

    def analyze(self, order: Sequence[int] | None = None, in_place: bool = True) -> Lifetimes:
        """Buffer lifetimes when the steps run in `order` (node indices; default: block order)."""
        order = self.program_order() if order is None else list(order)
        pos = [0] * len(self.ops)
        for s, n in enumerate(order):
            pos[n] = s
        end = max(len(order) - 1, 0)
        first, last = {}, {}
        for r, kind in self.root_kind.items():
            born = pos[self.producer[r]] if kind not in FIXED else 0
            first[r] = born
            last[r] = end if kind in FIXED or kind == "output" else max(
                (pos[u] for u in self.root_users[r]), default=born)
        life = Lifetimes(self, order, first, last)
        if in_place:
            life.merge_in_place()
        life.merge_donated()
        return life


@dataclass
class InPlace:
    """At `step`, the result `result` is written into the buffer of operand `source` (value indices)."""

    step: int
    source: int
    result: int


class Lifetimes:
    """First and last step of every buffer under one order, after in-place merging."""

    def __init__(self, graph: StepGraph, order: list[int], first: dict[int, int], last: dict[int, int]):
        self.graph, self.order = graph, order
        self.first, self.last = first, last
        self.kinds = dict(graph.root_kind)       # an in-place output turns its source's buffer into an output
        self.owner: dict[int, int] = {}          # root merged in place -> the root whose buffer it took
        self.in_place: list[InPlace] = []

    def buffer_of(self, value: int) -> int:
        """The root owning the memory `value` lives in (following views and in-place merges)."""
        r = self.graph.root[value]
        while r in self.owner:
            r = self.owner[r]
        return r

    def merge_in_place(self) -> None:
        g = self.graph
        for s, n in enumerate(self.order):
            if g.in_place_from[n] is None:
                continue
            (res,) = g.results[n]
            if g.root_kind[res] not in ("temp", "output"):
                continue
            source = self._in_place_source(s, n, res)
            if source is not None:
                target = self.buffer_of(source)
                self.owner[res] = target
                self.last[target] = self.last.pop(res)
                self.kinds[target] = self.kinds.pop(res)
                del self.first[res]
                self.in_place.append(InPlace(s, source, res))

    def merge_donated(self) -> None:
        """Outputs written into donated inputs' arrays own no buffer: they live in the input's."""
        for out, inp in self.graph.donated.items():
            if self.graph.root[out] == out and self.kinds.get(out) == "output":
                self.owner[out] = self.graph.root[inp]
                del self.first[out], self.last[out], self.kinds[out]

    def _in_place_source(self, step: int, n: int, res: int) -> int | None:
        """The first operand whose buffer dies at this step and exactly fits the result, if any."""
        g = self.graph
        res_type = g.values[res].type
        whole = g.ops[n].has(Trait.ELEMENTWISE)      # a group of writes shares its buffer with one operand only
        for v in (g.operands[n][i] for i in g.in_place_from[n]):
            buf = self.buffer_of(v)
            if (self.kinds[buf] == "temp" and self.last[buf] == step and g.values[v].type == res_type
                    and g.bytes[buf] == g.bytes[res]
                    and all((g.values[w].type == res_type) if whole else w == v
                            for w in g.operands[n] if self.buffer_of(w) == buf)):
                return v
        return None

    @property
    def buffers(self) -> list[int]:
        """Roots that own memory after in-place merging, in order of value index."""
        return sorted(self.first)

    def kind(self, buf: int) -> str:
        return self.kinds[buf]

    def live_bytes(self, size=None) -> list[int]:
        """Bytes live at each step (inputs, weights and constants included); `size(buf)` overrides sizes."""
        size = size or self.graph.bytes.__getitem__
        n = len(self.order)
        delta = [0] * (n + 1)
        for buf in self.first:
            if self.first[buf] >= n:       # a program with no steps has no live sets to count
                continue
            delta[self.first[buf]] += size(buf)
            delta[min(self.last[buf] + 1, n)] -= size(buf)
        live, total = [], 0
        for d in delta[:-1]:
            total += d
            live.append(total)
        return live

    def lower_bound(self) -> int:
        """The largest live set over the order: no plan for this order can need less."""
        live = self.live_bytes()
        return max(live) if live else sum(self.graph.bytes[b] for b in self.first if self.kind(b) in FIXED)


def donated_in_place(ctx: PassContext) -> tuple[str, ...]:
    """The donated inputs whose arrays outputs may be written into: none where the target's runner copies."""
    return ctx.donate if ctx.donate and ctx.backend().donates_in_place else ()

"""The `schedule` pass: the execution order of a program's top-level ops.

Three orders, as in MindSpore: BFS (Kahn's algorithm, first ready first), DFS (the op
made ready last runs first, so a chain runs to its end before a sibling starts) and a
memory-aware order (among the ready ops, the one that frees the most and allocates the
least, looking one op ahead). Weights and constants are placed right before their first
user in every order: they are live for the whole program anyway. The memory-aware order
keeps whichever of its candidate orders has the lowest peak, so it is never worse than
BFS or DFS; the report records the order used and the peak of every order compared.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..dialects.mem import is_mem_op
from ..errors import PassError
from ..ir.opdef import Trait
from ..ir.program import Program
from ..report import ScheduleRecord
from .liveness import FIXED, StepGraph, donated_in_place
from .manager import Pass, PassContext, register_pass
from .rewriter import reorder

DEFAULT_SYMBOL_VALUE = 64   # size assumed for a symbolic dim when comparing orders at compile time


def hint_bindings(program: Program, given: Mapping[str, int] | None = None) -> dict[str, int]:
    """Values for every symbol of `program`: those `given`, the rest DEFAULT_SYMBOL_VALUE."""
    symbols = {s for v in program.inputs for s in v.type.symbols}
    symbols |= {s for op in program.walk() for r in op.results for s in r.type.symbols}
    given = dict(given or {})
    return {s: given.get(s, DEFAULT_SYMBOL_VALUE) for s in sorted(symbols)}


@dataclass
class Dependences:
    """Who must run before whom; `lazy` steps (weights, constants) run right before their first user."""

    preds: list[list[int]]
    succs: list[list[int]]
    lazy: list[bool]

    @classmethod
    def of(cls, g: StepGraph) -> Dependences:
        preds: list[set[int]] = [{g.producer[v] for v in operands if g.producer[v] >= 0} for operands in g.operands]
        impure = [n for n, op in enumerate(g.ops) if not op.has(Trait.PURE)]
        for a, b in itertools.pairwise(impure):
            preds[b].add(a)
        _order_donated_readers(g, preds)
        succs: list[list[int]] = [[] for _ in g.ops]
        for n, ps in enumerate(preds):
            for p in sorted(ps):
                succs[p].append(n)
        lazy = [not preds[n] and op.has(Trait.PURE) and all(g.kind[r] in FIXED for r in g.results[n])
                for n, op in enumerate(g.ops)]
        return cls([sorted(p) for p in preds], succs, lazy)


def _order_donated_readers(g: StepGraph, preds: list[set[int]]) -> None:
    """A step writing an output into a donated input's array runs after the input's other readers
    (write after read), unless one of them needs its result: that output is then copied in instead."""
    for out, inp in g.donated.items():
        writer = g.producer[out]
        after = _downstream(preds, writer)
        for reader in g.root_users[g.root[inp]]:
            if reader != writer and reader not in after:
                preds[writer].add(reader)


def _downstream(preds: list[set[int]], start: int) -> set[int]:
    """Steps that depend on `start`, directly or through others."""
    succs: dict[int, list[int]] = {}
    for n, ps in enumerate(preds):
        for p in ps:
            succs.setdefault(p, []).append(n)
    seen, stack = set(), [start]
    while stack:
        for n in succs.get(stack.pop(), ()):
            if n not in seen:
                seen.add(n)
                stack.append(n)
    return seen


class Policy:
    """Which ready step runs next; subclasses are the orders."""

    def __init__(self, g: StepGraph, deps: Dependences):
        self.g, self.deps = g, deps

    def push(self, nodes: list[int]) -> None:
        raise NotImplementedError

    def pop(self) -> int:
        raise NotImplementedError

    def on_emit(self, n: int) -> None:
        """Called as each step is placed (lazy ones included)."""


class BFS(Policy):
    def __init__(self, g, deps):
        super().__init__(g, deps)
        self.queue: list[int] = []
        self.head = 0

    def push(self, nodes):
        self.queue.extend(nodes)

    def pop(self):
        self.head += 1
        return self.queue[self.head - 1]

    def __bool__(self):
        return self.head < len(self.queue)


class DFS(Policy):
    def __init__(self, g, deps):
        super().__init__(g, deps)
        self.stack: list[int] = []

    def push(self, nodes):
        self.stack.extend(reversed(nodes))

    def pop(self):
        return self.stack.pop()

    def __bool__(self):
        return bool(self.stack)


def topological_order(g: StepGraph, deps: Dependences, policy: Policy) -> list[int]:
    """Kahn's algorithm over the non-lazy steps, asking `policy` for the next ready one."""
    indeg = [sum(not deps.lazy[p] for p in ps) for ps in deps.preds]
    order: list[int] = []
    placed = [False] * len(g.ops)
    policy.push([n for n in range(len(g.ops)) if indeg[n] == 0 and not deps.lazy[n]])
    while policy:
        n = policy.pop()
        for m in [p for p in deps.preds[n] if not placed[p]] + [n]:
            placed[m] = True
            order.append(m)
            policy.on_emit(m)
        policy.push([s for s in deps.succs[n] if _release(indeg, s)])
    order.extend(n for n in range(len(g.ops)) if not placed[n])
    return order


def _release(indeg: list[int], s: int) -> bool:
    indeg[s] -= 1
    return indeg[s] == 0


class MemoryGreedy(Policy):
    """Among ready steps, the one with the smallest net growth of live bytes (freed minus
    allocated), counting the best step it makes ready when `lookahead` is on; ties go to the
    step made ready last (depth first) and then to the one allocating least."""

    def __init__(self, g, deps, lookahead: bool = True):
        super().__init__(g, deps)
        self.lookahead = lookahead
        self.ready: list[int] = []
        self.pushed: dict[int, int] = {}
        self.counter = itertools.count()
        self.remaining = {r: len(set(users)) for r, users in g.root_users.items()}
        self.operand_roots = [sorted({g.root[v] for v in ops}) for ops in g.operands]
        self.alloc = [sum(g.bytes[r] for r in g.results[n] if g.root[r] == r and g.kind[r] not in FIXED)
                      for n in range(len(g.ops))]
        self.dead_on_arrival = [sum(g.bytes[r] for r in g.results[n]
                                    if g.root[r] == r and g.root_kind[r] == "temp" and not g.root_users[r])
                                for n in range(len(g.ops))]
        self.indeg = [sum(not deps.lazy[p] for p in ps) for ps in deps.preds]

    def push(self, nodes):
        for n in nodes:
            self.pushed[n] = next(self.counter)
            self.ready.append(n)

    def __bool__(self):
        return bool(self.ready)

    def net(self, n: int) -> int:
        freed = sum(self.g.bytes[b] for b in self.operand_roots[n]
                    if self.g.root_kind[b] == "temp" and self.remaining[b] == 1)
        return self.alloc[n] - freed - self.dead_on_arrival[n]

    def score(self, n: int) -> tuple:
        net = self.net(n)
        if self.lookahead:
            net += min(0, self._best_next(n))
        return net, -self.pushed[n], self.alloc[n]

    def _best_next(self, n: int) -> int:
        """The smallest net growth among the steps that running `n` would make ready."""
        newly = [s for s in self.deps.succs[n] if self.indeg[s] == 1]
        if not newly:
            return 0
        self._count_uses(n, -1)
        best = min(self.net(s) for s in newly)
        self._count_uses(n, +1)
        return best

    def _count_uses(self, n: int, delta: int) -> None:
        for b in self.operand_roots[n]:
            self.remaining[b] += delta

    def pop(self):
        n = min(self.ready, key=self.score)
        self.ready.remove(n)
        return n

    def on_emit(self, n):
        self._count_uses(n, -1)
        if not self.deps.lazy[n]:
            for s in self.deps.succs[n]:
                self.indeg[s] -= 1


POLICIES: dict[str, Callable[[StepGraph, Dependences], Policy]] = {
    "bfs": BFS,
    "dfs": DFS,
    "greedy": lambda g, d: MemoryGreedy(g, d, lookahead=False),
    "greedy-lookahead": MemoryGreedy,
}
MEMORY_CANDIDATES = ("greedy-lookahead", "greedy", "dfs", "bfs")


def compute_order(g: StepGraph, strategy: str, deps: Dependences | None = None) -> list[int]:
    """The order of `g`'s steps under one policy name (see POLICIES)."""
    deps = deps or Dependences.of(g)
    return topological_order(g, deps, POLICIES[strategy](g, deps))


def memory_order(g: StepGraph, deps: Dependences | None = None) -> tuple[list[int], str, dict[str, int]]:
    """The candidate order with the lowest peak, its name, and every candidate's peak."""
    deps = deps or Dependences.of(g)
    peaks, orders = {}, {}
    for name in MEMORY_CANDIDATES:
        orders[name] = compute_order(g, name, deps)
        peaks[name] = g.analyze(orders[name]).lower_bound()
    best = min(MEMORY_CANDIDATES, key=peaks.__getitem__)
    return orders[best], best, peaks


def compare_orders(g: StepGraph) -> tuple[dict[str, list[int]], dict[str, int], str]:
    """Every order the pass offers (and the program's own), their peaks, and the memory order's source."""
    deps = Dependences.of(g)
    orders = {"program": g.program_order(), "bfs": compute_order(g, "bfs", deps),
              "dfs": compute_order(g, "dfs", deps)}
    orders["memory"], source, _ = memory_order(g, deps)
    peaks = {name: g.analyze(order).lower_bound() for name, order in orders.items()}
    return orders, peaks, source


ORDERS = ("bfs", "dfs", "memory")


@register_pass
@dataclass
class Schedule(Pass):
    name = "schedule"
    summary = "Orders the top-level ops (bfs, dfs or memory-aware) and records the peak of each order."

    order: str = "memory"

    def apply(self, program: Program, ctx: PassContext) -> Program:
        if self.order not in ORDERS:
            raise PassError(f"pass schedule: order must be one of {', '.join(ORDERS)}, got {self.order!r}")
        if any(is_mem_op(op) for op in program.body.ops):
            raise PassError("pass schedule must run before plan-memory (the program already has mem ops)")
        bindings = hint_bindings(program, ctx.bindings)
        g = StepGraph(program, bindings, donated_in_place(ctx), ordered=False)
        orders, peaks, source = compare_orders(g)
        chosen = orders[self.order]
        reorder(program.body, [g.ops[n] for n in chosen], program, f"{self.order}-order", ctx.log)
        uids = {name: [g.ops[n].uid for n in order] for name, order in orders.items()}
        timelines = {name: g.analyze(order).live_bytes() for name, order in orders.items()}
        ctx.report.schedule = ScheduleRecord(order=uids[self.order], strategy=self.order, peaks=peaks, orders=uids,
                                             timelines=timelines, bindings=bindings,
                                             source=source if self.order == "memory" else "")
        ctx.log.notes.append(f"schedule: {self.order} order, peak {peaks[self.order]} bytes "
                             + ", ".join(f"({k}: {v})" for k, v in peaks.items() if k != self.order))
        return program

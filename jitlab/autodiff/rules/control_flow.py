"""VJP rules of the `scf` ops: a loop's and a branch's backward pass are themselves scf ops, so the
gradient of a loop compiles once and does not grow with its trip count.

- `scf.if`: an scf.if on the same predicate whose branches run the branches' VJPs.
- `scf.for`: a reverse scf.for over the same iterations, whose body recomputes the forward body
  from the carried values that iteration started with and runs its VJP; the captures' cotangents
  are summed across iterations as carried values of the reverse loop. The carried values come
  from a stacked buffer the forward loop now also fills (one row per iteration, written with
  np.dynamic_update_slice), or, under `recompute_loops` or a trip count known only when the loop
  runs (a buffer needs a static length), from a loop rerun from the start up to that iteration:
  no memory per iteration, trip count squared body runs.
- `scf.while`: refused, as JAX refuses lax.while_loop: its trip count is data.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ...dialects.scf import INDEX, body_block
from ...errors import UnsupportedOp
from ...frontend.control_flow import cond, fori_loop
from ...frontend.tracer import Tracer
from ...ir.attributes import Dense
from ...ir.builder import Builder
from ...ir.core import BlockArgument, Operation, OpResult, Value
from ...ir.opdef import Trait
from ...ir.types import TensorType
from ...passes.activations import backward_location
from ..emit import BackwardContext, zeros
from ..registry import Primal, vjp
from ..transform import backward_seeded

ROW = {"axes": (0,), "sizes": (1,), "index_axes": (0,)}     # one row of a stacked buffer


def _floats(values) -> list[int]:
    return [k for k, v in enumerate(values) if v.dtype.kind == "f"]


def _as_list(gs, n: int) -> list:
    return list(gs) if n != 1 else [gs]


def _recompute_body(ctx: BackwardContext, ops: list[Operation], mapping: dict[Value, Value]) -> list[Operation]:
    """Clones a region's `ops` (its terminator aside) where ctx's builder stands, its arguments read
    from `mapping`; returns the clones. They are marked backward: they run in the backward pass."""
    clones = []
    for inner in ops:
        if inner.has(Trait.TERMINATOR):
            continue
        new = inner.clone(mapping, fresh_uid=True)
        new.loc = backward_location(inner.loc)
        clones.append(ctx.builder.insert(new))
    return clones


def _terminator_values(op: Operation, region: int, mapping: dict[Value, Value]) -> list[Value]:
    return [mapping.get(v, v) for v in body_block(op, region).last_op.operands]


# -- scf.if ---------------------------------------------------------------------------------------
def _branch_vjp(ctx: BackwardContext, op: Operation, wanted: list[int], seeds: list, region: int) -> list[Tracer]:
    """Branch `region` of an scf.if recomputed and differentiated: the cotangents of its `wanted` captures
    given `seeds`, the cotangents of the op's results (a branch of jl.cond)."""
    args = body_block(op, region).args
    mapping = {a: ctx.local(v) for a, v in zip(args, op.operands[1:])}
    ops = _recompute_body(ctx, list(body_block(op, region).ops), mapping)
    ends = dict(zip(op.results, _terminator_values(op, region, mapping)))
    return backward_seeded(ctx, ops, [mapping[args[c]] for c in wanted],
                           [(ends[r], Tracer(ctx.local(g.value), ctx)) for r, g in seeds])


@vjp("scf.if")
def _if(p: Primal, gs):
    """An scf.if on the same predicate; each branch yields the captures' cotangents through its own VJP."""
    captures = p.op.operands[1:]
    wanted = [c for c in _floats(captures) if p.wants[1 + c]]
    seeds = [(r, g if g is not None else zeros(p.ctx, r.shape, r.dtype))
             for r, g in zip(p.op.results, _as_list(gs, len(p.op.results))) if r.dtype.kind == "f"]
    if not wanted or not seeds:
        return [None] * len(p.args)
    outs = cond(p.args[0], *(functools.partial(_branch_vjp, p.ctx, p.op, wanted, seeds, r) for r in (0, 1)))
    grads: list = [None] * len(p.args)
    for c, g in zip(wanted, outs):
        grads[1 + c] = g
    return grads


# -- scf.while ------------------------------------------------------------------------------------
class WhileLoopGradientError(UnsupportedOp):
    """Reverse mode through an scf.while: its trip count is known only when it runs."""


@vjp("scf.while")
def _while(p: Primal, gs):
    where = f" at {p.op.loc.file}:{p.op.loc.line}" if p.op.loc is not None else ""
    raise WhileLoopGradientError(
        f"reverse-mode differentiation does not work for the while loop (scf.while){where}: how many "
        "iterations to save or replay is known only when it runs. Write it as a counted loop "
        "(jl.fori_loop with a bound, jl.scan, or a `for` over range(...)), as JAX asks for lax.scan "
        "instead of lax.while_loop")


# -- scf.for --------------------------------------------------------------------------------------
def _static_int(v: Value) -> int | None:
    """v's value when it is a scalar np.constant."""
    if not isinstance(v, OpResult) or v.op.name != "np.constant" or v.op.attrs["value"].array.size != 1:
        return None
    return int(v.op.attrs["value"].array.reshape(-1)[0])


class _Loop:
    """A forward scf.for as its VJP reads it."""

    def __init__(self, op: Operation):
        self.op, self.n = op, len(op.results)
        self.block = body_block(op)
        self.ops = list(self.block.ops)         # before the VJP adds the saving ops
        self.bounds = [_static_int(v) for v in op.operands[:3]]
        self.inits = list(op.operands[3:3 + self.n])
        self.captures = list(op.operands[3 + self.n:])
        self.carry_args = list(self.block.args[1:1 + self.n])
        self.capture_args = list(self.block.args[1 + self.n:])

    @property
    def trips(self) -> int | None:
        return None if None in self.bounds else len(range(*self.bounds))

    def write_only(self, arg: BlockArgument) -> bool:
        """Whether the body only writes rows into this carry (a scan's stacked outputs): its value on
        entry reaches nothing but itself, so the VJP needs no copy of it."""
        seen, stack = set(), [arg]
        while stack:
            v = stack.pop()
            for use in v.uses:
                if use.op.name == "np.dynamic_update_slice" and use.index == 0:
                    if use.op.result not in seen:
                        seen.add(use.op.result)
                        stack.append(use.op.result)
                elif use.op.name != "scf.yield":
                    return False
        return True


def _zeros_before(op: Operation, t: TensorType) -> Value:
    b = Builder.before_op(op)
    zero = b.create("np.constant", attrs={"value": Dense(np.zeros((), t.dtype))}, loc=op.loc).result
    return b.create("np.broadcast_to", [zero], {"shape": tuple(t.shape)}, loc=op.loc).result


def _slot(b: Builder, i: Value, lo: int, step: int, loc) -> Value:
    """The iteration number of induction value i: (i - lo) // step."""
    def const(x: int) -> Value:
        return b.create("np.constant", attrs={"value": Dense(np.asarray(x, INDEX))}, loc=loc).result
    if lo != 0:
        i = b.create("np.sub", [i, const(lo)], loc=loc).result
    if step != 1:
        i = b.create("np.floordiv", [i, const(step)], loc=loc).result
    return i


def _save_carries(loop: _Loop) -> dict[int, Value]:
    """Makes the forward loop also carry, per carried value the VJP needs, a buffer stacking the value
    each iteration starts with; returns those buffers (new results of the loop) by carry number."""
    op, n, (lo, _, step) = loop.op, loop.n, loop.bounds
    saved = [j for j, a in enumerate(loop.carry_args) if not loop.write_only(a)]
    types = [TensorType((loop.trips, *loop.carry_args[j].type.shape), loop.carry_args[j].dtype) for j in saved]
    inits = [_zeros_before(op, t) for t in types]
    op.set_operands([*op.operands[:3 + n], *inits, *op.operands[3 + n:]])
    bufs = [loop.block.insert_arg(1 + n + k, t) for k, t in enumerate(types)]
    term = loop.block.last_op
    b = Builder.before_op(term)
    at = _slot(b, loop.block.args[0], lo, step, op.loc)
    rows = []
    for j, buf in zip(saved, bufs):
        a = loop.carry_args[j]
        row = b.create("np.reshape", [a], {"shape": (1, *a.type.shape)}, loc=op.loc).result
        rows.append(b.create("np.dynamic_update_slice", [buf, row, at], dict(ROW), loc=op.loc).result)
    term.set_operands([*term.operands, *rows])
    for t in types:
        op.results.append(OpResult(t, op, len(op.results)))
    return dict(zip(saved, op.results[n:]))


def _trip_count(lo: Tracer, hi: Tracer, step: Tracer) -> Tracer:
    """len(range(lo, hi, step)) on traced scalars."""
    toward = np.where(step > 0, step - 1, step + 1)
    return np.maximum((hi - lo + toward) // step, 0)


def _carries_at(ctx: BackwardContext, loop: _Loop, it: Tracer, i: Tracer,
                saved: dict[int, Value] | None) -> list[Value]:
    """The carried values forward iteration `it` (induction value `i`) started with, in the reverse body."""
    if saved is None:
        rerun = loop.op.clone({v: ctx.local(v) for v in loop.op.operands}, fresh_uid=True)
        rerun.set_operand(1, i.value)
        rerun.loc = backward_location(loop.op.loc)
        return list(ctx.builder.insert(rerun).results)
    values = []
    for j, a in enumerate(loop.carry_args):
        if j not in saved:      # written, never read: any value of its type does
            values.append(ctx.local(loop.op.results[j]))
            continue
        row = ctx.op("np.dynamic_slice", saved[j], it.value, **ROW)
        values.append(np.reshape(row, tuple(a.type.shape)).value)
    return values


def _induction(ctx: BackwardContext, loop: _Loop, it: Tracer, bounds: tuple[Tracer, ...]) -> Tracer:
    """lower + it * step: the induction value of forward iteration `it`."""
    if loop.bounds[0] == 0 and loop.bounds[2] == 1:
        return it
    lo, _, step = (ctx.constant(b, INDEX) if b is not None else t for b, t in zip(loop.bounds, bounds))
    return lo + it * step


@dataclass
class _Reverse:
    """The reverse loop of a forward scf.for: the carries and captures that get cotangents, and where
    the carried values of each forward iteration come from (`saved` rows, or None: rerun the loop)."""

    ctx: BackwardContext
    loop: _Loop
    carried: list[int]          # float carries, by number
    wanted: list[int]           # captures whose cotangent the caller wants, by number
    saved: dict[int, Value] | None
    trips: Tracer
    bounds: tuple[Tracer, ...]  # the forward loop's lower, upper, step

    def body(self, k: Tracer, carried: list[Tracer]) -> list[Tracer]:
        """Reverse iteration k: forward iteration trips-1-k recomputed, then its VJP (a jl.fori_loop body)."""
        ctx, loop, n = self.ctx, self.loop, len(self.carried)
        cts, accs = carried[:n], carried[n:]
        it = (ctx.constant(loop.trips - 1, INDEX) if loop.trips is not None else self.trips - 1) - k
        i = _induction(ctx, loop, it, self.bounds)
        mapping: dict[Value, Value] = {loop.block.args[0]: i.value}
        mapping.update(zip(loop.carry_args, _carries_at(ctx, loop, it, i, self.saved)))
        mapping.update((a, ctx.local(v)) for a, v in zip(loop.capture_args, loop.captures))
        ops = _recompute_body(ctx, loop.ops, mapping)
        ends = [mapping.get(v, v) for v in loop.ops[-1].operands[:loop.n]]
        wrt = [mapping[loop.carry_args[j]] for j in self.carried] + \
              [mapping[loop.capture_args[c]] for c in self.wanted]
        grads = backward_seeded(ctx, ops, wrt, [(ends[j], g) for j, g in zip(self.carried, cts)])
        return grads[:n] + [a + g for a, g in zip(accs, grads[n:])]

    def inits(self, gs: list) -> list[Tracer]:
        """The forward results' cotangents (zeros where none came), and zero sums for the captures."""
        loop = self.loop
        cts = [gs[j] if gs[j] is not None else zeros(self.ctx, loop.carry_args[j].shape, loop.carry_args[j].dtype)
               for j in self.carried]
        return cts + [zeros(self.ctx, loop.captures[c].shape, loop.captures[c].dtype) for c in self.wanted]


@vjp("scf.for")
def _for(p: Primal, gs):
    """A reverse scf.for: iteration k recomputes forward iteration trips-1-k and runs its body's VJP."""
    loop, ctx = _Loop(p.op), p.ctx
    wanted = [c for c in _floats(loop.captures) if p.wants[3 + loop.n + c]]
    # a loop that never runs has no rows to save (and a buffer of length 0 no row to write)
    saved = None if ctx.recompute_loops or not loop.trips else _save_carries(loop)
    trips = ctx.constant(loop.trips, INDEX) if loop.trips is not None else _trip_count(*p.args[:3])
    rev = _Reverse(ctx, loop, _floats(loop.carry_args), wanted, saved, trips, p.args[:3])
    outs = fori_loop(0, loop.trips if loop.trips is not None else trips, rev.body, rev.inits(_as_list(gs, loop.n)))
    grads: list = [None] * len(p.args)
    for j, g in zip(rev.carried, outs):
        grads[3 + j] = g if p.wants[3 + j] else None
    for c, g in zip(wanted, outs[len(rev.carried):]):
        grads[3 + loop.n + c] = g
    return grads

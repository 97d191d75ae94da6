"""Checks shared by the memory tests: a plan's invariants, and the live bytes of a run
measured with numpy's own view semantics (independent of the planner's model)."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np

import jitlab as jl
from jitlab.dialects.reference import Interpreter
from jitlab.ir.opdef import Trait
from jitlab.passes import pipeline_for
from jitlab.report import BufferRecord, MemoryPlan


def planned(program, level: str):
    """What a CPU compile at `level` plans, its `program` and `report` (memory, schedule), from its
    passes alone: the plan is theirs, and the tests of it need no kernel built."""
    report = jl.CompileReport()
    return SimpleNamespace(program=jl.opt(program, pipeline_for(level), report=report), report=report)


def _overlap_in_time(a: BufferRecord, b: BufferRecord) -> bool:
    return a.first <= b.last and b.first <= a.last


def _overlap_in_space(a: BufferRecord, b: BufferRecord) -> bool:
    return a.bytes and b.bytes and a.offset < b.offset + b.bytes and b.offset < a.offset + a.bytes


def check_plan(plan: MemoryPlan) -> None:
    """Owners live at the same step never overlap in their region, every buffer fits its region,
    views and in-place results stay inside their owner's life, and the totals add up."""
    owners = {b.name: b for b in plan.buffers if b.alias_of is None}
    for b in plan.buffers:
        if b.alias_of is not None:
            owner = owners[b.alias_of]
            assert owner.first <= b.first and b.last <= owner.last, f"%{b.name} outlives its buffer %{owner.name}"
            assert (b.offset, b.region) == (owner.offset, owner.region) and b.kind in ("view", "inplace")
    placed = [b for b in owners.values() if b.offset is not None]
    assert all(b.kind == "temp" for b in placed) and (plan.mode == "static" or not placed)
    for b in placed:
        assert b.offset % plan.alignment == 0
        if b.region == "arena":
            assert b.offset + b.bytes <= plan.arena_bytes, f"%{b.name} does not fit the arena"
        else:
            host = owners[b.region]
            assert host.kind == "output" and b.last < host.first, f"%{b.name} borrows %{host.name} too late"
            assert b.offset + b.bytes <= host.bytes, f"%{b.name} does not fit in %{host.name}"
    for a, b in itertools.combinations(placed, 2):
        if a.region == b.region and _overlap_in_time(a, b):
            assert not _overlap_in_space(a, b), f"%{a.name} and %{b.name} are live together and overlap"
    live = [sum(b.bytes for b in owners.values() if b.first <= s <= b.last) for s in range(len(plan.order))]
    assert plan.live_bytes == live
    assert plan.lower_bound_bytes == max(live, default=plan.fixed_bytes)
    assert plan.lower_bound_bytes <= plan.peak_bytes
    assert plan.naive_bytes >= plan.lower_bound_bytes


def observed_live_bytes(program, inputs, bindings=None) -> list[int]:
    """Runs `program` at O0 in its block order, dropping each value after its last use, and
    measures after each step the bytes of the distinct numpy buffers still reachable (views
    share their base's memory, as numpy decides). A non-view op that returns a view of an
    operand is given a copy, since compiled code writes every result into its own buffer."""
    interp = Interpreter(program, bindings)
    steps = [op for op in program.body.ops if not op.has(Trait.TERMINATOR) and not op.has(Trait.MEMORY)]
    last_use = {}
    for s, op in enumerate(steps):
        for v in op.operands:
            last_use[v] = s
    kept = set(program.outputs) | set(program.inputs)
    env = dict(zip(program.inputs, inputs))
    always = list(inputs) + list(program.weights.values())
    always += [op.attrs["value"].array for op in steps if op.has(Trait.CONSTANT)]
    live = []
    for s, op in enumerate(steps):
        outs = interp.run_op(op, [env[v] for v in op.operands])
        for r, out in zip(op.results, outs):
            shares = any(np.shares_memory(out, env[v]) for v in op.operands)
            env[r] = out.copy() if shares and not op.has(Trait.VIEW) else out
        live.append(_distinct_bytes(always + list(env.values())))
        for v in [v for v in env if v not in kept and last_use.get(v, s) <= s]:
            del env[v]
    return live


def _distinct_bytes(arrays) -> int:
    owners = {}
    for a in arrays:
        while isinstance(getattr(a, "base", None), np.ndarray):
            a = a.base
        owners[id(a)] = a.nbytes
    return sum(owners.values())

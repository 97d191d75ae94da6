"""The numexpr backend: a jitlab engine plugin that evaluates elementwise groups with numexpr.

Its translate pass `numexpr-claim` reuses jitlab's mark-subgraphs and fuse with this
backend's `supports`, so it claims maximal chains of elementwise ops into engine groups;
every op it leaves out runs with numpy (the O1 executor's library kernels).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numexpr
import numpy as np
from numexpr.necompiler import getExprNames

from jitlab.backends.base import INTERFACE_VERSION, Backend, Kernel
from jitlab.ir.core import Operation
from jitlab.ir.program import Program
from jitlab.passes.fusion import Fuse, MarkSubgraphs
from jitlab.passes.manager import Pass, PassContext, register_pass

from .expr import Translation, translate, why_not


class NumexprBackend(Backend):
    """Elementwise groups as numexpr expressions; a host backend (numpy arrays)."""

    name = "numexpr"
    interface_version = INTERFACE_VERSION
    device = "cpu"
    translate_passes = ("numexpr-claim",)

    def supports(self, op: Operation) -> str | None:
        return why_not(op)

    def fusion_kind(self, op: Operation) -> str:
        return "elementwise" if why_not(op) is None else "opaque"

    def compile_group(self, group: Operation, options: dict[str, Any]) -> Kernel:
        start = time.perf_counter()
        plan = translate(group)
        stages = [_compiled(plan, s.expr, s.names) for s in plan.stages]
        run = _runner(plan, stages)
        return Kernel(group.attrs["key"], self.name, run, plan.source(), time.perf_counter() - start,
                      choice=f"numexpr, {len(stages)} stage(s)")


def _compiled(plan: Translation, expr: str, names: list[str]):
    """A compiled numexpr program for `expr`, or None when it only copies one variable."""
    if expr in names:
        return None
    program = numexpr.NumExpr(expr, signature=[(n, plan.kinds[n]) for n in names])
    return program, getExprNames(expr, {})[1]


def _runner(plan: Translation, compiled: list):
    """The kernel: runs the stages in order over the group's inputs, writing its outputs."""
    def run(inputs, outputs, bindings=None):
        env = {**plan.constants, **dict(zip(plan.args, inputs))}
        for stage, program in zip(plan.stages, compiled):
            out = outputs[stage.out] if stage.out is not None else None
            if program is None:
                np.copyto(out, env[stage.expr])
                continue
            nex, uses_vml = program
            env[stage.name] = nex(*(env[n] for n in stage.names), out=out, ex_uses_vml=uses_vml)
    return run


@register_pass
@dataclass
class NumexprClaim(Pass):
    """Claims maximal elementwise chains numexpr can evaluate into numexpr engine groups."""

    name = "numexpr-claim"
    summary = "Marks the ops numexpr evaluates and fuses each maximal chain into one numexpr engine group."

    def apply(self, program: Program, ctx: PassContext) -> Program:
        ops_before = _count(program)
        groups_before = len(ctx.report.groups)
        MarkSubgraphs(backend=NumexprBackend.name).apply(program, ctx)
        Fuse().apply(program, ctx)
        claimed = ctx.report.groups[groups_before:]
        stats = ctx.report.stats
        stats["engine_ops_before"] = ops_before
        stats["engine_groups"] = stats.get("engine_groups", 0) + len(claimed)
        stats["engine_ops_claimed"] = stats.get("engine_ops_claimed", 0) + sum(len(g.ops) for g in claimed)
        stats["engine_ops_after"] = _count(program)
        ctx.log.notes.append(f"numexpr claimed {stats['engine_ops_claimed']} of {ops_before} ops into "
                             f"{len(claimed)} engine group(s); {stats['engine_ops_after']} ops remain")
        return program


def _count(program: Program) -> int:
    """Ops that do work: constants, weights and the return are not counted."""
    return sum(1 for op in program.body.ops
               if op.name not in ("np.constant", "np.weight") and op is not program.body.terminator)

"""The VJP table: for each differentiable op, the rule that turns the cotangents of its
results into cotangents of its operands.

Rules are written in numpy over tracers, so a rule reads like the math it implements
and every op it emits goes through the same shape inference as traced user code. A
rule gets a `Primal` (the op's operands and results as tracers, its attributes, which
operands need a gradient) and the cotangent of the result (a list for multi-result
ops, with None for results that got none), and returns one cotangent or None per
operand. `no_gradient` marks ops whose gradient is zero or that never carry one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import UnsupportedOp
from ..frontend.tracer import TraceContext, Tracer
from ..ir.core import Operation
from ..registry import Registry

Cotangents = Sequence["Tracer | None"]
Rule = Callable[["Primal", Any], Cotangents]

VJPS: dict[str, Rule] = {}
NO_GRADIENT: dict[str, str] = {}   # op name -> why no gradient flows through it
UNSUPPORTED: dict[str, str] = {}   # op name -> why jitlab cannot differentiate through it (yet)
# Each op name is claimed once, by one of the three tables above: the table's name.
CLAIMS: Registry[str, str] = Registry("gradient rule")


@dataclass
class Primal:
    """A forward op as a VJP rule sees it."""

    op: Operation
    args: tuple[Tracer, ...]      # operands
    outs: tuple[Tracer, ...]      # results
    wants: tuple[bool, ...]       # which operands need a cotangent (the others may get None)
    ctx: TraceContext

    @property
    def out(self) -> Tracer:
        return self.outs[0]

    @property
    def attrs(self) -> dict[str, Any]:
        return self.op.attrs

    def emit(self, name: str, *operands: Tracer, **attrs: Any) -> Tracer:
        """Emits op `name` directly (for ops numpy has no function for)."""
        return self.ctx.op(name, *(t.value for t in operands), **attrs)


def vjp(*names: str) -> Callable[[Rule], Rule]:
    """Registers the decorated function as the VJP rule of ops `names`."""

    def register(rule: Rule) -> Rule:
        for name in names:
            CLAIMS.add(name, "vjp")
            VJPS[name] = rule
        return rule

    return register


def no_gradient(reason: str, *names: str) -> None:
    """Marks ops through which no gradient flows (their operands get none)."""
    for name in names:
        CLAIMS.add(name, "no_gradient")
        NO_GRADIENT[name] = reason


def unsupported_gradient(reason: str, *names: str) -> None:
    """Declares ops a gradient cannot flow through in jitlab, and why: differentiating through
    them raises UnsupportedOp with that reason, never a silent zero."""
    for name in names:
        CLAIMS.add(name, "unsupported_gradient")
        UNSUPPORTED[name] = reason


def _none(p: Primal, g) -> Cotangents:
    return [None] * len(p.args)


def rule_for(op: Operation) -> Rule:
    """The VJP rule of `op`, or UnsupportedOp naming the op and where it came from."""
    if op.name in VJPS:
        return VJPS[op.name]
    if op.name in NO_GRADIENT:
        return _none
    where = f" (from {op.loc})" if op.loc is not None else ""
    if op.name in UNSUPPORTED:
        raise UnsupportedOp(f"cannot differentiate through {op.name}: {UNSUPPORTED[op.name]}{where}")
    raise UnsupportedOp(f"{op.name} has no gradient rule, and a gradient must flow through it{where}")

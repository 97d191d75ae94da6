"""Passes every level runs: verify, infer-shapes, dce and cse."""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.builder import infer_types
from ..ir.core import Block, Operation
from ..ir.opdef import Trait
from ..ir.program import Program
from ..ir.verifier import verify
from .drr_lang import exactly_commutative
from .manager import Pass, PassContext, register_pass
from .rewriter import Rewriter, is_trivially_dead


@register_pass
@dataclass
class Verify(Pass):
    name = "verify"
    summary = "Checks the structural rules of the IR (SSA dominance, types, attributes)."

    def apply(self, program: Program, ctx: PassContext) -> Program:
        verify(program)
        return program


@register_pass
@dataclass
class InferShapes(Pass):
    name = "infer-shapes"
    summary = "Recomputes every result type from its operands (refines after rewrites)."

    def apply(self, program: Program, ctx: PassContext) -> Program:
        for op in program.walk():
            if op.opdef.infer is None:
                continue
            types = infer_types(op.opdef, [v.type for v in op.operands], op.attrs, program.constraints)
            for r, t in zip(op.results, types):
                r.type = t
        return program


def remove_dead_ops(block: Block, rw: Rewriter) -> int:
    """Erases pure ops whose results are unused, last to first; returns how many."""
    removed = 0
    for op in block.ops_reversed():
        for region in op.regions:
            for inner in region.blocks:
                removed += remove_dead_ops(inner, rw)
        if is_trivially_dead(op):
            rw.erase_op(op)
            removed += 1
    return removed


@register_pass
@dataclass
class DCE(Pass):
    name = "dce"
    summary = "Removes ops whose results are never used, and weights no op reads."

    def apply(self, program: Program, ctx: PassContext) -> Program:
        rw = Rewriter(program)
        removed = remove_dead_ops(program.body, rw)
        used = {op.attrs["name"] for op in program.walk() if op.name == "np.weight"}
        dropped = sorted(set(program.weights) - used)
        for name in dropped:
            del program.weights[name]
        if removed or dropped:
            ctx.log.notes.append(f"dce removed {removed} op(s)" + (f" and weight(s) {', '.join(dropped)}"
                                                                   if dropped else ""))
        return program


def _cse_key(op: Operation):
    attrs = tuple(sorted(op.attrs.items()))
    operands = [id(v) for v in op.operands]
    if exactly_commutative(op):         # a + b and b + a are the same value
        operands.sort()
    return (op.name, tuple(operands), attrs, tuple(r.type for r in op.results))


@register_pass
@dataclass
class CSE(Pass):
    name = "cse"
    summary = ("Replaces an op by an identical earlier one (same name, operands, attributes; operands in "
               "either order for exactly commutative ops).")

    def apply(self, program: Program, ctx: PassContext) -> Program:
        rw = Rewriter(program)
        self._block(program.body, {}, rw, ctx)
        return program

    def _block(self, block: Block, seen: dict, rw: Rewriter, ctx: PassContext) -> None:
        for op in list(block.ops):
            if op.regions:
                for region in op.regions:
                    for inner in region.blocks:
                        self._block(inner, {}, rw, ctx)
                continue
            if not op.has(Trait.PURE) or op.has(Trait.TERMINATOR):
                continue
            try:
                key = _cse_key(op)
                hash(key)
            except TypeError:
                continue
            earlier = seen.get(key)
            if earlier is None:
                seen[key] = op
                continue
            rw.reset()
            rw.replace_op(op, earlier.results)
            ctx.log.rewrites.append(rw.record("cse", op))

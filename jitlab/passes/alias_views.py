"""`alias-views`: pure re-views (reshape, squeeze, expand_dims) become no-task aliases."""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.opdef import Trait
from ..ir.program import Program
from .manager import Pass, PassContext, register_pass
from .rewriter import Rewriter


@register_pass
@dataclass
class AliasViews(Pass):
    """Turns top-level view ops into jit.view aliases of their operand's buffer."""

    name = "alias-views"
    summary = "Re-views (reshape, squeeze, expand_dims) become jit.view aliases: no launch, no copy."

    def apply(self, program: Program, ctx: PassContext) -> Program:
        rw = Rewriter(program)
        count = 0
        for op in list(program.body.ops):
            if not op.has(Trait.VIEW) or op.name == "jit.view":
                continue
            rw.set_insertion_point(op)
            alias = rw.op("jit.view", op.operands[0], shape=op.result.type.shape)
            alias.name = op.result.name
            op.result.name = None
            rw.replace_op(op, [alias])
            count += 1
        ctx.report.stats["launches_saved_by_views"] = count
        if count:
            ctx.log.notes.append(f"{count} view op(s) became aliases: {count} kernel launch(es) saved")
        return program

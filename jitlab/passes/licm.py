"""Loop-invariant code motion: an op of a loop's body that reads only the loop's captures (values
from outside it) computes the same value every iteration, so it moves before the loop and its
result becomes a new capture. Regions are isolated (dialects/scf.py), so "reads only captures" is a
test on block arguments; hoisting repeats to a fixpoint, so chains of invariant ops move together.

Only ops that cannot raise move (elementwise, reductions, contractions, views): a loop that runs no
iteration must not fail on an op it never ran. Branches of an scf.if are left alone (hoisting out
of them would compute what the branch not taken needs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..ir.core import BlockArgument, Operation, Value
from ..ir.opdef import Trait
from .manager import register_pass
from .rewriter import Pattern, Rewriter
from .rules import RewritePass, RuleSet

_SAFE = (Trait.ELEMENTWISE, Trait.REDUCTION, Trait.CONTRACTION, Trait.VIEW)


def captures(loop: Operation, region: int) -> dict[Value, Value]:
    """The block arguments of a loop's region that stand for its captures, each with its operand."""
    n = len(loop.results)
    block = loop.regions[region].blocks[0]
    first_arg, first_operand = (1 + n, 3 + n) if loop.name == "scf.for" else (n, n)
    return dict(zip(block.args[first_arg:], loop.operands[first_operand:]))


def _invariant(op: Operation, outer: dict[Value, Value]) -> bool:
    return (op.has(Trait.PURE) and not op.regions and any(op.has(t) for t in _SAFE)
            and bool(op.operands) and all(isinstance(v, BlockArgument) and v in outer for v in op.operands))


class HoistInvariant(Pattern):
    """Moves an op of a loop body that reads only the loop's captures before the loop."""

    name = "hoist-loop-invariant"
    root = ("scf.for", "scf.while")

    def match_and_rewrite(self, loop: Operation, rw: Rewriter) -> bool:
        for r in range(len(loop.regions)):
            outer = captures(loop, r)
            op = next((o for o in loop.regions[r].blocks[0].ops if _invariant(o, outer)), None)
            if op is not None:
                self._hoist(loop, r, op, outer, rw)
                return True
        return rw.fail("no op of the body reads only values from outside the loop")

    def _hoist(self, loop: Operation, region: int, op: Operation, outer: dict[Value, Value], rw: Rewriter) -> None:
        rw.set_insertion_point(loop)
        hoisted = rw.create(op.name, [outer[v] for v in op.operands], dict(op.attrs), [r.type for r in op.results])
        rw.add_operands(loop, hoisted.results)
        args = {r: [b.blocks[0].add_arg(v.type) for v in hoisted.results] for r, b in enumerate(loop.regions)}
        rw.replace_op(op, args[region])


LICM = RuleSet("licm")
LICM.add(HoistInvariant())


@register_pass
@dataclass
class Licm(RewritePass):
    name = "licm"
    summary = "Moves ops of loop bodies that read only values from outside the loop before the loop."
    rules: ClassVar[RuleSet] = LICM

"""The verifier: structural rules every Program must keep between passes.

Each rule names the op that breaks it, its position in the program and (for parsed
text) its line, and shows the op as printed.
"""

from __future__ import annotations

from ..errors import JitlabError, VerifyError
from .attributes import normalize_attrs
from .builder import check_operand_count, infer_types
from .core import Block, BlockArgument, Operation, OpResult, Use, Value
from .opdef import Trait
from .printer import assign_names, print_op


def verify(program, op_lines: dict[int, int] | None = None) -> None:
    """Raises VerifyError at the first broken rule."""
    assign_names(program)
    _Verifier(program, op_lines or {}).run()


class _Verifier:
    def __init__(self, program, op_lines: dict[int, int]):
        self.program, self.op_lines = program, op_lines

    def fail(self, op: Operation, position: str, message: str) -> VerifyError:
        line = self.op_lines.get(op.uid)
        where = f"{position} in @{self.program.name}" + (f" (line {line})" if line else "")
        return VerifyError(f"{where}: {op.name}: {message}\n  {print_op(op).splitlines()[0]}")

    def run(self) -> None:
        body = self.program.body
        term = body.terminator
        if term is None or term.name != "func.return":
            last = body.last_op
            raise VerifyError(f"@{self.program.name}: the body must end with func.return"
                              + (f", it ends with {last.name}" if last else ", it is empty"))
        self.verify_block(body, visible=set(body.args), path="op")

    def verify_block(self, block: Block, visible: set[Value], path: str) -> None:
        defined = set(visible)
        for i, op in enumerate(block.ops):
            position = f"{path} #{i}"
            self.verify_op(op, defined, position)
            if op.has(Trait.TERMINATOR) and op is not block.last_op:
                raise self.fail(op, position, "a terminator must be the last op of its block")
            defined.update(op.results)
        last = block.last_op
        if block is not self.program.body and (last is None or not last.has(Trait.TERMINATOR)):
            owner = block.parent.parent if block.parent else None
            raise VerifyError(f"{path}: the block of {owner.name if owner else 'a region'} "
                              "must end with a terminator (jit.yield)")

    def verify_op(self, op: Operation, defined: set[Value], position: str) -> None:
        for rule in (self.check_signature, self.check_uses, self.check_types, self.check_weight):
            rule(op, position)
        for i, v in enumerate(op.operands):
            if v not in defined:
                raise self.fail(op, position, f"operand {i} (%{v.name}) does not dominate this use"
                                + _where_defined(v))
        if len(op.regions) != op.opdef.num_regions:
            raise self.fail(op, position, f"has {len(op.regions)} region(s), its definition says "
                            f"{op.opdef.num_regions}")
        for r, region in enumerate(op.regions):
            for b, block in enumerate(region.blocks):
                visible = set(block.args) if op.has(Trait.ISOLATED) else defined | set(block.args)
                self.verify_block(block, visible, f"{position} region {r} block {b} op")
        check = op.opdef.rules.get("verify")
        if check is not None:
            try:
                check(op)
            except JitlabError as e:
                raise self.fail(op, position, str(e)) from None

    def check_signature(self, op: Operation, position: str) -> None:
        try:
            check_operand_count(op.opdef, len(op.operands))
            normalized = normalize_attrs(op.name, op.opdef.attrs, op.attrs)
        except VerifyError as e:
            raise self.fail(op, position, str(e).split(": ", 1)[-1]) from None
        if normalized.keys() != op.attrs.keys():
            raise self.fail(op, position, "attributes do not match the op's schema")

    def check_uses(self, op: Operation, position: str) -> None:
        for i, v in enumerate(op.operands):
            if Use(op, i) not in v.uses:
                raise self.fail(op, position, f"operand {i} is missing from the use list of %{v.name}")
        for r in op.results:
            if r.op is not op:
                raise self.fail(op, position, f"result %{r.name} names another op as its owner")
            for use in r.uses:
                if use.index >= len(use.op.operands) or use.op.operands[use.index] is not r:
                    raise self.fail(op, position, f"the use list of %{r.name} holds a stale use "
                                    f"by {use.op.name}")

    def check_types(self, op: Operation, position: str) -> None:
        if op.opdef.infer is None:
            return
        constraints = self.program.constraints.copy()
        try:
            expected = infer_types(op.opdef, [v.type for v in op.operands], op.attrs, constraints)
        except JitlabError as e:
            raise self.fail(op, position, str(e).split(": ", 1)[-1]) from None
        got = [r.type for r in op.results]
        if got != expected:
            raise self.fail(op, position, f"result types ({', '.join(map(str, got))}) differ from the "
                            f"inferred ({', '.join(map(str, expected))})")
        new = [p for p in constraints if p not in self.program.constraints.pairs]
        if new:
            a, b = new[0]
            raise self.fail(op, position, f"needs the constraint {a} == {b}, which the function "
                            "header does not declare")

    def check_weight(self, op: Operation, position: str) -> None:
        if op.name != "np.weight" or not self.program.weights:
            return
        name = op.attrs["name"]
        if name not in self.program.weights:
            raise self.fail(op, position, f"weight {name!r} is not among the program's weights")
        array = self.program.weights[name]
        t = op.result.type
        if tuple(array.shape) != t.shape or array.dtype != t.dtype:
            raise self.fail(op, position, f"weight {name!r} holds {array.dtype}{list(array.shape)}, "
                            f"the op says {t}")


def _where_defined(v: Value) -> str:
    if isinstance(v, OpResult):
        return f" (defined by {v.op.name}" + (" later or in another block)" if v.op.parent else ", which was erased)")
    if isinstance(v, BlockArgument):
        return " (an argument of another block)"
    return ""


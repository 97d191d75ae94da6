"""Creating ops with inferred result types at an insertion point."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ..errors import VerifyError
from .attributes import normalize_attrs
from .core import Block, Location, Operation, Region, Value
from .opdef import ConstraintSet, InferCtx, OpDef, get_opdef
from .types import TensorType


def check_operand_count(opdef: OpDef, count: int) -> None:
    lo, hi = opdef.operands
    if count < lo or (hi is not None and count > hi):
        want = str(lo) if lo == hi else f"{lo}..{hi if hi is not None else ''}"
        raise VerifyError(f"{opdef.name} takes {want} operand(s), got {count}")


class InferClock:
    """Seconds this process has spent inferring result types: the compile-time breakdown reads its
    difference across a trace or a pipeline."""

    seconds = 0.0


class FrontendClock:
    """Started when a frontend begins a program; `stamp` records on it what making it took."""

    def __init__(self):
        self.start, self.inferred = time.perf_counter(), InferClock.seconds

    def stamp(self, program) -> None:
        program.trace_seconds = time.perf_counter() - self.start
        program.trace_inference_seconds = InferClock.seconds - self.inferred


def infer_types(opdef: OpDef, operand_types: Sequence[TensorType], attrs: dict[str, Any],
                constraints: ConstraintSet | None = None) -> list[TensorType]:
    """Result types of `opdef` applied to operands of these types (attrs already normalized)."""
    check_operand_count(opdef, len(operand_types))
    if opdef.infer is None:
        raise VerifyError(f"{opdef.name} cannot infer its result types; give them explicitly")
    start = time.perf_counter()
    try:
        return list(opdef.infer(InferCtx(opdef.name, constraints), list(operand_types), attrs))
    finally:
        InferClock.seconds += time.perf_counter() - start


class Builder:
    """Inserts new ops at the end of a block or before an anchor op."""

    def __init__(self, block: Block, before: Operation | None = None,
                 constraints: ConstraintSet | None = None, loc: Location | None = None):
        self.block, self.before, self.constraints, self.loc = block, before, constraints, loc

    @classmethod
    def before_op(cls, op: Operation, constraints: ConstraintSet | None = None) -> Builder:
        return cls(op.parent, op, constraints, op.loc)

    def insert(self, op: Operation) -> Operation:
        if self.before is None:
            return self.block.append(op)
        return self.block.insert_before(self.before, op)

    def create(self, name: str, operands: Sequence[Value] = (), attrs: dict[str, Any] | None = None,
               result_types: Sequence[TensorType] | None = None, regions: Sequence[Region] = (),
               loc: Location | None = None) -> Operation:
        """Builds op `name`, inferring its result types unless given, and inserts it."""
        opdef = get_opdef(name)
        attrs = normalize_attrs(name, opdef.attrs, dict(attrs or {}))
        if result_types is None:
            result_types = infer_types(opdef, [v.type for v in operands], attrs, self.constraints)
        else:
            check_operand_count(opdef, len(operands))
        op = Operation(name, operands, result_types, attrs, regions, loc or self.loc)
        return self.insert(op)

    def __call__(self, name: str, *operands: Value, **attrs: Any) -> Value:
        """Shorthand for single-result ops: `b("np.add", x, y)`."""
        return self.create(name, operands, attrs).result

"""The O0 reference interpreter: runs a Program op by op with numpy reference
implementations. It is the oracle every level, pass and backend is compared with.

As in torch.fx's Interpreter, each op goes through an overridable method, and ops that
need more than their reference implementation (weights, groups) have handlers in a
table keyed by op name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..errors import InputError, JitlabError
from ..ir.core import Block, Operation, Value
from ..ir.opdef import Trait
from ..ir.program import Program
from ..ir.shapes import Sym, evaluate_shape
from ..registry import Registry

Handler = Callable[["Interpreter", Operation, list[np.ndarray]], list[np.ndarray]]
HANDLERS: Registry[str, Handler] = Registry("interpreter handler")


def handles(*names: str) -> Callable[[Handler], Handler]:
    """Registers an interpreter handler for ops that a reference implementation cannot run."""
    return HANDLERS.register(*names)


class Interpreter:
    """Evaluates a program on concrete arrays, one op at a time."""

    def __init__(self, program: Program, bindings: dict[str, int] | None = None, check: bool = True,
                 regions: dict[tuple[int, int], Callable] | None = None):
        self.program = program
        self.bindings = bindings or {}
        self.check = check
        # (op uid, region number) -> a compiled runner of that region (O1/O2); others are interpreted
        self.regions = regions or {}

    def run(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return self.run_block(self.program.body, list(inputs))

    def run_block(self, block: Block, args: Sequence[np.ndarray]) -> list[np.ndarray]:
        env: dict[Value, np.ndarray] = dict(zip(block.args, args))
        for op in block.ops:
            values = [env[v] for v in op.operands]
            if op.has(Trait.TERMINATOR):
                return values
            for r, out in zip(op.results, self.run_op(op, values)):
                env[r] = out
        raise JitlabError("block ended without a terminator")

    def run_region(self, op: Operation, region: int, args: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Runs region `region` of a region op (an scf body) on `args`: its terminator's operands."""
        compiled = self.regions.get((op.uid, region))
        if compiled is not None:
            return compiled(list(args), self.bindings)
        return self.run_block(op.regions[region].blocks[0], args)

    def run_op(self, op: Operation, args: list[np.ndarray]) -> list[np.ndarray]:
        handler = HANDLERS.get(op.name)
        if handler is not None:
            outs = handler(self, op, args)
        elif op.opdef.reference is None:
            raise JitlabError(f"{op.name} has no reference implementation")
        else:
            outs = op.opdef.reference(*args, **concrete_attrs(op.attrs, self.bindings))
            outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        if self.check:
            self._check(op, outs)
        return outs

    def _check(self, op: Operation, outs: list[np.ndarray]) -> None:
        for r, out in zip(op.results, outs):
            shape = evaluate_shape(r.type.shape, self.bindings)
            if out.shape != shape or out.dtype != r.type.dtype:
                raise AssertionError(f"{op.name} reference gave {out.dtype}{list(out.shape)}, "
                                     f"expected {r.type.dtype}{list(shape)}")


def concrete_attrs(attrs: dict, bindings: dict[str, int]) -> dict:
    """Attributes with symbolic dims replaced by their values under `bindings`."""
    return {k: _concrete(v, bindings) for k, v in attrs.items()}


def _concrete(v, bindings):
    if isinstance(v, Sym):
        return v.evaluate(bindings)
    if isinstance(v, tuple):
        return tuple(_concrete(x, bindings) for x in v)
    return v


def weight_data(program, name: str) -> np.ndarray:
    """The array of weight `name`; an InputError if the program carries none."""
    if name not in program.weights:
        raise InputError(f"np.weight: weight {name!r} has no data: pass weights= to jl.parse or set "
                         "program.weights")
    return program.weights[name]


@handles("np.weight")
def _weight(interp: Interpreter, op: Operation, args):
    return [weight_data(interp.program, op.attrs["name"])]


@handles("jit.group")
def _group(interp: Interpreter, op: Operation, args):
    return interp.run_block(op.body, args)


def run_reference(program: Program, inputs: Sequence[np.ndarray], bindings: dict[str, int] | None = None
                  ) -> list[np.ndarray]:
    """Runs `program` at O0 (inputs assumed checked)."""
    return Interpreter(program, bindings).run(inputs)

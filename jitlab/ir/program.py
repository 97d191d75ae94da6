"""A Program: one function body, its weights kept apart from the graph, and the
symbolic-shape constraints it relies on."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence

import numpy as np

from ..errors import VerifyError
from .core import Block, Operation, Value
from .display import render_html
from .opdef import ConstraintSet, Trait, defop
from .types import TensorType

RETURN = defop("func.return", operands=(0, None), traits=(Trait.TERMINATOR,),
               doc="Ends the program; its operands are the program's results.")


class Program:
    """The operator-level graph of one function, as `jl.trace` or `jl.parse` gives it."""

    def __init__(self, name: str = "main", arg_types: Sequence[TensorType] = (),
                 arg_names: Sequence[str | None] = (), weights: dict[str, np.ndarray] | None = None,
                 constraints: ConstraintSet | None = None):
        self.name = re.sub(r"[^A-Za-z0-9_.$]", "_", name) or "main"
        self.body = Block(arg_types, arg_names)
        self.weights: dict[str, np.ndarray] = dict(weights or {})
        self.constraints = constraints if constraints is not None else ConstraintSet()
        self.trace_seconds = 0.0      # what the frontend took to make it (tracing, importing a model)
        self.trace_inference_seconds = 0.0   # of which inferring result types
        # set by the frontend: a callable from shapes by input name to this program traced at them
        self.retrace = None
        # set by the frontend (capture.py): per Python loop or branch, captured as an scf op or unrolled and why
        self.loops: list = []
        # an input's name where it came from, by its name in the IR, where the IR had to change it
        # (an ONNX model's `gpu_0/data_0` is `%gpu_0_data_0`): the name every API takes and shows
        self.own_names: dict[str, str] = {}
        # set by the frontend: how a call with the traced function's own (nested) arguments gives
        # the inputs (frontend/arguments.py's CallArguments)
        self.arguments = None

    @property
    def inputs(self) -> list[Value]:
        return self.body.args

    @property
    def input_names(self) -> list[str]:
        from .printer import assign_names

        assign_names(self)
        return [a.name for a in self.inputs]

    @property
    def own_input_names(self) -> list[str]:
        """The inputs' names as their source gave them (`input_names` is how the IR spells them)."""
        return [self.own_names.get(n, n) for n in self.input_names]

    def by_own_names(self, by_name: Mapping[str, object]) -> dict[str, object]:
        """`by_name` (values by input name) keyed by the inputs' own names: a name the IR spells
        differently is taken too."""
        return {self.own_names.get(k, k): v for k, v in by_name.items()}

    def ir_input_name(self, name: str) -> str:
        """How the IR spells the input named `name` (by its own name, or the IR's)."""
        return next((ir for ir, own in self.own_names.items() if own == name), name)

    @property
    def return_op(self) -> Operation:
        term = self.body.terminator
        if term is None or term.name != "func.return":
            raise VerifyError(f"@{self.name} does not end with a return")
        return term

    @property
    def outputs(self) -> tuple[Value, ...]:
        return self.return_op.operands

    @property
    def ops(self) -> list[Operation]:
        """Top-level ops in order, the return included."""
        return list(self.body.ops)

    def walk(self) -> Iterator[Operation]:
        return self.body.walk()

    def set_outputs(self, values: Sequence[Value]) -> None:
        term = self.body.terminator
        if term is None:
            self.body.append(Operation("func.return", values))
        else:
            term.set_operands(values)

    def op_counts(self, by: str = "name") -> Counter:
        """Ops by name (or by dialect with by="dialect"), nested ops included, returns excluded."""
        key = (lambda op: op.opdef.dialect) if by == "dialect" else (lambda op: op.name)
        return Counter(key(op) for op in self.walk() if op.name != "func.return")

    def clone(self) -> Program:
        """A deep copy sharing the weight arrays (weights are read-only to the compiler)."""
        new = Program(self.name, [a.type for a in self.inputs], [a.name for a in self.inputs],
                      self.weights, self.constraints.copy())
        new.own_names = dict(self.own_names)
        mapping: dict[Value, Value] = dict(zip(self.inputs, new.inputs))
        for op in self.body.ops:
            new.body.append(op.clone(mapping))
        return new

    def __reduce__(self):
        # flat data, not the linked ops: pickling those recurses once per op (ir/flat.py)
        from .flat import flatten_program, unflatten_program

        return unflatten_program, (flatten_program(self),)

    def __str__(self) -> str:
        from .printer import print_program

        return print_program(self)

    def _repr_html_(self) -> str | None:
        return render_html(self)

    def __repr__(self) -> str:
        n = sum(1 for _ in self.walk()) - 1
        return f"<Program @{self.name}: {len(self.inputs)} inputs, {n} ops, {len(self.weights)} weights>"

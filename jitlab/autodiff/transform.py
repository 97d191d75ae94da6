"""Reverse-mode differentiation as an IR transform.

`backward` walks a straight run of forward ops last to first. A value is *active* when
it is a float that depends on a differentiated input; each op with an active operand
and a cotangent on one of its results hands that cotangent to its VJP rule, and the
operands' cotangents are summed over their uses. The backward ops go right after the
forward ones, in the same block, so the whole step is one program that later passes
fuse, schedule and plan like any other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import DTypeError, JitlabError, PassError, ShapeError, UnsupportedOp
from ..frontend.tracer import Tracer
from ..ir.builder import Builder
from ..ir.core import Operation, Value
from ..ir.printer import assign_names
from ..ir.program import Program
from ..passes.manager import Pass, PassContext, register_pass
from .emit import BackwardContext, zeros
from .registry import Primal, rule_for


def backward(ctx: BackwardContext, ops: Sequence[Operation], wrt: Sequence[Value], loss: Value) -> list[Tracer]:
    """Emits the backward graph of `ops` through ctx; returns d(loss)/d(w) for each w in wrt."""
    return backward_seeded(ctx, ops, wrt, [(loss, np.broadcast_to(ctx.constant(1, loss.dtype), loss.shape))])


def backward_seeded(ctx: BackwardContext, ops: Sequence[Operation], wrt: Sequence[Value],
                    seeds: Sequence[tuple[Value, Tracer]]) -> list[Tracer]:
    """The cotangents of `wrt` given those of some values `ops` compute (`seeds`, summed where a value
    comes twice): a region's VJP seeds its terminator's operands with the cotangents of the op's results."""
    active = _active(ops, wrt)
    cotangents: dict[Value, Tracer] = {}
    for v, g in seeds:
        cotangents[v] = cotangents[v] + g if v in cotangents else g
    outer = ctx.forward_op
    for op in reversed(ops):
        _pull_back(ctx, op, cotangents, active)
    ctx.forward_op = outer
    return [cotangents[w] if w in cotangents else zeros(ctx, w.shape, w.dtype) for w in wrt]


def _active(ops: Sequence[Operation], wrt: Sequence[Value]) -> set[Value]:
    active = set(wrt)
    for op in ops:
        if any(v in active for v in op.operands):
            _refuse_complex(op)
            active.update(r for r in op.results if r.dtype.kind == "f")
    return active


def _refuse_complex(op: Operation) -> None:
    """A complex value on the path from an input would drop its gradient: refuse instead."""
    complex_results = [r for r in op.results if r.dtype.kind == "c"]
    if complex_results:
        where = f" at {op.loc.file}:{op.loc.line}" if op.loc is not None else ""
        raise UnsupportedOp(f"{op.name}{where} makes a complex value ({complex_results[0].type}) from a "
                            "differentiated input: gradients through complex numbers are not supported")


def _pull_back(ctx: BackwardContext, op: Operation, cotangents: dict[Value, Tracer], active: set[Value]) -> None:
    """Runs op's VJP rule on its results' cotangents and adds what it gives to its operands'."""
    gs = [cotangents.get(r) for r in op.results]
    operands = op.operands      # as they are now: a loop's rule adds the carries it saves to its operands
    wants = tuple(v in active for v in operands)
    if all(g is None for g in gs) or not any(wants):
        return
    rule = rule_for(op)
    ctx.forward_op = op
    primal = Primal(op, tuple(Tracer(v, ctx) for v in operands), tuple(Tracer(r, ctx) for r in op.results),
                    wants, ctx)
    try:
        grads = rule(primal, gs[0] if len(gs) == 1 else gs)
    except JitlabError as e:
        if ctx.where() in str(e):
            raise
        raise type(e)(f"{e} ({ctx.where()})") from None
    for i, (v, want, g) in enumerate(zip(operands, wants, grads)):
        if want and g is not None:
            _check(op, i, v, g)
            cotangents[v] = cotangents[v] + g if v in cotangents else g


def _check(op: Operation, index: int, operand: Value, g: Tracer) -> None:
    if g.value.type != operand.type:
        raise PassError(f"the VJP rule of {op.name} gave operand {index} ({operand.type}) a gradient "
                        f"of type {g.value.type}")


def check_loss(loss: Value, what: str) -> None:
    """The loss must be a float with one element (a scalar, or all dims 1)."""
    if loss.dtype.kind != "f":
        raise DTypeError(f"{what} must be a float to be differentiated, got {loss.type}")
    if any(d != 1 for d in loss.shape):
        raise ShapeError(f"{what} must be a scalar loss (one element) to be differentiated, got {loss.type}; "
                         "reduce it first, e.g. with np.sum or np.mean")


def _lookup(program: Program, key: int | str) -> tuple[str, Value]:
    """An input by index or name, or a weight by name."""
    names = program.input_names
    if isinstance(key, int) or key.isdigit():
        if not 0 <= int(key) < len(names):
            raise JitlabError(f"@{program.name} has {len(names)} inputs; there is no input {key}")
        return names[int(key)], program.inputs[int(key)]
    if key in names:
        return key, program.inputs[names.index(key)]
    weights = {op.attrs["name"]: op.result for op in program.body.ops if op.name == "np.weight"}
    if key not in weights:
        raise JitlabError(f"@{program.name} has no input or weight {key!r}; its inputs are {', '.join(names)}"
                          + (f", its weights {', '.join(weights)}" if weights else ""))
    return key, weights[key]


def _differentiated(program: Program, wrt: Sequence[int | str] | None) -> list[tuple[str, Value]]:
    pairs = [(v.name, v) for v in program.inputs if v.dtype.kind == "f"] if wrt is None else \
        [_lookup(program, k) for k in wrt]
    for name, v in pairs:
        if v.dtype.kind != "f":
            raise DTypeError(f"{name!r} of @{program.name} is {v.type}: only floats can be differentiated")
    return pairs


def append_grads(program: Program, wrt: Sequence[int | str] | None = None, output: int = 0,
                 recompute: bool = False) -> list[Value]:
    """Appends to `program` the gradients of output `output` w.r.t. `wrt` (inputs by index or
    name, weights by name; None: every float input) as extra outputs, and returns them. With
    `recompute`, loops recompute their carried values instead of saving them (jl.grad's option)."""
    assign_names(program)       # inputs need names for messages and for naming their gradients
    outputs = list(program.outputs)
    if not 0 <= output < len(outputs):
        raise JitlabError(f"@{program.name} has {len(outputs)} outputs; there is no output {output}")
    check_loss(outputs[output], f"output {output} of @{program.name}")
    pairs = _differentiated(program, wrt)
    ret = program.return_op
    ctx = BackwardContext(program, Builder.before_op(ret, program.constraints), program.name, recompute)
    grads = backward(ctx, [op for op in program.body.ops if op is not ret], [v for _, v in pairs], outputs[output])
    for (name, _), g in zip(pairs, grads):
        if g.value.name is None:
            g.value.name = f"grad_{name}"
    program.set_outputs(outputs + [g.value for g in grads])
    return [g.value for g in grads]


def grad_program(program: Program, wrt: Sequence[int | str] | None = None, output: int = 0,
                 recompute: bool = False) -> Program:
    """A copy of `program` that also returns d(output)/d(v) for each input or weight v in `wrt`."""
    program = program.clone()
    append_grads(program, wrt, output, recompute)
    return program


@register_pass
@dataclass
class Grad(Pass):
    name = "grad"
    summary = ("Appends the backward graph: the gradients of one scalar output w.r.t. inputs "
               "become extra outputs.")
    wrt: tuple = ()     # inputs (names or indices) and weights (names), "x:w" in a pipeline; empty: float inputs
    output: int = 0     # which output is the loss
    recompute: bool = False     # loops recompute their carried values instead of saving one per iteration

    def apply(self, program: Program, ctx: PassContext) -> Program:
        forward = len(program.body) - 1
        grads = append_grads(program, self.wrt or None, self.output, self.recompute)
        names = ", ".join(v.name for v in grads)
        ctx.log.notes.append(f"grad: {forward} forward op(s), {len(program.body) - 1 - forward} backward op(s) "
                             f"giving {names}")
        return program

"""The `scf` dialect: structured control flow as region ops, after MLIR's `scf` and JAX's `lax`.

    %r = scf.for(%lo, %hi, %step, %init, %w) : f32[N] {
    ^bb(%i: i64[], %c: f32[N], %w_: f32[N]):
      %n = np.add(%c, %w_) : f32[N]
      scf.yield(%n)
    }

Every region op is isolated from the values above it, as a `jit.group` is and as JAX's closed
jaxprs are: what a body reads from outside comes in as an operand (a *capture*, after the
loop's own operands) and as a block argument of each of its regions. Generic passes then see
every use at the level of the op (schedules, liveness and memory plans need nothing special),
and a backend can compile a region as a program of its own. The operands of each op:

- `scf.for(lo, hi, step, init..., capture...)`: lo, hi and step are i64 scalars; one result
  per carried value. Its body's arguments are (i, carried..., capture...) and it ends with
  `scf.yield(next carried...)`. It runs `for i in range(lo, hi, step)`, Python's semantics.
- `scf.while(init..., capture...)`: a "before" region (carried..., capture...) ending with
  `scf.condition(bool[])`, and an "after" region of the same arguments ending with
  `scf.yield(next carried...)`; `max_iterations` bounds it (an InputError past it).
- `scf.if(pred, capture...)`: two regions of arguments (capture...), each ending with
  `scf.yield(results...)`; `pred` is a bool scalar.

Carried values keep their type (shape, symbolic dims included, and dtype) from iteration to
iteration: the verifier checks that each block argument, init and yield agree.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..errors import InputError, JitlabError, VerifyError
from ..ir.attributes import OPT_INT, Attr
from ..ir.core import Block, Operation
from ..ir.opdef import Trait, defop
from ..ir.program import Program
from ..ir.types import TensorType
from .reference import Interpreter, handles

INDEX = np.dtype(np.int64)
RegionRunner = Callable[[int, list], list]      # (region number, its arguments) -> its terminator's operands


def _types(values) -> str:
    return "(" + ", ".join(str(v.type) for v in values) + ")"


def _check_args(op: Operation, region: int, expected: Sequence[TensorType], what: str) -> None:
    block = op.regions[region].blocks[0]
    got = [a.type for a in block.args]
    if got != list(expected):
        raise VerifyError(f"{what} arguments {_types(block.args)} differ from the expected "
                          f"({', '.join(map(str, expected))})")


def _check_terminator(op: Operation, region: int, name: str, expected: Sequence[TensorType], what: str) -> None:
    term = op.regions[region].blocks[0].last_op
    if term is None or term.name != name:
        raise VerifyError(f"{what} must end with {name}, it ends with {term.name if term else 'nothing'}")
    got = [v.type for v in term.operands]
    if got != list(expected):
        raise VerifyError(f"{what}'s {name} gives {_types(term.operands)} but the loop carries "
                          f"({', '.join(map(str, expected))})" if op.name != "scf.if" else
                          f"{what}'s {name} gives {_types(term.operands)} but scf.if returns "
                          f"({', '.join(map(str, expected))})")


def _check_single_blocks(op: Operation) -> None:
    for r, region in enumerate(op.regions):
        if len(region.blocks) != 1:
            raise VerifyError(f"region {r} has {len(region.blocks)} blocks; scf regions have one")


def _check_scalar(value, kind: str, what: str) -> None:
    t = value.type
    if t.rank != 0 or (kind == "b" and t.dtype != np.bool_) or (kind == "i" and t.dtype != INDEX):
        want = "a bool[] scalar" if kind == "b" else "an i64[] scalar"
        raise VerifyError(f"{what} must be {want}, got {t}")


def _verify_for(op: Operation) -> None:
    _check_single_blocks(op)
    n = len(op.results)
    if len(op.operands) < 3 + n:
        raise VerifyError(f"takes lower, upper, step and {n} initial value(s), got {len(op.operands)} operand(s)")
    for v, what in zip(op.operands[:3], ("the lower bound", "the upper bound", "the step")):
        _check_scalar(v, "i", what)
    carried = [r.type for r in op.results]
    inits = [v.type for v in op.operands[3:3 + n]]
    if inits != carried:
        raise VerifyError(f"initial values {_types(op.operands[3:3 + n])} differ from the results "
                          f"{_types(op.results)}: carried values keep their type")
    captures = [v.type for v in op.operands[3 + n:]]
    _check_args(op, 0, [TensorType((), INDEX), *carried, *captures], "the body's")
    _check_terminator(op, 0, "scf.yield", carried, "the body")


def _verify_while(op: Operation) -> None:
    _check_single_blocks(op)
    n = len(op.results)
    carried = [r.type for r in op.results]
    if [v.type for v in op.operands[:n]] != carried:
        raise VerifyError(f"initial values {_types(op.operands[:n])} differ from the results "
                          f"{_types(op.results)}: carried values keep their type")
    args = [*carried, *(v.type for v in op.operands[n:])]
    _check_args(op, 0, args, "the before region's")
    _check_args(op, 1, args, "the after region's")
    cond = op.regions[0].blocks[0].last_op
    if cond is None or cond.name != "scf.condition":
        raise VerifyError("the before region must end with scf.condition")
    _check_scalar(cond.operands[0], "b", "the condition")
    _check_terminator(op, 1, "scf.yield", carried, "the after region")


def _verify_if(op: Operation) -> None:
    _check_single_blocks(op)
    _check_scalar(op.operands[0], "b", "the predicate")
    captures = [v.type for v in op.operands[1:]]
    results = [r.type for r in op.results]
    for r, what in ((0, "the then region"), (1, "the else region")):
        _check_args(op, r, captures, f"{what}'s")
        _check_terminator(op, r, "scf.yield", results, what)


FOR = defop("scf.for", operands=(3, None), traits=(Trait.PURE, Trait.ISOLATED), regions=1,
            operand_names=("lower", "upper", "step"),
            doc="A counted loop: for i in range(lower, upper, step), carrying values through its body.")
FOR.rules["verify"] = _verify_for

WHILE = defop("scf.while", operands=(0, None), traits=(Trait.PURE, Trait.ISOLATED), regions=2,
              attrs={"max_iterations": Attr(OPT_INT, None, doc="an InputError once the body has run this often "
                                            "and the condition still holds; none: no bound")},
              doc="A while loop: the before region computes the condition from the carried values, the "
                  "after region the next carried values.")
WHILE.rules["verify"] = _verify_while

IF = defop("scf.if", operands=(1, None), traits=(Trait.PURE, Trait.ISOLATED), regions=2,
           operand_names=("pred",),
           doc="A conditional: runs the then or the else region on the predicate; each yields the results.")
IF.rules["verify"] = _verify_if

YIELD = defop("scf.yield", operands=(0, None), traits=(Trait.TERMINATOR,),
              doc="Ends a loop body (the next carried values) or an if branch (its results).")
CONDITION = defop("scf.condition", operands=1, traits=(Trait.TERMINATOR,),
                  doc="Ends a while loop's before region: whether to run the body again.")

REGION_OPS = ("scf.for", "scf.while", "scf.if")


def where(op: Operation) -> str:
    """`scf.for at file:line` for messages."""
    return op.name + (f" at {op.loc}" if op.loc is not None else "")


def run_for(op: Operation, args: list, run_region: RegionRunner) -> list:
    """Runs an scf.for on concrete arrays; `run_region` runs its body."""
    n = len(op.results)
    lo, hi, step = (int(a) for a in args[:3])
    if step == 0:
        raise InputError(f"{where(op)}: the step is 0")
    carried, captures = list(args[3:3 + n]), list(args[3 + n:])
    for k, i in enumerate(range(lo, hi, step)):
        with _iteration(op, k):
            carried = run_region(0, [np.asarray(i, INDEX), *carried, *captures])
    return carried


def run_while(op: Operation, args: list, run_region: RegionRunner) -> list:
    """Runs an scf.while on concrete arrays; `run_region` runs its two regions."""
    n = len(op.results)
    carried, captures = list(args[:n]), list(args[n:])
    bound, k = op.attrs["max_iterations"], 0
    while True:
        with _iteration(op, k):
            (go,) = run_region(0, [*carried, *captures])
            if not bool(go):
                return carried
            if bound is not None and k >= bound:
                raise InputError(f"{where(op)}: the loop has run max_iterations={bound} times and its "
                                 "condition still holds")
            carried = run_region(1, [*carried, *captures])
        k += 1


def run_if(op: Operation, args: list, run_region: RegionRunner) -> list:
    """Runs an scf.if on concrete arrays; `run_region` runs the branch taken."""
    return run_region(0 if bool(args[0]) else 1, list(args[1:]))


RUNNERS: dict[str, Callable[[Operation, list, RegionRunner], list]] = {
    "scf.for": run_for, "scf.while": run_while, "scf.if": run_if}


class _iteration:
    """Adds the iteration and the loop to an error raised inside a loop's body."""

    def __init__(self, op: Operation, k: int):
        self.op, self.k = op, k

    def __enter__(self):
        return self

    def __exit__(self, kind, error, tb):
        if error is None or not isinstance(error, JitlabError):
            return False
        try:
            noted = type(error)(f"{error} (iteration {self.k} of the {where(self.op)})")
        except TypeError:           # an error class with more arguments than a message: as it is
            return False
        raise noted from None


@handles(*REGION_OPS)
def _interpret(interp: Interpreter, op: Operation, args):
    return RUNNERS[op.name](op, list(args), lambda r, a: interp.run_region(op, r, a))


def body_block(op: Operation, region: int = 0) -> Block:
    """The single block of region `region` of an scf op."""
    return op.regions[region].blocks[0]


def region_program(op: Operation, region: int, program: Program) -> Program:
    """Region `region` of an scf op as a program of its own: its block arguments are the inputs, its
    terminator's operands the outputs (a backend compiles each body once this way)."""
    block = body_block(op, region)
    sub = Program(f"{program.name}_{op.name[4:]}{op.uid}_{region}", [a.type for a in block.args],
                  [a.name for a in block.args], program.weights, program.constraints.copy())
    mapping = dict(zip(block.args, sub.inputs))
    for inner in block.ops:
        if inner.has(Trait.TERMINATOR):
            sub.set_outputs([mapping[v] for v in inner.operands])
        else:
            sub.body.append(inner.clone(mapping, fresh_uid=True))
    return sub

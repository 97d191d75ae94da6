"""Random programs with control flow for property tests: a random `np` program (tests/programs.py)
wrapped as the body of an scf.for, scf.while or scf.if, with an oracle that runs the body program
in a Python loop through the reference interpreter."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from jitlab.dialects.reference import run_reference
from jitlab.ir import Block, Builder, Dense, Operation, Program, Region, TensorType
from tests.programs import programs

I64 = TensorType((), np.int64)


@dataclass
class LoopCase:
    """A program whose body is a random program run in a loop or a branch, its inputs, and the answer."""

    program: Program
    inputs: list[np.ndarray]
    expected: list[np.ndarray]

    def __repr__(self) -> str:
        return f"LoopCase(inputs={[a.shape for a in self.inputs]})\n{self.program}"


def _clone_body(block: Block, body: Program, args: list, carried_index: int) -> None:
    """Clones `body`'s ops into `block` with its inputs read from `args`; yields the first output of the
    carried input's type (else the carried value unchanged)."""
    mapping = dict(zip(body.inputs, args))
    for op in body.body.ops:
        if op.name != "func.return":
            block.append(op.clone(mapping, fresh_uid=True))
    carried = body.inputs[carried_index]
    out = next((mapping[v] for v in body.outputs if v.type == carried.type), mapping[carried])
    block.append(Operation("scf.yield", [out]))


def _next_value(body: Program, inputs: list[np.ndarray]) -> np.ndarray:
    outs = run_reference(body, inputs)
    return next((o for v, o in zip(body.outputs, outs) if v.type == body.inputs[0].type), inputs[0])


def _for(body: Program, inputs: list[np.ndarray], trips: int) -> LoopCase:
    types = [a.type for a in body.inputs]
    program = Program("loop", [*types, I64], [*(a.name for a in body.inputs), "n"])
    b = Builder(program.body)
    zero, one = (b.create("np.constant", attrs={"value": Dense(np.asarray(k, np.int64))}).result for k in (0, 1))
    x, *rest = program.inputs[:-1]
    block = Block([I64, types[0], *types[1:]])
    _clone_body(block, body, block.args[1:], 0)
    loop = Operation("scf.for", [zero, program.inputs[-1], one, x, *rest], [types[0]], regions=[Region([block])])
    program.body.append(loop)
    program.set_outputs([loop.result])
    value = inputs[0]
    for _ in range(trips):
        value = _next_value(body, [value, *inputs[1:]])
    return LoopCase(program, [*inputs, np.int64(trips)], [value])


def _if(body: Program, inputs: list[np.ndarray], taken: bool) -> LoopCase:
    types = [a.type for a in body.inputs]
    program = Program("branch", [*types, TensorType((), np.bool_)], [*(a.name for a in body.inputs), "p"])
    blocks = [Block(types), Block(types)]
    _clone_body(blocks[0], body, blocks[0].args, 0)
    blocks[1].append(Operation("scf.yield", [blocks[1].args[0]]))
    op = Operation("scf.if", [program.inputs[-1], *program.inputs[:-1]], [types[0]],
                   regions=[Region([blk]) for blk in blocks])
    program.body.append(op)
    program.set_outputs([op.result])
    expected = _next_value(body, inputs) if taken else inputs[0]
    return LoopCase(program, [*inputs, np.bool_(taken)], [expected])


def _while(body: Program, inputs: list[np.ndarray], trips: int) -> LoopCase:
    """`while k < n: x, k = body(x), k + 1`: the counter is a second carried value."""
    types = [a.type for a in body.inputs]
    program = Program("while", [*types, I64], [*(a.name for a in body.inputs), "n"])
    b = Builder(program.body)
    zero = b.create("np.constant", attrs={"value": Dense(np.asarray(0, np.int64))}).result
    x, *rest = program.inputs[:-1]
    arg_types = [types[0], I64, *types[1:], I64]
    before, after = Block(arg_types), Block(arg_types)
    bb = Builder(before)
    before.append(Operation("scf.condition", [bb("np.less", before.args[1], before.args[-1])]))
    _clone_body(after, body, [after.args[0], *after.args[2:-1]], 0)
    new_x = after.last_op.operands[0]
    after.last_op.erase()
    ab = Builder(after)
    one = ab.create("np.constant", attrs={"value": Dense(np.asarray(1, np.int64))}).result
    after.append(Operation("scf.yield", [new_x, ab("np.add", after.args[1], one)]))
    op = Operation("scf.while", [x, zero, *rest, program.inputs[-1]], [types[0], I64],
                   regions=[Region([before]), Region([after])])
    program.body.append(op)
    program.set_outputs([op.results[0]])
    value = inputs[0]
    for _ in range(trips):
        value = _next_value(body, [value, *inputs[1:]])
    return LoopCase(program, [*inputs, np.int64(trips)], [value])


@st.composite
def loop_programs(draw, max_ops: int = 8, dtypes=("f32", "f64"), kinds=("for", "while", "if")) -> LoopCase:
    """A random body in a random control-flow op, with inputs and the expected results."""
    case = draw(programs(max_ops=max_ops, dtypes=dtypes, allow_empty=False))
    kind = draw(st.sampled_from(kinds))
    if kind == "if":
        return _if(case.program, case.inputs, draw(st.booleans()))
    make = _for if kind == "for" else _while
    return make(case.program, case.inputs, draw(st.integers(0, 3)))

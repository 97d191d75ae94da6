"""Repro files: a program's IR text, its weights and its inputs in one `.npz`, so that
`jl.parse` + `jl.compile` replay a pass input or a single group anywhere."""

from __future__ import annotations

import pathlib
from collections.abc import Sequence

import numpy as np

from ..dialects.reference import Interpreter
from ..errors import JitlabError, ShapeError
from ..ir.core import Operation
from ..ir.parser import parse
from ..ir.printer import print_program
from ..ir.program import Program
from ..ir.shapes import evaluate_shape

IR_KEY = "__ir__"
PAGE_LIMIT = 6000        # characters of IR text a group's repro may take in the explorer's data


def save(path: str | pathlib.Path, program: Program, inputs: Sequence[np.ndarray]) -> pathlib.Path:
    """Writes `program`'s text, weights and `inputs` (one per program input) to `path`."""
    if len(inputs) != len(program.inputs):
        raise JitlabError(f"repro of @{program.name}: {len(program.inputs)} inputs expected, got {len(inputs)}")
    arrays = {IR_KEY: np.array(print_program(program))}
    arrays.update({f"in{i}": np.asarray(x) for i, x in enumerate(inputs)})
    arrays.update({f"w:{k}": np.asarray(v) for k, v in program.weights.items()})
    path = pathlib.Path(path)
    with path.open("wb") as f:
        np.savez(f, **arrays)
    return path


def load(path: str | pathlib.Path) -> tuple[Program, list[np.ndarray]]:
    """The program (with its weights) and the inputs saved by `save`."""
    with np.load(path, allow_pickle=False) as data:
        if IR_KEY not in data:
            raise JitlabError(f"{path} is not a jitlab repro file (no IR text in it)")
        weights = {k[2:]: data[k] for k in data.files if k.startswith("w:")}
        program = parse(str(data[IR_KEY]), weights=weights)
        inputs = [data[f"in{i}"] for i in range(len(program.inputs))]
    return program, inputs


def find_group(program: Program, gid: int) -> Operation:
    for op in program.walk():
        if op.name == "jit.group" and op.attrs.get("id") == gid:
            return op
    raise JitlabError(f"@{program.name} has no jit.group with id {gid}")


def group_program(program: Program, gid: int) -> Program:
    """Group `gid` of `program` as a standalone program over its operands."""
    group = find_group(program, gid)
    block = group.body
    sub = Program(f"{program.name}_group{gid}", [a.type for a in block.args], [a.name for a in block.args],
                  program.weights)
    mapping = dict(zip(block.args, sub.inputs))
    for op in block.ops:
        if op.name != "jit.yield":
            sub.body.append(op.clone(mapping))
    sub.set_outputs([mapping[v] for v in block.last_op.operands])
    return sub


def group_repro(program: Program, gid: int, bindings=None) -> dict | None:
    """Group `gid`'s IR text and its inputs' names, types and shapes (at `bindings`), for the explorer's
    repro action; None when the text is over PAGE_LIMIT, reads weights (which the page cannot carry) or
    has a dim `bindings` leaves unknown."""
    sub = group_program(program, gid)
    text = print_program(sub)
    if len(text) > PAGE_LIMIT or any(op.name == "np.weight" for op in sub.walk()):
        return None
    try:
        shapes = [list(evaluate_shape(v.type.shape, bindings or {})) for v in sub.inputs]
    except ShapeError:
        return None
    return {"ir": text, "inputs": [{"name": v.name, "type": str(v.type), "dtype": v.type.dtype.name, "shape": shape}
                                   for v, shape in zip(sub.inputs, shapes)]}


def sample_inputs(program: Program, bindings=None, seed: int = 0) -> list[np.ndarray]:
    """Seeded random inputs of `program`'s input types: normal floats, small integers, random booleans."""
    rng = np.random.default_rng(seed)
    out = []
    for v in program.inputs:
        shape, dtype = evaluate_shape(v.type.shape, bindings or {}), v.type.dtype
        if dtype.kind == "b":
            out.append(rng.random(shape) < 0.5)
        elif dtype.kind in "iu":
            out.append(rng.integers(0, 4, shape).astype(dtype))
        else:
            out.append(rng.standard_normal(shape).astype(dtype))
    return out


class _Capture(Interpreter):
    """Runs a program and keeps the operand values of one op."""

    def __init__(self, program: Program, target: Operation, bindings=None):
        super().__init__(program, bindings)
        self.target, self.captured = target, None

    def run_op(self, op, args):
        if op is self.target:
            self.captured = list(args)
        return super().run_op(op, args)


def group_inputs(program: Program, gid: int, inputs: Sequence[np.ndarray], bindings=None) -> list[np.ndarray]:
    """The values flowing into group `gid` when `program` runs on `inputs` (at O0)."""
    capture = _Capture(program, find_group(program, gid), bindings)
    capture.run([np.asarray(x) for x in inputs])
    return capture.captured


def export(session, path: str | pathlib.Path, inputs: Sequence[np.ndarray], *, group: int | None = None,
           pass_index: int | None = None) -> pathlib.Path:
    """A repro of what `session` explores: the whole program, one pass's input, or one group."""
    from ..runtime.signature import check_inputs

    source = session.program
    if source is None:
        raise JitlabError("a repro needs the program: explore an Executable, a jitted function or a Program")
    arrays, bindings = check_inputs(source, tuple(inputs), list(source.input_names))
    if group is not None:
        compiled = session.exe.program if session.exe is not None else source
        return save(path, group_program(compiled, group), group_inputs(compiled, group, arrays, bindings))
    if pass_index is not None:
        passes = session.report.passes
        if not 0 <= pass_index < len(passes):
            raise JitlabError(f"no pass run number {pass_index}; there are {len(passes)}")
        return save(path, parse(passes[pass_index].before, weights=source.weights), arrays)
    return save(path, source, arrays)

"""Shapes of a compiled program for other input shapes, for dry runs of static programs.

A dim an input was traced with (`x: f32[512,784]`) becomes a symbol (`d512`) wherever the
dry run asks for another size, and every op's result types are inferred again from its
operands, groups and their bodies included. Shape attributes that spelled the old size
(a reshape to `[512, 784]`, a slice up to 512) are rewritten with the symbol when the op's
operands carry it and the rewritten op infers. Nothing is run or allocated: one re-inferred
program serves every size, and for a static program `concretize` puts each size back in,
so the plan is the one a compile at that size makes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..errors import InputError, JitlabError
from ..ir.attributes import SHAPE
from ..ir.builder import infer_types
from ..ir.core import Block, Operation
from ..ir.program import Program
from ..ir.shapes import Sym, evaluate, evaluate_shape, num_elements, sym

Position = tuple[str, int]      # (input name, axis)


def changed_dims(program: Program, shapes: Mapping[str, Sequence[int]],
                 names: Sequence[str]) -> dict[Position, tuple[int, int]]:
    """The static input dims `shapes` gives other sizes: (input, axis) -> (traced size, new size)."""
    out = {}
    for name, v in zip(names, program.inputs):
        shape = shapes.get(name)
        if shape is None or len(shape) != v.type.rank:
            continue
        for axis, (d, n) in enumerate(zip(v.type.shape, shape)):
            if isinstance(d, int) and int(n) != d:
                out[(name, axis)] = (d, int(n))
    return out


def symbols_for(changed: Mapping[Position, tuple[int, int]]) -> dict[Position, str]:
    """One symbol per (traced size, new size): dims that meet in the program must stay equal."""
    names: dict[tuple[int, int], str] = {}
    olds: dict[int, int] = {}
    for old, new in sorted(set(changed.values())):
        olds[old] = olds.get(old, 0) + 1
        names[(old, new)] = f"d{old}" if olds[old] == 1 else f"d{old}_{olds[old] - 1}"
    return {pos: names[pair] for pos, pair in changed.items()}


def reinfer(program: Program, symbols: Mapping[Position, str], names: Sequence[str]) -> Program:
    """A copy of `program` whose inputs have the symbols at these positions, every type inferred again."""
    new = program.clone()
    olds: dict[str, int] = {}
    for name, v in zip(names, new.inputs):
        dims = list(v.type.shape)
        for axis, d in enumerate(dims):
            if (name, axis) in symbols:
                olds[symbols[(name, axis)]] = d
                dims[axis] = sym(symbols[(name, axis)])
        v.type = v.type.with_shape(tuple(dims))
    _Reinfer(olds, new.constraints).block(new.body)
    return new


class _Reinfer:
    def __init__(self, olds: dict[str, int], constraints):
        self.olds = olds            # symbol -> the size it replaces
        self.constraints = constraints      # the copy's: symbolic programs' dims may meet the new symbols
        self.names = set(olds)
        self.by_old = {old: s for s, old in olds.items()}

    def block(self, block: Block) -> None:
        for op in block.ops:
            if op.regions:
                self.region_op(op)
            elif op.opdef.infer is not None:
                self.op(op)
        for op in block.ops:
            if op.name == "mem.alloc":
                self.alloc(op)

    def region_op(self, op: Operation) -> None:
        inner = op.body
        for arg, v in zip(inner.args, op.operands):
            arg.type = v.type
        self.block(inner)
        for r, v in zip(op.results, inner.last_op.operands):
            r.type = v.type

    def op(self, op: Operation) -> None:
        types = [v.type for v in op.operands]
        carries = any(isinstance(d, Sym) and d.symbols & self.names for t in types for d in t.shape)
        for attrs in [*(self.candidates(op, types) if carries else []), op.attrs]:
            try:
                results = infer_types(op.opdef, types, attrs, self.constraints)
            except JitlabError:
                continue
            op.attrs = attrs
            for r, t in zip(op.results, results):
                r.type = t
            return
        raise InputError(f"dry run: cannot infer the shapes of {op.name} (%{op.results[0].name}) for the new input "
                         f"sizes ({', '.join(f'{s}={old}' for s, old in self.olds.items())} changed); its operands are "
                         f"{', '.join(str(t) for t in types)}" + (f" ({op.loc})" if op.loc else ""))

    def candidates(self, op: Operation, types: list) -> list[dict]:
        """The op's attributes with shape entries that spelt a replaced size spelt as its symbol:
        entries per axis (a slice's stops) only where the operand's dim carries the symbol; a
        shape of another rank (a reshape's) everywhere, then one entry at a time."""
        out = []
        for key, schema in op.opdef.attrs.items():
            value = op.attrs.get(key)
            if schema.kind is not SHAPE or not isinstance(value, tuple):
                continue
            hits = [k for k, d in enumerate(value) if isinstance(d, int) and d in self.by_old]
            if types and len(value) == types[0].rank:
                hits = [k for k in hits if self._carries(types[0].shape[k], value[k])]
                choices = [hits] if hits else []
            else:
                choices = [hits] + [[k] for k in hits] if len(hits) > 1 else [hits] if hits else []
            for ks in choices:
                new = list(value)
                for k in ks:
                    new[k] = sym(self.by_old[value[k]])
                out.append({**op.attrs, key: tuple(new)})
        return out

    def _carries(self, dim, old: int) -> bool:
        return isinstance(dim, Sym) and self.by_old[old] in dim.symbols

    def alloc(self, op: Operation) -> None:
        from ..dialects.mem import served_value

        v = served_value(op)
        op.attrs = {**op.attrs, "bytes": num_elements(v.type.shape) * v.type.dtype.itemsize}


def with_shapes(program: Program, shapes: Mapping[str, Sequence[int]] | None,
                names: Sequence[str]) -> tuple[Program, dict[Position, str]]:
    """`program`, or its re-inferred copy when `shapes` changes static dims, and the symbols it got."""
    changed = changed_dims(program, shapes or {}, names)
    if not changed:
        return program, {}
    symbols = symbols_for(changed)
    return reinfer(program, symbols, names), symbols


def concretize(program: Program, bindings: Mapping[str, int]) -> Program:
    """A copy of `program` with `bindings` put in for its symbols: static again, so its plan is
    the one a compile at those sizes makes (static plans let temporaries borrow outputs)."""
    new = program.clone()
    for v in new.inputs:
        v.type = v.type.with_shape(evaluate_shape(v.type.shape, bindings))
    for op in new.walk():
        for block in (b for region in op.regions for b in region.blocks):
            for arg in block.args:
                arg.type = arg.type.with_shape(evaluate_shape(arg.type.shape, bindings))
        for r in op.results:
            r.type = r.type.with_shape(evaluate_shape(r.type.shape, bindings))
        op.attrs = {k: _concrete(v, op.opdef.attrs.get(k), bindings) for k, v in op.attrs.items()}
    new.constraints = type(new.constraints)()
    return new


def _concrete(value, schema, bindings: Mapping[str, int]):
    if isinstance(value, Sym):
        return evaluate(value, bindings)
    if schema is not None and schema.kind is SHAPE and isinstance(value, tuple):
        return tuple(evaluate(d, bindings) for d in value)
    return value

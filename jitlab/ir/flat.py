"""A Program as flat data (lists of op records, values by number), for pickling.

Pickling the linked IR directly recurses once per op along the blocks' linked lists and
the use chains, which overflows the stack on a large program; the flat form recurses only
per nested region. Op uids and value names are kept, so a report recorded for the program
still refers to its ops.
"""

from __future__ import annotations

from .core import Block, Operation, Region, Value, reserve_uids

FORMAT = 2


def flatten_program(program) -> tuple:
    """The program's name, inputs, body, weights, constraints and inputs' own names as plain nested tuples."""
    ids: dict[Value, int] = {}
    body = _flatten_block(program.body, ids)
    return (FORMAT, program.name, body, program.weights, program.constraints, program.own_names)


def _flatten_block(block: Block, ids: dict[Value, int]) -> tuple:
    args = []
    for a in block.args:
        ids[a] = len(ids)
        args.append((a.type, a.name))
    return (args, [_flatten_op(op, ids) for op in block.ops])


def _flatten_op(op: Operation, ids: dict[Value, int]) -> tuple:
    operands = [ids[v] for v in op.operands]
    regions = [[_flatten_block(b, ids) for b in r.blocks] for r in op.regions]
    results = []
    for r in op.results:
        ids[r] = len(ids)
        results.append((r.type, r.name))
    return (op.name, operands, results, op.attrs, regions, op.uid, op.loc)


def unflatten_program(data: tuple):
    """The Program `flatten_program` described, with the same op uids and value names."""
    from .program import Program

    if data[0] != FORMAT:
        raise ValueError(f"flat program format {data[0]}, expected {FORMAT}")
    _, name, (args, ops), weights, constraints, own_names = data
    program = Program(name, [t for t, _ in args], [n for _, n in args], weights, constraints)
    program.own_names = dict(own_names)
    values: list[Value] = list(program.inputs)
    top = _fill_block(program.body, ops, values)
    reserve_uids(top)
    return program


def _fill_block(block: Block, ops: list, values: list[Value]) -> int:
    """Appends the ops to `block`; returns the largest uid among them (nested ones included)."""
    top = -1
    for name, operands, results, attrs, regions, uid, loc in ops:
        region_objs = []
        for blocks in regions:
            built = []
            for args, inner in blocks:
                b = Block([t for t, _ in args], [n for _, n in args])
                values.extend(b.args)
                top = max(top, _fill_block(b, inner, values))
                built.append(b)
            region_objs.append(Region(built))
        op = Operation(name, [values[i] for i in operands], [t for t, _ in results], attrs, region_objs, loc, uid)
        for r, (_, value_name) in zip(op.results, results):
            r.name = value_name
        values.extend(op.results)
        block.append(op)
        top = max(top, uid)
    return top

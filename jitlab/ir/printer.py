"""IR text: an MLIR-like form that `parser.parse` reads back to an identical print.

    func @f(%x: f32[B,4]) -> (f32[B,4]) {
      %0 = np.exp(%x) : f32[B,4]
      %1 = np.sum(%0) {axes = [1], keepdims = true} : f32[B,1]
      %2 = np.div(%0, %1) : f32[B,4]
      func.return(%2)
    }

Value names stick once assigned, so a value keeps its name from pass to pass and the
explorer's before/after diffs show only what changed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .attributes import REQUIRED, format_attr
from .core import Block, Operation, Value

_NAME_OK = re.compile(r"^[A-Za-z_][A-Za-z0-9_.$]*$|^[0-9]+$")


def _values_in_order(block: Block) -> Iterable[Value]:
    yield from block.args
    for op in block.ops:
        yield from op.results
        for region in op.regions:
            for inner in region.blocks:
                yield from _values_in_order(inner)


def assign_names(program_or_block) -> None:
    """Gives every value a unique printed name, keeping the names it already has."""
    block = getattr(program_or_block, "body", program_or_block)
    values = list(_values_in_order(block))
    taken: set[str] = set()
    for v in values:
        if v.name is None:
            continue
        name = v.name if _NAME_OK.match(v.name) else re.sub(r"[^A-Za-z0-9_.$]", "_", v.name) or "v"
        if not _NAME_OK.match(name):
            name = "v" + name
        base, k = name, 1
        while name in taken:
            name, k = f"{base}_{k}", k + 1
        v.name = name
        taken.add(name)
    counter = 0
    for v in values:
        if v.name is None:
            while str(counter) in taken:
                counter += 1
            v.name = str(counter)
            taken.add(v.name)


def _attrs_text(op: Operation) -> str:
    items = []
    for key, spec in op.opdef.attrs.items():
        value = op.attrs[key]
        if spec.default is not REQUIRED and _same(value, spec.default):
            continue
        items.append(f"{key} = {format_attr(value)}")
    return " {" + ", ".join(items) + "}" if items else ""


def _same(a, b) -> bool:
    return type(a) is type(b) and a == b


def print_op(op: Operation, indent: str = "", locs: bool = False) -> str:
    """The text of one op with its regions (values not yet named print as %?)."""
    lines = [indent + _op_line(op, locs)]
    for i, region in enumerate(op.regions):
        for block in region.blocks:
            lines.append(indent + "^bb(" + ", ".join(f"%{_name(a)}: {a.type}" for a in block.args) + "):")
            for inner in block.ops:
                lines.append(print_op(inner, indent + "  ", locs))
        lines.append(indent + ("}" if i == len(op.regions) - 1 else "} {"))
    return "\n".join(lines)


def op_line(op: Operation) -> str:
    """One op's own line (without its regions' bodies), as the program prints it."""
    return _op_line(op, False)


def _op_line(op: Operation, locs: bool) -> str:
    results = ", ".join(f"%{_name(r)}" for r in op.results)
    text = (results + " = " if results else "") + op.name
    text += "(" + ", ".join(f"%{_name(v)}" for v in op.operands) + ")"
    text += _attrs_text(op)
    if op.results:
        text += " : " + ", ".join(str(r.type) for r in op.results)
    elif op.regions:
        text += " : ()"
    if locs and op.loc is not None:
        scope = " scope [" + ", ".join(map(format_attr, op.loc.scope)) + "]" if op.loc.scope else ""
        text += f" loc({format_attr(op.loc.file)}:{op.loc.line}{scope})"
    if op.regions:
        text += " {"
    return text


def _name(v: Value) -> str:
    return v.name if v.name is not None else "?"


def print_program(program, locs: bool = False) -> str:
    """The whole program as text."""
    assign_names(program)
    args = ", ".join(f"%{a.name}: {a.type}" for a in program.inputs)
    term = program.body.terminator
    outs = ", ".join(str(v.type) for v in term.operands) if term is not None else ""
    header = f"func @{program.name}({args}) -> ({outs})"
    if len(program.constraints):
        header += " where " + ", ".join(f"{a} == {b}" for a, b in program.constraints)
    lines = [header + " {"]
    lines += [print_op(op, "  ", locs) for op in program.body.ops]
    lines.append("}")
    return "\n".join(lines) + "\n"

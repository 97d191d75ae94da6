"""The `mem` dialect: buffer allocation and release made visible in the IR (O1's dynamic mode).

    mem.alloc() {value = "3", bytes = 16*B}    // before the op that defines %3
    %3 = np.exp(%x) : f32[B,4]
    mem.reuse(%3) {value = "4"}                // %4 is written in place into %3's buffer
    %4 = np.neg(%3) : f32[B,4]
    mem.free(%3)                               // after the last use of %3's buffer

An allocation must come before the value it backs exists, so `mem.alloc` cannot take that
value as an operand without breaking SSA dominance; it names it by an attribute instead,
and the verifier checks that the next op defines that name. `mem.free` comes after the
last use, so it takes the buffer's owner (the value its `mem.alloc` named) as a plain
operand: the use list then shows where each buffer dies. `mem.reuse` hands the buffer of
its operand, which dies at the next op, to a result of that op.
"""

from __future__ import annotations

from ..errors import VerifyError
from ..ir.attributes import STR, Attr, AttrKind, one_of
from ..ir.core import Operation, OpResult, Value
from ..ir.opdef import Trait, defop
from ..ir.shapes import Sym


def _dim(v):
    if isinstance(v, Sym):
        return v
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise TypeError
    return v


DIM = AttrKind("byte count (an int >= 0 or a symbolic dim)", _dim)
MEMORY = (Trait.MEMORY,)


def is_mem_op(op: Operation) -> bool:
    return op.opdef.dialect == "mem"


def next_compute_op(op: Operation) -> Operation | None:
    """The first op after `op` that is not a mem op: the one a mem.alloc or mem.reuse serves."""
    nxt = op.next_op
    while nxt is not None and is_mem_op(nxt):
        nxt = nxt.next_op
    return nxt


def served_value(op: Operation) -> Value:
    """The result of the next compute op that a mem.alloc or mem.reuse names."""
    name = op.attrs["value"]
    target = next_compute_op(op)
    for r in target.results if target is not None else ():
        if r.name == name:
            return r
    where = f"the next op ({target.name})" if target is not None else "no op (it ends the block)"
    raise VerifyError(f"names %{name}, but {where} does not define it")


def _is_kept(v: Value) -> str | None:
    """Why compiled code may never free `v`'s buffer (an input, weight or output), or None."""
    if not isinstance(v, OpResult):
        return "a program input"
    if v.op.name == "np.weight":
        return "a weight"
    if v.op.has(Trait.CONSTANT):
        return "a constant"
    if any(u.op.name == "func.return" for u in v.uses):
        return "a program output"
    return None


def _verify_alloc(op: Operation) -> None:
    served_value(op)


def _verify_reuse(op: Operation) -> None:
    target = served_value(op)
    (source,) = op.operands
    kept = _is_kept(source)
    if kept:
        raise VerifyError(f"%{source.name} is {kept}: its buffer cannot be reused")
    if source.type != target.type:
        raise VerifyError(f"%{target.name} ({target.type}) cannot be written in place into "
                          f"%{source.name} ({source.type}): the types differ")


def _verify_free(op: Operation) -> None:
    (value,) = op.operands
    if isinstance(value, OpResult) and value.op.has(Trait.VIEW):
        raise VerifyError(f"%{value.name} is a view: free the value whose buffer it views")
    aliases = buffer_aliases(value)
    for alias in aliases:
        kept = _is_kept(alias)
        if kept:
            held = "" if alias is value else f" (its buffer holds %{alias.name})"
            raise VerifyError(f"%{value.name}{held} is {kept}: compiled code never frees it")
        for use in alias.uses:
            if use.op is not op and use.op.parent is op.parent and op.is_before_in_block(use.op):
                raise VerifyError(f"%{alias.name} (in the buffer of %{value.name}) is used by "
                                  f"{use.op.name} after it is freed")


def buffer_aliases(value: Value) -> list[Value]:
    """`value` and every value sharing its buffer: views of it and results reusing it in place."""
    out, stack = [], [value]
    while stack:
        v = stack.pop()
        out.append(v)
        for use in v.uses:
            user = use.op
            if user.has(Trait.VIEW) and use.index == 0:
                stack.extend(user.results)
            elif user.name == "mem.reuse":
                stack.append(served_value(user))
    return out


ALLOC = defop("mem.alloc", operands=0, traits=MEMORY,
              attrs={"value": Attr(STR, doc="name of the value (defined by the next op) this buffer backs"),
                     "bytes": Attr(DIM, doc="size of the buffer, symbolic when its shape is"),
                     "kind": Attr(one_of("temp", "output"), "temp",
                                  doc="temp buffers are freed by a mem.free; output buffers go to the caller")},
              doc="Allocates the buffer that the next op writes the named result into.")
ALLOC.rules["verify"] = _verify_alloc

REUSE = defop("mem.reuse", operands=1, traits=MEMORY,
              attrs={"value": Attr(STR, doc="name of the value (defined by the next op) written in place")},
              doc="The next op writes the named result in place into the buffer of the operand, which dies there.")
REUSE.rules["verify"] = _verify_reuse

FREE = defop("mem.free", operands=1, traits=MEMORY,
             doc="Returns the operand's buffer to the pool; no op after it uses the buffer.")
FREE.rules["verify"] = _verify_free

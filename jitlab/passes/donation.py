"""Donated inputs (`jl.jit(fn, donate_argnums=...)`, JAX's name): outputs written into the
caller's input arrays, so a training step does not hold two copies of its weights.

Each output takes at most one donated input of exactly its type, and each donated input
serves at most one output. How it is written is decided per output:

- "in place": the kernel producing the output writes straight into the donated array,
  because nothing reads the input afterwards and the producing step reads it, if at all,
  only element for element (a group made only of elementwise ops; with several results,
  a kernel that reads every input at an index before it writes any output there, as
  generated kernels do: an optimizer step updating weights and moments together), or it is
  a group of writes into the input that reads it only where no write has landed yet
  (dialects/np/writes.py);
- "copy": the output is computed into its own buffer and copied into the donated array
  when the call ends (the input is read later, or by a contraction in the same kernel).

Like JAX, the caller must not rely on a donated array's old content: after the call it
holds the new value. This module plans donations from the IR alone; the check at every call
(runtime/donation.py) falls back to returning results untouched when the donated array also
backs another argument or another result.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..dialects.np.writes import in_place_operand
from ..ir.core import Operation, Value
from ..ir.opdef import Trait
from ..ir.program import Program
from ..report import DonationRecord


def donation_pairs(program: Program, donated: Sequence[str]) -> list[DonationRecord]:
    """Matches program outputs to donated inputs of the same type, in output order."""
    free = [i for i, n in enumerate(program.input_names) if n in set(donated)]
    pairs: list[DonationRecord] = []
    for k, v in enumerate(program.outputs):
        op = getattr(v, "op", None)
        if op is None or op.has(Trait.VIEW) or op.has(Trait.CONSTANT) or op.name == "np.weight":
            continue            # an input, a view or a constant returned as is: no buffer to give
        match = next((i for i in free if program.inputs[i].type == v.type), None)
        if match is not None and v.type.is_static:
            free.remove(match)
            pairs.append(DonationRecord(output=k, output_name=v.name or f"out{k}", input=match,
                                        input_name=program.input_names[match],
                                        bytes=v.type.dtype.itemsize * int(np.prod(v.type.shape, dtype=np.int64))))
    return pairs


def _aliases(program: Program, value: Value) -> set[Value]:
    """`value` and every view of it, transitively."""
    found, stack = {value}, [value]
    while stack:
        for use in stack.pop().uses:
            if use.op.has(Trait.VIEW) and use.op.results and use.op.results[0] not in found:
                found.add(use.op.results[0])
                stack.append(use.op.results[0])
    return found


def _elementwise_only(op: Operation) -> bool:
    inner = op.body.ops if op.name == "jit.group" else [op]
    return all(o.has(Trait.ELEMENTWISE) or o.has(Trait.CONSTANT) or o.has(Trait.TERMINATOR) for o in inner)


def writes_in_place(program: Program, d: DonationRecord, ordered: bool = True) -> bool:
    """Whether the producer of output d may write into input d's array without a wrong answer;
    `ordered=False` leaves out the check that no step after the producer reads the input (the
    schedule pass orders the readers first)."""
    source = program.inputs[d.input]
    target = program.outputs[d.output]
    aliases = _aliases(program, source)
    if any(v in aliases for v in program.outputs):
        return False
    producer = target.op
    if ordered and _read_after(program, producer, aliases):
        return False
    reads = [v for v in producer.operands if v in aliases]
    if reads == [source] and in_place_operand(producer) == producer.operands.index(source):
        return True         # a group of writes into the input, reading it only where it is safe
    return not reads or (_elementwise_only(producer) and all(v is source for v in reads))


def _read_after(program: Program, producer: Operation, aliases: set[Value]) -> bool:
    """Whether a step after `producer` in block order reads one of `aliases`."""
    after = False
    for op in program.body.ops:
        if after and any(v in aliases for v in op.operands):
            return True
        after = after or op is producer
    return False


def in_place_pairs(program: Program, donated: Sequence[str], ordered: bool = True) -> list[DonationRecord]:
    """The donations whose output can be written straight into the donated array (see writes_in_place)."""
    return [d for d in donation_pairs(program, donated) if writes_in_place(program, d, ordered)]


def plan_donations(program: Program, donated: Sequence[str], in_place: bool) -> list[DonationRecord]:
    """The donations of a compiled program; `in_place`: its runner can write outputs directly."""
    pairs = donation_pairs(program, donated)
    for d in pairs:
        if in_place and writes_in_place(program, d):
            d.mode = "in place"
    return pairs

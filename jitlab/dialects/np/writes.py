"""Where the write ops (`np.update_slice`, `np.scatter_nd`) of a fused group write, and when
the group's result may take the buffer of the array it writes into.

A group of writes computes `x` with a chain of writes applied in order: the first write's
operand `x`, each later write's operand the previous write's result, the group's one result
the last write's. Written in place, the output buffer *is* `x`'s, so each element of `x` the
group reads must be read before a write changes it: a read of `x` feeding the k-th write is
safe where it lies outside the regions of the writes before it, and outside the k-th write's
region or exactly at the element the k-th write stores (the same region, read elementwise).
"""

from __future__ import annotations

from ...ir.core import Operation, Value
from ...ir.opdef import Trait

WRITES = ("np.update_slice", "np.scatter_nd")
Region = tuple[range, ...]


def is_write(op: Operation) -> bool:
    return op.name in WRITES


def region(op: Operation) -> Region:
    """The indices an `np.update_slice` writes or an `np.slice` reads, per dim (static; indices
    are stored absolute, a negative step's stop -1 reaching 0, as `range` takes them)."""
    return tuple(range(a, b, s) for a, b, s in zip(op.attrs["starts"], op.attrs["stops"], op.attrs["steps"]))


def disjoint(a: Region, b: Region) -> bool:
    """Whether two regions share no element: some dim's index ranges do not meet (conservative:
    interleaved strided ranges count as meeting)."""
    for ra, rb in zip(a, b):
        if not ra or not rb or _hi(ra) < _lo(rb) or _hi(rb) < _lo(ra):
            return True
    return False


def _lo(r: range) -> int:
    return min(r[0], r[-1])


def _hi(r: range) -> int:
    return max(r[0], r[-1])


def write_chain(block) -> list[Operation]:
    """The writes of a group block, in order, if its result is a chain of them (else [])."""
    writes = [op for op in block.ops if is_write(op)]
    if not writes or list(block.last_op.operands) != [writes[-1].result]:
        return []
    for prev, op in zip(writes, writes[1:]):
        if op.operands[0] is not prev.result:
            return []
    return writes


def in_place_operand(group: Operation) -> int | None:
    """The operand of a `jit.group` of writes whose buffer its result may take (see the module doc)."""
    if group.name != "jit.group":
        return None
    writes = write_chain(group.body)
    if not writes or writes[0].operands[0] not in group.body.args:
        return None
    x = writes[0].operands[0]
    if not all(_read_is_safe(use.op, use.index, writes) for use in x.uses):
        return None
    return group.body.args.index(x)


def _read_is_safe(op: Operation, index: int, writes: list[Operation]) -> bool:
    if op is writes[0] and index == 0:
        return True
    if op.name != "np.slice" or any(w.name != "np.update_slice" for w in writes):
        return False
    read = region(op)
    for k, w in enumerate(writes):
        if not _feeds(op.result, w):
            continue
        if not all(disjoint(read, region(before)) for before in writes[:k]):
            return False
        if not (disjoint(read, region(w)) or (read == region(w) and _aligned(op.result, w))):
            return False
    return True


def _feeds(value: Value, target: Operation) -> bool:
    """Whether `value` reaches `target` through ops of the block."""
    stack, seen = [value], set()
    while stack:
        for user in stack.pop().users:
            if user is target:
                return True
            if id(user) not in seen and not user.has(Trait.TERMINATOR):
                seen.add(id(user))
                stack.extend(user.results)
    return False


def _aligned(value: Value, write: Operation) -> bool:
    """Whether every path from `value` reaches `write` as its update, through elementwise ops of
    the update's shape: the update's element at i is computed from `value`'s element at i."""
    shape = write.operands[1].type.shape
    stack, seen = [value], set()
    while stack:
        v = stack.pop()
        for use in v.uses:
            user = use.op
            if user is write:
                if use.index != 1:
                    return False
                continue
            if not (user.has(Trait.ELEMENTWISE) and user.results[0].type.shape == shape):
                return False
            if id(user) not in seen:
                seen.add(id(user))
                stack.extend(user.results)
    return True

"""SSA values, operations, blocks and regions: the mutable core of the IR.

Values own their use lists; every operand change goes through `Operation.set_operand`,
which keeps them right. Blocks hold their ops in a doubly linked list so insertion and
erasure are O(1) during rewrites; `Block.ops` iterates it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import VerifyError
from .attributes import normalize_attrs
from .opdef import OpDef, Trait, get_opdef
from .types import TensorType

_uids = itertools.count()


def reserve_uids(upto: int) -> None:
    """Makes later ops take uids above `upto` (ops restored with their recorded uids hold those)."""
    global _uids
    nxt = next(_uids)
    _uids = itertools.count(max(nxt, upto + 1))


@dataclass(frozen=True)
class Location:
    """Where an op came from in the user's source (file, line, function), and its scope: the
    namespaces it sits in, outermost first (functions called inside a traced function, an
    ONNX node name's namespaces), which the explorer draws as a hierarchy."""

    file: str
    line: int
    function: str = ""
    scope: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" + (f" in {self.function}" if self.function else "")


@dataclass(frozen=True)
class Use:
    """One use of a value: operand `index` of `op`."""

    op: Operation
    index: int


class Value:
    """An SSA value: a result of an op or an argument of a block."""

    __slots__ = ("type", "name", "uses")

    def __init__(self, type: TensorType, name: str | None = None):
        self.type = type
        self.name = name           # printed name without '%'; assigned lazily by the printer
        self.uses: list[Use] = []

    @property
    def users(self) -> list[Operation]:
        seen: dict[int, Operation] = {}
        for use in self.uses:
            seen.setdefault(id(use.op), use.op)
        return list(seen.values())

    @property
    def has_one_use(self) -> bool:
        return len(self.uses) == 1

    def replace_all_uses_with(self, new: Value) -> None:
        for use in list(self.uses):
            use.op.set_operand(use.index, new)

    @property
    def shape(self):
        return self.type.shape

    @property
    def dtype(self):
        return self.type.dtype

    def __repr__(self) -> str:
        return f"<{type(self).__name__} %{self.name or '?'} : {self.type}>"


class OpResult(Value):
    """Result `index` of operation `op`."""

    __slots__ = ("op", "index")

    def __init__(self, type: TensorType, op: Operation, index: int):
        super().__init__(type)
        self.op, self.index = op, index

    @property
    def owner(self) -> Operation:
        return self.op


class BlockArgument(Value):
    """Argument `index` of `block`."""

    __slots__ = ("block", "index")

    def __init__(self, type: TensorType, block: Block, index: int, name: str | None = None):
        super().__init__(type, name)
        self.block, self.index = block, index

    @property
    def owner(self) -> Block:
        return self.block


class Operation:
    """An op instance: a registered name, operands, results, attributes and regions."""

    __slots__ = ("opdef", "_operands", "results", "attrs", "regions", "parent", "uid", "loc",
                 "_prev", "_next", "_order")

    def __init__(self, name: str, operands: Sequence[Value] = (), result_types: Sequence[TensorType] = (),
                 attrs: dict[str, Any] | None = None, regions: Sequence[Region] = (),
                 loc: Location | None = None, uid: int | None = None):
        self.opdef: OpDef = get_opdef(name)
        self.attrs = normalize_attrs(name, self.opdef.attrs, dict(attrs or {}))
        self._operands: list[Value] = []
        self.results = [OpResult(t, self, i) for i, t in enumerate(result_types)]
        self.regions: list[Region] = []
        self.parent: Block | None = None
        self.uid = next(_uids) if uid is None else uid
        self.loc = loc
        self._prev = self._next = None
        self._order = 0
        for v in operands:
            self._add_operand(v)
        for r in regions:
            self.add_region(r)

    @property
    def name(self) -> str:
        return self.opdef.name

    @property
    def operands(self) -> tuple[Value, ...]:
        return tuple(self._operands)

    @property
    def result(self) -> OpResult:
        if len(self.results) != 1:
            raise VerifyError(f"{self.name} has {len(self.results)} results, not one")
        return self.results[0]

    def has(self, trait: Trait) -> bool:
        return trait in self.opdef.traits

    def _add_operand(self, value: Value) -> None:
        if not isinstance(value, Value):
            raise VerifyError(f"{self.name}: operand {len(self._operands)} is {value!r}, not an IR value")
        value.uses.append(Use(self, len(self._operands)))
        self._operands.append(value)

    def set_operand(self, index: int, value: Value) -> None:
        old = self._operands[index]
        old.uses.remove(Use(self, index))
        value.uses.append(Use(self, index))
        self._operands[index] = value

    def set_operands(self, values: Sequence[Value]) -> None:
        self.drop_operands()
        for v in values:
            self._add_operand(v)

    def drop_operands(self) -> None:
        for i, v in enumerate(self._operands):
            v.uses.remove(Use(self, i))
        self._operands = []

    def add_region(self, region: Region) -> Region:
        region.parent = self
        self.regions.append(region)
        return region

    @property
    def body(self) -> Block:
        """The single block of this op's single region (a jit.group's ops); the block holding
        the op itself is `parent` (MLIR's getBlock)."""
        return self.regions[0].blocks[0]

    @property
    def parent_op(self) -> Operation | None:
        if self.parent is None or self.parent.parent is None:
            return None
        return self.parent.parent.parent

    @property
    def next_op(self) -> Operation | None:
        return self._next

    @property
    def prev_op(self) -> Operation | None:
        return self._prev

    def is_before_in_block(self, other: Operation) -> bool:
        assert self.parent is other.parent and self.parent is not None
        self.parent._ensure_order()
        return self._order < other._order

    def walk(self) -> Iterator[Operation]:
        """This op and every op nested in its regions, in pre-order."""
        yield self
        for region in self.regions:
            for block in region.blocks:
                for op in block.ops:
                    yield from op.walk()

    def erase(self) -> None:
        """Removes this op from its block; its results must have no uses left."""
        for r in self.results:
            if r.uses:
                users = ", ".join(u.op.name for u in r.uses)
                raise VerifyError(f"cannot erase {self.name}: result {r.index} is still used by {users}")
        self.drop_all_references()
        if self.parent is not None:
            self.parent._unlink(self)

    def drop_all_references(self) -> None:
        """Drops this op's operands and those of every nested op."""
        for op in list(self.walk()):
            op.drop_operands()

    def detach(self) -> Operation:
        if self.parent is not None:
            self.parent._unlink(self)
        return self

    def clone(self, mapping: dict[Value, Value] | None = None, fresh_uid: bool = False) -> Operation:
        """A deep copy; operands are looked up in `mapping` (which is extended with results)."""
        mapping = {} if mapping is None else mapping
        new = Operation(self.name, [mapping.get(v, v) for v in self._operands],
                        [r.type for r in self.results], dict(self.attrs),
                        loc=self.loc, uid=None if fresh_uid else self.uid)
        for old_r, new_r in zip(self.results, new.results):
            new_r.name = old_r.name
            mapping[old_r] = new_r
        for region in self.regions:
            new.add_region(region.clone(mapping, fresh_uid))
        return new

    def __repr__(self) -> str:
        from .printer import print_op

        return print_op(self)


class Block:
    """An ordered list of ops with typed arguments."""

    def __init__(self, arg_types: Sequence[TensorType] = (), arg_names: Sequence[str | None] = ()):
        names = list(arg_names) + [None] * (len(arg_types) - len(arg_names))
        self.args = [BlockArgument(t, self, i, n) for i, (t, n) in enumerate(zip(arg_types, names))]
        self.parent: Region | None = None
        self._first: Operation | None = None
        self._last: Operation | None = None
        self._len = 0
        self._order_valid = False

    def add_arg(self, type: TensorType, name: str | None = None) -> BlockArgument:
        arg = BlockArgument(type, self, len(self.args), name)
        self.args.append(arg)
        return arg

    def insert_arg(self, index: int, type: TensorType, name: str | None = None) -> BlockArgument:
        arg = BlockArgument(type, self, index, name)
        self.args.insert(index, arg)
        for i, a in enumerate(self.args):
            a.index = i
        return arg

    def erase_arg(self, arg: BlockArgument) -> None:
        if arg.uses:
            raise VerifyError(f"cannot erase block argument %{arg.name}: still used")
        self.args.remove(arg)
        for i, a in enumerate(self.args):
            a.index = i

    @property
    def ops(self) -> Iterator[Operation]:
        op = self._first
        while op is not None:
            nxt = op._next
            yield op
            op = nxt

    def ops_reversed(self) -> Iterator[Operation]:
        op = self._last
        while op is not None:
            prev = op._prev
            yield op
            op = prev

    def __len__(self) -> int:
        return self._len

    @property
    def first_op(self) -> Operation | None:
        return self._first

    @property
    def last_op(self) -> Operation | None:
        return self._last

    @property
    def terminator(self) -> Operation | None:
        last = self._last
        return last if last is not None and last.has(Trait.TERMINATOR) else None

    def append(self, op: Operation) -> Operation:
        return self._link(op, self._last, None)

    def insert_before(self, anchor: Operation, op: Operation) -> Operation:
        assert anchor.parent is self
        return self._link(op, anchor._prev, anchor)

    def insert_after(self, anchor: Operation, op: Operation) -> Operation:
        assert anchor.parent is self
        return self._link(op, anchor, anchor._next)

    def _link(self, op: Operation, prev: Operation | None, nxt: Operation | None) -> Operation:
        if op.parent is not None:
            raise VerifyError(f"{op.name} is already in a block; detach it first")
        op.parent, op._prev, op._next = self, prev, nxt
        if prev is None:
            self._first = op
        else:
            prev._next = op
        if nxt is None:
            self._last = op
        else:
            nxt._prev = op
        self._len += 1
        self._order_valid = False
        return op

    def _unlink(self, op: Operation) -> None:
        if op._prev is None:
            self._first = op._next
        else:
            op._prev._next = op._next
        if op._next is None:
            self._last = op._prev
        else:
            op._next._prev = op._prev
        op.parent = op._prev = op._next = None
        self._len -= 1

    def _ensure_order(self) -> None:
        if not self._order_valid:
            for i, op in enumerate(self.ops):
                op._order = i
            self._order_valid = True

    def walk(self) -> Iterator[Operation]:
        for op in self.ops:
            yield from op.walk()

    def clone(self, mapping: dict[Value, Value], fresh_uid: bool = False) -> Block:
        new = Block([a.type for a in self.args], [a.name for a in self.args])
        mapping.update(zip(self.args, new.args))
        for op in self.ops:
            new.append(op.clone(mapping, fresh_uid))
        return new


class Region:
    """A list of blocks owned by an op (jitlab uses single-block regions)."""

    def __init__(self, blocks: Sequence[Block] = ()):
        self.blocks: list[Block] = []
        self.parent: Operation | None = None
        for b in blocks:
            self.add_block(b)

    def add_block(self, block: Block) -> Block:
        block.parent = self
        self.blocks.append(block)
        return block

    def clone(self, mapping: dict[Value, Value], fresh_uid: bool = False) -> Region:
        return Region([b.clone(mapping, fresh_uid) for b in self.blocks])

"""Op definitions: one declarative record per op, and the registry that holds them.

An `OpDef` carries everything generic code needs to know about an op: operand and
result counts, attribute schema, traits, shape/dtype inference and the numpy reference
implementation. Rules that belong to later stages (decompositions, gradients, backend
lowerings) live in tables keyed by the op name, next to the code that uses them.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ShapeError, UnknownOpError
from ..registry import Registry
from .attributes import Attr
from .shapes import Dim, Sym
from .types import TensorType


class Trait(str, enum.Enum):
    """What generic passes may assume about an op."""

    PURE = "pure"                  # no side effects: may be removed, reordered, deduplicated
    ELEMENTWISE = "elementwise"    # out[i] depends only on operands[...][i] (after broadcasting)
    BROADCAST = "broadcast"        # operands broadcast implicitly, numpy style
    COMMUTATIVE = "commutative"    # the two operands may be swapped
    VIEW = "view"                  # no-task op: a re-view of its first operand, no data moves
    INJECTIVE = "injective"        # each output element reads one input element (index map)
    REDUCTION = "reduction"        # reduces along `axes`
    CONTRACTION = "contraction"    # matmul and conv: library kernels with epilogues
    COMPOSITE = "composite"        # has a decomposition into simpler ops
    CONSTANT = "constant"          # has no operands and a value known at compile time
    TERMINATOR = "terminator"      # ends its block
    ISOLATED = "isolated"          # its regions use no value defined outside them
    MEMORY = "memory"              # allocates, frees or moves memory


Infer = Callable[["InferCtx", Sequence[TensorType], dict], Sequence[TensorType]]
Reference = Callable[..., Any]


@dataclass
class OpDef:
    """The definition of one op: its signature, traits and rules."""

    name: str
    operands: tuple[int, int | None]          # (min, max) operand count; max None = unbounded
    attrs: dict[str, Attr]
    traits: frozenset[Trait]
    infer: Infer | None                       # None: result types are given explicitly
    reference: Reference | None               # numpy implementation: (arrays..., **attrs) -> array(s)
    num_regions: int = 0
    operand_names: tuple[str, ...] = ()
    doc: str = ""
    rules: dict[str, Any] = field(default_factory=dict)   # later stages' per-op rules, by table name

    @property
    def dialect(self) -> str:
        return self.name.split(".", 1)[0]

    def has(self, trait: Trait) -> bool:
        return trait in self.traits


_REGISTRY: Registry[str, OpDef] = Registry("op", UnknownOpError, listed=False)


def register(opdef: OpDef) -> OpDef:
    return _REGISTRY.add(opdef.name, opdef)


def defop(
    name: str,
    *,
    operands: int | tuple[int, int | None] = 1,
    attrs: dict[str, Attr] | None = None,
    traits: Sequence[Trait] = (Trait.PURE,),
    infer: Infer | None = None,
    reference: Reference | None = None,
    regions: int = 0,
    operand_names: Sequence[str] = (),
    doc: str = "",
) -> OpDef:
    """Defines and registers an op; the one place an op's signature is written down."""
    count = (operands, operands) if isinstance(operands, int) else operands
    return register(OpDef(name, count, dict(attrs or {}), frozenset(traits), infer, reference,
                          regions, tuple(operand_names), doc))


def get_opdef(name: str) -> OpDef:
    try:
        return _REGISTRY[name]
    except KeyError:
        pass
    if "." not in name:
        raise UnknownOpError(f"unknown op {name!r} (op names are 'dialect.op', e.g. np.add)")
    dialect = name.split(".", 1)[0]
    return _REGISTRY.lookup(name, known=[n for n in _REGISTRY if n.split(".", 1)[0] == dialect])


def registered_ops(dialect: str | None = None) -> list[OpDef]:
    return [d for n, d in sorted(_REGISTRY.items()) if dialect is None or d.dialect == dialect]


class InferCtx:
    """What shape inference sees besides the operand types: the op's name and the
    program's symbolic constraints, which broadcasting and matmul add to."""

    def __init__(self, op_name: str, constraints: ConstraintSet | None = None):
        self.op_name = op_name
        self.constraints = constraints

    def error(self, message: str) -> ShapeError:
        return ShapeError(f"{self.op_name}: {message}")

    def equal(self, a: Dim, b: Dim, what: str) -> Dim:
        """Asserts a == b (recording a constraint when symbolic) and returns the merged dim."""
        if a == b:
            return a
        if isinstance(a, int) and isinstance(b, int):
            raise self.error(f"{what}: {a} != {b}")
        if self.constraints is None:
            raise self.error(f"{what}: {a} != {b} (symbolic dims must match exactly here)")
        self.constraints.add(a, b, f"{self.op_name}: {what}")
        return b if isinstance(b, int) else a

    def broadcast(self, *shapes: Sequence[Dim]) -> tuple[Dim, ...]:
        """numpy broadcasting of `shapes`; symbolic dims that meet must be equal (or 1)."""
        rank = max((len(s) for s in shapes), default=0)
        out: list[Dim] = []
        for i in range(rank):
            dims = [s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0]
            result: Dim = 1
            for d in dims:
                if d == 1:
                    continue
                if result == 1:
                    result = d
                else:
                    result = self.equal(result, d, f"broadcasting dim {i - rank} of shapes "
                                        + " and ".join(_shape_str(s) for s in shapes))
            out.append(result)
        return tuple(out)


def _shape_str(shape: Sequence[Dim]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


class ConstraintSet:
    """Equalities between symbolic dims a program relies on, with why each was added."""

    def __init__(self, pairs: Sequence[tuple[Dim, Dim]] = ()):
        self.pairs: list[tuple[Dim, Dim]] = []
        self.reasons: list[str] = []
        for a, b in pairs:
            self.add(a, b, "declared")

    def add(self, a: Dim, b: Dim, reason: str) -> None:
        """Records a == b (the symbolic side first); a ShapeError if the constraints
        already give the two sides different values."""
        if isinstance(a, int):
            a, b = b, a
        if (a, b) in self.pairs or (b, a) in self.pairs or a == b:
            return
        va, vb = self.value_of(a), self.value_of(b)
        if va is not None and vb is not None and va != vb:
            known = " and ".join(f"{d} == {v}" for d, v in ((a, va), (b, vb)) if not isinstance(d, int))
            raise ShapeError(f"{reason}: needs {a} == {b}, but the program already requires {known}")
        self.pairs.append((a, b))
        self.reasons.append(reason)

    def value_of(self, d: Dim) -> int | None:
        """The int that `d` equals through the recorded constraints, if any."""
        seen, frontier = {d}, [d]
        while frontier:
            x = frontier.pop()
            if isinstance(x, int):
                return x
            for p, q in self.pairs:
                other = q if p == x else p if q == x else None
                if other is not None and other not in seen:
                    seen.add(other)
                    frontier.append(other)
        return None

    def reason(self, a: Dim, b: Dim) -> str:
        """Why a == b was recorded ("declared" for a parsed header)."""
        for (p, q), why in zip(self.pairs, self.reasons):
            if (p, q) in ((a, b), (b, a)):
                return why
        return ""

    def __iter__(self):
        return iter(self.pairs)

    def __len__(self) -> int:
        return len(self.pairs)

    def copy(self) -> ConstraintSet:
        out = ConstraintSet()
        out.pairs, out.reasons = list(self.pairs), list(self.reasons)
        return out


def static_int(d: Dim, ctx: InferCtx, what: str) -> int:
    """`d` as an int, or a clear error when an op needs it static."""
    if isinstance(d, Sym):
        raise ctx.error(f"{what} must be static, got symbolic {d}")
    return d

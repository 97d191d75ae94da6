"""Index maps: where each value of a group is read, as affine functions of loop variables.

A group is computed by loops over its iteration space. Each value inside it is
evaluated at a map (one `Coord` per dim of the value) from the loop variables;
broadcasting, transpose, slice, broadcast_to and size-1 reshapes only change the map,
so they cost no memory traffic. `operand_maps(op, result_map)` gives the map each
operand is read at when `op`'s result is needed at `result_map`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..ir.core import Operation
from ..ir.opdef import Trait
from ..ir.shapes import Sym
from ..registry import Registry


@dataclass(frozen=True)
class Coord:
    """One index: scale * var + offset, or the constant offset when var is None."""

    var: str | None
    scale: int = 1
    offset: int = 0

    def text(self) -> str:
        if self.var is None:
            return str(self.offset)
        term = self.var if self.scale == 1 else f"{self.scale} * {self.var}"
        if self.offset == 0:
            return term
        return f"({term} + {self.offset})" if self.offset > 0 else f"({term} - {-self.offset})"


ZERO = Coord(None, 0, 0)
Map = tuple[Coord, ...]
IndexRule = Callable[[Operation, Map], list[Map]]
INDEX_RULES: Registry[str, IndexRule] = Registry("index rule")


def index_rule(*names: str) -> Callable[[IndexRule], IndexRule]:
    """Registers how an injective or view op maps its result index to its operand's."""
    return INDEX_RULES.register(*names)


def map_vars(m: Map) -> frozenset[str]:
    return frozenset(c.var for c in m if c.var is not None)


def broadcast_map(result_map: Map, result_shape, operand_shape) -> Map:
    """The map of an operand that numpy broadcasting stretches to the result's shape."""
    skip = len(result_shape) - len(operand_shape)
    out = []
    for k, d in enumerate(operand_shape):
        out.append(ZERO if d == 1 and result_shape[k + skip] != 1 else result_map[k + skip])
    return tuple(out)


def operand_maps(op: Operation, result_map: Map) -> list[Map]:
    """Maps of `op`'s operands when its (first) result is read at `result_map`."""
    if op.has(Trait.ELEMENTWISE):
        shape = op.results[0].type.shape
        return [broadcast_map(result_map, shape, v.type.shape) for v in op.operands]
    return INDEX_RULES[op.name](op, result_map)


@index_rule("np.broadcast_to")
def _broadcast_to(op: Operation, m: Map) -> list[Map]:
    return [broadcast_map(m, op.result.type.shape, op.operands[0].type.shape)]


@index_rule("np.transpose")
def _transpose(op: Operation, m: Map) -> list[Map]:
    perm = op.attrs["perm"]
    out: list[Coord] = [ZERO] * len(perm)
    for j, p in enumerate(perm):
        out[p] = m[j]
    return [tuple(out)]


@index_rule("np.slice")
def _slice(op: Operation, m: Map) -> list[Map]:
    out = []
    for c, start, step in zip(m, op.attrs["starts"], op.attrs["steps"]):
        if c.var is None:
            out.append(Coord(None, 0, start + step * c.offset))
        else:
            out.append(Coord(c.var, c.scale * step, c.offset * step + start))
    return [tuple(out)]


@index_rule("np.expand_dims")
def _expand_dims(op: Operation, m: Map) -> list[Map]:
    axes = set(op.attrs["axes"])
    return [tuple(c for k, c in enumerate(m) if k not in axes)]


@index_rule("np.squeeze")
def _squeeze(op: Operation, m: Map) -> list[Map]:
    coords = iter(m)
    rank = op.operands[0].type.rank
    return [tuple(ZERO if k in op.attrs["axes"] else next(coords) for k in range(rank))]


@index_rule("np.reshape")
def _reshape(op: Operation, m: Map) -> list[Map]:
    """Only reshapes that add or drop size-1 dims are index maps (see is_unit_reshape)."""
    coords = [c for c, d in zip(m, op.result.type.shape) if d != 1]
    it = iter(coords)
    return [tuple(ZERO if d == 1 else next(it) for d in op.operands[0].type.shape)]


def is_unit_reshape(op: Operation) -> bool:
    """A reshape that only inserts or removes size-1 dims, so it is an index map."""
    strip = lambda shape: [d for d in shape if d != 1]  # noqa: E731
    return strip(op.operands[0].type.shape) == strip(op.result.type.shape)


def has_static_offsets(op: Operation) -> bool:
    """Slices need integer starts to become index maps."""
    return all(not isinstance(s, Sym) for s in op.attrs.get("starts", ()))

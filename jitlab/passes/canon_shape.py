"""Canonicalization of shape ops: composed transposes, view chains folded into one
reshape, broadcasts of broadcasts, broadcasts that elementwise ops do implicitly,
composed slices, and shape ops that change nothing. All move data only, so each is exact."""

from __future__ import annotations

from ..errors import JitlabError
from ..ir.builder import infer_types
from ..ir.core import Operation, OpResult
from ..ir.opdef import Trait, registered_ops
from .drr import P, Rule, V, check, same_type
from .rewriter import Pattern, Rewriter, is_trivially_dead
from .rules import CANONICALIZE

VIEWS = ("np.reshape", "np.expand_dims", "np.squeeze")
TRIVIAL_REDUCTIONS = ("np.prod", "np.max", "np.min", "np.any", "np.all")


def compose(p: tuple[int, ...], q: tuple[int, ...]) -> tuple[int, ...]:
    """The permutation of transpose(transpose(x, p), q)."""
    return tuple(p[i] for i in q)


def _composed_slice(a1, s1, a2, s2, out):
    """(starts, stops, steps) of x[a1::s1][a2::s2], `out` being its result: element j is
    x[a1 + s1 * (a2 + s2 * j)]; the stop is one step short of the last element's
    neighbour (-1 for a reversed slice reaching index 0, as the IR stores it)."""
    starts = tuple(a + s * b for a, s, b in zip(a1, s1, a2))
    steps = tuple(s * t for s, t in zip(s1, s2))
    stops = tuple(a if n == 0 else a + s * (n - 1) + (1 if s > 0 else -1)
                  for a, s, n in zip(starts, steps, out.type.shape))
    return starts, stops, steps


class BroadcastIntoElementwise(Pattern):
    """Drops an explicit broadcast_to feeding an op that broadcasts implicitly, when the
    op's result type stays the same."""

    name = "broadcast-into-elementwise"
    root = tuple(d.name for d in registered_ops("np") if d.has(Trait.BROADCAST))

    def match_and_rewrite(self, op: Operation, rw: Rewriter) -> bool:
        candidates = [i for i, v in enumerate(op.operands)
                      if isinstance(v, OpResult) and v.op.name == "np.broadcast_to"]
        if not candidates:
            return False
        for i in candidates:
            source = op.operands[i].op.operands[0]
            if self._same_result(op, i, source, rw):
                broadcast = op.operands[i].op
                rw.set_operand(op, i, source)
                if is_trivially_dead(broadcast):
                    rw.erase_op(broadcast)
                return True
        return rw.fail(f"without the broadcast_to, {op.name} would give another type")

    @staticmethod
    def _same_result(op: Operation, i: int, source, rw: Rewriter) -> bool:
        types = [v.type for v in op.operands]
        types[i] = source.type
        constraints = rw.program.constraints.copy()
        try:
            inferred = infer_types(op.opdef, types, op.attrs, constraints)
        except JitlabError:
            return False
        return inferred == [r.type for r in op.results] and len(constraints) == len(rw.program.constraints)


def _all_ones(values) -> bool:
    return all(v == 1 for v in values)


CANONICALIZE.add(
    Rule("transpose-identity", P.transpose(V.x, perm=V.p), V.x,
         where=[check("$p to be the identity", lambda p: p == tuple(range(len(p))))],
         doc="a transpose that keeps every axis in place"),
    Rule("transpose-transpose", P.transpose(P.transpose(V.x, perm=V.p), perm=V.q),
         P.transpose(V.x, perm=compose), doc="two transposes are one, with composed permutations"),
    Rule("view-noop", P.one_of(VIEWS, V.x).named("r"), V.x, where=[same_type(V.x, V.r)],
         doc="a reshape (or squeeze, expand_dims) to the shape it already has"),
    Rule("view-chain", P.one_of(VIEWS, P.one_of(VIEWS, V.x)).named("r"), P.reshape(V.x, shape=lambda r: r.type.shape),
         doc="a chain of reshapes, squeezes and expand_dims is one reshape"),
    Rule("broadcast-noop", P.broadcast_to(V.x).named("r"), V.x, where=[same_type(V.x, V.r)],
         doc="a broadcast to the shape it already has"),
    Rule("broadcast-broadcast", P.broadcast_to(P.broadcast_to(V.x), shape=V.s), P.broadcast_to(V.x, shape=V.s),
         doc="a broadcast of a broadcast is one broadcast"),
    BroadcastIntoElementwise(),
    Rule("slice-noop", P.slice(V.x, starts=V.a, steps=V.s).named("r"), V.x,
         where=[check("$a to be all 0 and $s all 1", lambda a, s: all(v == 0 for v in a) and _all_ones(s)),
                same_type(V.x, V.r)],
         doc="a slice that keeps every element"),
    Rule("slice-slice", P.slice(P.slice(V.x, starts=V.a1, steps=V.s1), starts=V.a2, steps=V.s2).named("r"),
         P.slice(V.x, starts=lambda a1, s1, a2, s2, r: _composed_slice(a1, s1, a2, s2, r)[0],
                 stops=lambda a1, s1, a2, s2, r: _composed_slice(a1, s1, a2, s2, r)[1],
                 steps=lambda s1, s2: tuple(s * t for s, t in zip(s1, s2))),
         doc="a slice of a slice is one slice"),
    Rule("pad-noop", P.pad(V.x, pads=V.p), V.x, where=[check("$p to be all 0", lambda p: not any(p))],
         doc="padding by nothing"),
    Rule("tile-noop", P.tile(V.x, reps=V.n), V.x, where=[check("$n to be all 1", lambda n: _all_ones(n))],
         doc="tiling once"),
    Rule("concatenate-one", P.concatenate(V.x), V.x, doc="concatenating a single tensor"),
    Rule("split-one", P.split(V.x), [V.x], doc="splitting into a single piece"),
    Rule("reduce-trivial", P.one_of(TRIVIAL_REDUCTIONS, V.x, axes=V.a).named("r"),
         P.reshape(V.x, shape=lambda r: r.type.shape),
         where=[check("every reduced axis of $x to have size 1", lambda x, a: all(x.type.shape[i] == 1 for i in a))],
         doc="max, min, prod, any or all over size-1 axes (or none) is a reshape"),
    Rule("sum-trivial-int", P.sum(V.x, axes=V.a).named("r"), P.reshape(V.x, shape=lambda r: r.type.shape),
         where=[check("$x to be an integer or bool (a float sum adds +0.0, turning -0.0 into +0.0)",
                      lambda x: x.dtype.kind in "iub"),
                check("every reduced axis of $x to have size 1", lambda x, a: all(x.type.shape[i] == 1 for i in a))],
         doc="an integer sum over size-1 axes (or none) is a reshape"),
)

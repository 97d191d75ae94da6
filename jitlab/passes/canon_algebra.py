"""Canonicalization of elementwise arithmetic: constant folding, identities that are exact
in IEEE arithmetic, and redundant casts.

Every rule here gives bit-identical results for every input, NaN, inf and signed zeros
included. Identities that are not exact are absent on purpose: x*0 (NaN*0 is NaN, inf*0
is NaN), x-x (inf-inf is NaN), x+0.0 (-0.0+0.0 is +0.0), x-(-0.0), sum over a size-1 axis
of floats (numpy adds +0.0), and swapping the operands of a float maximum/minimum
(numpy returns the second of two equal operands, so signed zeros differ).
"""

from __future__ import annotations

import numpy as np

from ..dialects.reference import concrete_attrs
from ..ir.attributes import Dense
from ..ir.core import Operation
from ..ir.dtypes import dtype_name
from ..ir.opdef import Trait, registered_ops
from .drr import (
    Const,
    Constant,
    Constraint,
    P,
    Rule,
    V,
    check,
    const_array,
    exactly_commutative,
    is_float,
    is_splat_of,
    one_use,
    same_type,
    splat,
)
from .rewriter import Pattern, Rewriter
from .rules import CANONICALIZE

FOLD_LIMIT = 4096   # constant folding makes no constant with more elements than this
ROUNDING = ("np.floor", "np.ceil", "np.trunc", "np.round")


class FoldConstants(Pattern):
    """Evaluates an op whose operands are all constants with its reference implementation."""

    name = "fold-constants"
    root = None
    benefit = 100

    def __init__(self, limit: int = FOLD_LIMIT):
        self.limit = limit

    def match_and_rewrite(self, op: Operation, rw: Rewriter) -> bool:
        arrays = [const_array(v) for v in op.operands]
        if not op.operands or all(a is None for a in arrays) or op.has(Trait.CONSTANT):
            return False
        reason = self._unfoldable(op, arrays)
        if reason:
            return rw.fail(reason)
        try:
            with np.errstate(all="ignore"):
                outs = op.opdef.reference(*arrays, **concrete_attrs(op.attrs, {}))
        except Exception as e:          # a reference rejecting its constant inputs: leave it to run time
            return rw.fail(f"its reference implementation raised {type(e).__name__}: {e}")
        outs = [np.asarray(o) for o in (outs if isinstance(outs, (tuple, list)) else [outs])]
        for r, out in zip(op.results, outs):
            if out.shape != r.type.shape or out.dtype != r.type.dtype:
                return rw.fail(f"its reference gave {dtype_name(out.dtype)}{list(out.shape)}, not {r.type}")
        rw.replace_op(op, [rw.op("np.constant", value=Dense(out)) for out in outs])
        return True

    def _unfoldable(self, op: Operation, arrays: list) -> str | None:
        missing = [i for i, a in enumerate(arrays) if a is None]
        if missing:
            return f"operand {missing[0]} of {op.name} is not a constant"
        if not op.has(Trait.PURE) or op.regions or op.opdef.reference is None:
            return f"{op.name} has no pure reference implementation"
        if not all(r.type.is_static for r in op.results):
            return "its result shape is symbolic"
        size = sum(int(np.prod(r.type.shape, dtype=np.int64)) for r in op.results)
        if size > self.limit:
            return f"its result has {size} elements, over the folding limit of {self.limit}"
        return None


class ConstantToRight(Pattern):
    """Moves a constant to the right of an exactly commutative op, so rules need one form
    and CSE sees one spelling."""

    name = "constant-to-right"
    root = tuple(d.name for d in registered_ops("np") if d.has(Trait.COMMUTATIVE) and d.operands == (2, 2))

    def match_and_rewrite(self, op: Operation, rw: Rewriter) -> bool:
        a, b = op.operands
        if const_array(a) is None:
            return False
        if const_array(b) is not None:
            return rw.fail("both operands are constants")
        if not exactly_commutative(op):
            return rw.fail(f"swapping the operands of a float {op.name} can change the sign of a zero result")
        rw.replace_op(op, rw.create(op.name, [b, a], op.attrs).results)
        return True


def additive_identity(c) -> Constraint:
    """-0.0 for floats (x + 0.0 turns -0.0 into +0.0), 0 for integers."""
    return Constraint(f"{c} to be -0.0 (or 0 for integers)", (c.name,),
                      lambda v: is_splat_of(const_array(v), -0.0 if v.type.dtype.kind == "f" else 0))


def power_of_two_splat(c) -> Constraint:
    """A float splat 2**k whose reciprocal 2**-k is representable, so x/c == x*(1/c) exactly."""

    def holds(v):
        array = const_array(v)
        if array.dtype.kind != "f" or array.size == 0 or not np.all(array == array.flat[0]):
            return False
        value = array.flat[0]
        with np.errstate(all="ignore"):
            inverse = (1 / value).astype(array.dtype)
        return bool(np.isfinite(inverse) and value != 0 and np.frexp(value)[0] in (0.5, -0.5)
                    and inverse * value == 1)

    return Constraint(f"{c} to be a float splat of a power of two with a representable reciprocal",
                      (c.name,), holds)


def lossless(src: np.dtype, dst: np.dtype) -> bool:
    """Whether every value of dtype `src` is exactly representable in `dst`."""
    if src == dst or src.kind == "b":
        return True
    if dst.kind == "b" or (src.kind == "f" and dst.kind != "f"):
        return False
    if src.kind == "f":
        return dst.itemsize >= src.itemsize
    bits = np.iinfo(src).bits - (src.kind == "i")
    if dst.kind == "f":
        return bits <= np.finfo(dst).nmant + 1
    if src.kind == dst.kind:
        return dst.itemsize >= src.itemsize
    return src.kind == "u" and dst.itemsize > src.itemsize


def cast_chain_exact(src: np.dtype, mid: np.dtype, dst: np.dtype) -> bool:
    """cast(cast(x, mid), dst) == cast(x, dst) for every x of dtype `src`.

    The first cast must lose nothing. Integers that go through a float into an integer
    saturate (the float-to-int rule) where a direct integer cast wraps, so that path also
    needs `src` to fit `dst`."""
    if not lossless(src, mid):
        return False
    return not (src.kind in "iu" and mid.kind == "f" and dst.kind in "iu") or lossless(src, dst)


CANONICALIZE.add(
    FoldConstants(),
    ConstantToRight(),
    Rule("mul-one", P.mul(V.x, Const(V.c)), V.x, where=[splat(V.c, 1)], doc="x * 1 == x"),
    Rule("div-one", P.div(V.x, Const(V.c)), V.x, where=[splat(V.c, 1)], doc="x / 1 == x"),
    Rule("pow-one", P.pow(V.x, Const(V.c)), V.x, where=[splat(V.c, 1)], doc="x ** 1 == x"),
    Rule("add-zero", P.add(V.x, Const(V.c)), V.x, where=[additive_identity(V.c)], doc="x + -0.0 == x"),
    Rule("sub-zero", P.sub(V.x, Const(V.c)), V.x, where=[splat(V.c, 0)], doc="x - 0.0 == x"),
    Rule("mul-minus-one", P.mul(V.x, Const(V.c)), P.neg(V.x), where=[splat(V.c, -1)], doc="x * -1 == -x"),
    Rule("div-minus-one", P.div(V.x, Const(V.c)), P.neg(V.x), where=[splat(V.c, -1)], doc="x / -1 == -x"),
    Rule("div-power-of-two", P.div(V.x, Const(V.c)), P.mul(V.x, Constant(lambda c: 1 / const_array(c), V.c)),
         where=[power_of_two_splat(V.c)], doc="x / 2**k == x * 2**-k: one rounding of the same product"),
    Rule("maximum-zero", P.maximum(V.x, Const(V.c)).in_order(), P.relu(V.x), where=[splat(V.c, 0)],
         doc="np.maximum(x, 0) is relu's definition"),
    Rule("neg-neg", P.neg(P.neg(V.x)), V.x, doc="-(-x) == x"),
    Rule("sub-neg", P.sub(V.x, P.neg(V.y).named("n")), P.add(V.x, V.y), where=[one_use(V.n)],
         doc="x - (-y) == x + y"),
    Rule("add-neg", P.add(V.x, P.neg(V.y).named("n")), P.sub(V.x, V.y), where=[one_use(V.n)],
         doc="x + (-y) == x - y"),
    Rule("mul-neg-neg", P.mul(P.neg(V.x).named("a"), P.neg(V.y).named("b")), P.mul(V.x, V.y),
         where=[one_use(V.a), one_use(V.b)], doc="(-x) * (-y) == x * y"),
    Rule("div-neg-neg", P.div(P.neg(V.x).named("a"), P.neg(V.y).named("b")), P.div(V.x, V.y),
         where=[one_use(V.a), one_use(V.b)], doc="(-x) / (-y) == x / y"),
    Rule("abs-neg", P.abs(P.neg(V.x)), P.abs(V.x), doc="|-x| == |x|"),
    Rule("square-neg", P.square(P.neg(V.x)), P.square(V.x), doc="(-x)**2 == x**2"),
    Rule("abs-abs", P.abs(P.abs(V.x).named("a")), V.a, doc="abs is idempotent"),
    Rule("abs-relu", P.abs(P.relu(V.x).named("a")), V.a, doc="relu(x) is never negative"),
    Rule("relu-relu", P.relu(P.relu(V.x).named("a")), V.a, doc="relu is idempotent"),
    Rule("relu-abs", P.relu(P.abs(V.x).named("a")), V.a, where=[is_float(V.x)],
         doc="|x| is never negative for floats (for integers abs(INT_MIN) is negative)"),
    Rule("round-integral", P.one_of(ROUNDING, P.one_of((*ROUNDING, "np.sign"), V.x).named("a")), V.a,
         doc="rounding an integer-valued float changes nothing"),
    Rule("sign-sign", P.sign(P.sign(V.x).named("a")), V.a, doc="sign is idempotent"),
    Rule("select-self", P.one_of(("np.maximum", "np.minimum", "np.logical_and", "np.logical_or",
                                  "np.bitwise_and", "np.bitwise_or"), V.x, V.x).named("r"), V.x,
         where=[same_type(V.x, V.r)], doc="max(x, x) == x (and min, and, or)"),
    Rule("where-same", P.where(V.c, V.x, V.x).named("r"), V.x, where=[same_type(V.x, V.r)],
         doc="where(c, x, x) == x"),
    Rule("where-true", P.where(Const(V.c), V.x, V.y), V.x, where=[splat(V.c, True)], doc="where(true, x, y) == x"),
    Rule("where-false", P.where(Const(V.c), V.x, V.y), V.y, where=[splat(V.c, False)],
         doc="where(false, x, y) == y"),
    Rule("not-not", P.logical_not(P.logical_not(V.x)), V.x, doc="not not x == x"),
    Rule("invert-invert", P.bitwise_not(P.bitwise_not(V.x)), V.x, doc="~~x == x"),
    Rule("clip-unbounded", P.clip(V.x, min=None, max=None), V.x, doc="clip without bounds is x"),
    Rule("cast-noop", P.cast(V.x, dtype=V.t), V.x, where=[check("$t to be the dtype of $x", lambda x, t: x.dtype == t)],
         doc="a cast to the dtype it already has"),
    Rule("cast-roundtrip", P.cast(P.cast(V.x, dtype=V.mid), dtype=V.t), V.x,
         where=[check("$t to be the dtype of $x", lambda x, t: x.dtype == t),
                check("$x to convert to $mid without loss", lambda x, mid: lossless(x.dtype, mid))],
         doc="widening then narrowing back"),
    Rule("cast-chain", P.cast(P.cast(V.x, dtype=V.mid), dtype=V.t), P.cast(V.x, dtype=V.t),
         where=[check("cast($x, $mid) then $t to equal cast($x, $t)",
                      lambda x, mid, t: cast_chain_exact(x.dtype, mid, t))],
         doc="a lossless first cast adds nothing to the second"),
)

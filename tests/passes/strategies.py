"""`redundant_programs()`: random programs (tests/programs.py) with redundancy that
canonicalization should remove or must keep mixed in: double negations and transposes,
cast round trips (lossless and lossy), multiplications and additions by splat constants
(1, -1, +0.0, -0.0, 2, ...), view and broadcast chains, no-op slices and pads, repeated
subexpressions, dead ops and constant-only subexpressions."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from jitlab.ir import Builder, Dense, Value
from tests.programs import Case, programs

SPLATS = [1.0, -1.0, 0.0, -0.0, 2.0, 0.5, 3.0, np.inf, np.nan]
STEPS = ["neg-neg", "transpose-pair", "cast-pair", "splat-op", "repeat", "dead", "view-chain", "broadcast",
         "slice", "pad", "maximum-zero", "where-const", "fold", "nonneg-chain", "round-chain", "unit-reduce"]


def _const(b: Builder, value, dtype, shape=()) -> Value:
    return b.create("np.constant", attrs={"value": Dense(np.full(shape, value, dtype))}).result


@st.composite
def redundant_programs(draw, max_steps: int = 8) -> Case:
    case = draw(programs(special_values=True, max_ops=5))
    program = case.program
    b = Builder(program.body, before=program.return_op, constraints=program.constraints)
    floats = [v for v in program.inputs] + [r for op in program.body.ops for r in op.results
                                             if r.type.dtype.kind == "f"]
    added = []
    for _ in range(draw(st.integers(1, max_steps))):
        x = draw(st.sampled_from(floats))
        value = STEP_BUILDERS[draw(st.sampled_from(STEPS))](draw, b, x)
        if value is not None and value.type.dtype.kind == "f":
            floats.append(value)
            added.append(value)
    outputs = list(program.outputs) + added[-1:] + draw(st.lists(st.sampled_from(added or floats), max_size=2))
    program.set_outputs(outputs)
    return Case(program, case.inputs)


def _neg_neg(draw, b, x):
    return b("np.neg", b("np.neg", x))


def _transpose_pair(draw, b, x):
    if x.type.rank < 2:
        return b("np.neg", x)
    first = b("np.transpose", x, perm=tuple(draw(st.permutations(range(x.type.rank)))))
    return b("np.transpose", first, perm=tuple(draw(st.permutations(range(x.type.rank)))))


def _cast_pair(draw, b, x):
    middle = draw(st.sampled_from(["f16", "f32", "f64"]))
    return b("np.cast", b("np.cast", x, dtype=middle), dtype=x.type.dtype)


def _splat_op(draw, b, x):
    op = draw(st.sampled_from(["mul", "div", "add", "sub", "pow", "maximum", "minimum"]))
    c = _const(b, draw(st.sampled_from(SPLATS)), x.type.dtype, draw(st.sampled_from([(), x.type.shape[-1:]])))
    return b(f"np.{op}", *((c, x) if draw(st.booleans()) else (x, c)))


def _repeat(draw, b, x):
    op = draw(st.sampled_from(["exp", "abs", "tanh", "neg"]))
    return b("np.add", b(f"np.{op}", x), b(f"np.{op}", x))


def _dead(draw, b, x):
    b("np.exp", x)
    return None


def _view_chain(draw, b, x):
    flat = b("np.expand_dims", x, axes=(0,))
    return b("np.reshape", flat, shape=x.type.shape)


def _broadcast(draw, b, x):
    wide = b("np.broadcast_to", x, shape=(2,) + x.type.shape)
    twice = b("np.broadcast_to", wide, shape=(2,) + x.type.shape)
    return b("np.sub", twice, x)


def _slice(draw, b, x):
    shape = x.type.shape
    whole = b("np.slice", x, starts=(0,) * len(shape), stops=shape, steps=(1,) * len(shape))
    if not shape or shape[0] < 2:
        return whole
    first = b("np.slice", whole, starts=(1,) + (0,) * (len(shape) - 1), stops=shape, steps=(1,) * len(shape))
    stops = (first.type.shape[0],) + shape[1:]
    return b("np.slice", first, starts=(0,) * len(shape), stops=stops, steps=(2,) + (1,) * (len(shape) - 1))


def _pad(draw, b, x):
    return b("np.pad", x, pads=(0,) * (2 * x.type.rank), mode=draw(st.sampled_from(["constant", "edge"])))


def _maximum_zero(draw, b, x):
    zero = _const(b, draw(st.sampled_from([0.0, -0.0])), x.type.dtype)
    return b("np.maximum", *((x, zero) if draw(st.booleans()) else (zero, x)))


def _where_const(draw, b, x):
    cond = _const(b, draw(st.booleans()), np.bool_)
    return b("np.where", cond, x, b("np.exp", x))


def _fold(draw, b, x):
    c = b("np.mul", _const(b, 1.5, x.type.dtype), _const(b, draw(st.sampled_from(SPLATS)), x.type.dtype))
    return b("np.add", x, b("np.exp", c))


def _nonneg_chain(draw, b, x):
    ops = draw(st.lists(st.sampled_from(["abs", "relu", "neg", "square"]), min_size=2, max_size=4))
    for op in ops:
        x = b(f"np.{op}", x)
    return x


def _round_chain(draw, b, x):
    for op in draw(st.lists(st.sampled_from(["floor", "ceil", "trunc", "round", "sign"]), min_size=2, max_size=3)):
        x = b(f"np.{op}", x)
    return x


def _unit_reduce(draw, b, x):
    unit = b("np.expand_dims", x, axes=(x.type.rank,))
    op = draw(st.sampled_from(["sum", "max", "min", "prod"]))
    return b(f"np.{op}", unit, axes=(x.type.rank,), keepdims=draw(st.booleans()))


STEP_BUILDERS = {"neg-neg": _neg_neg, "transpose-pair": _transpose_pair, "cast-pair": _cast_pair,
                 "splat-op": _splat_op, "repeat": _repeat, "dead": _dead, "view-chain": _view_chain,
                 "broadcast": _broadcast, "slice": _slice, "pad": _pad, "maximum-zero": _maximum_zero,
                 "where-const": _where_const, "fold": _fold, "nonneg-chain": _nonneg_chain,
                 "round-chain": _round_chain, "unit-reduce": _unit_reduce}

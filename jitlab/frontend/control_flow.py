"""`jl.fori_loop`, `jl.while_loop`, `jl.scan` and `jl.cond`: explicit control flow with JAX's signatures.

Under tracing each traces its functions once, into the regions of one `scf` op (dialects/scf.py),
so the program and its compile time do not grow with the trip count. Carried values are pytrees
(frontend/pytree.py) whose leaves keep their shape and dtype from iteration to iteration; what a
body reads from outside becomes a capture of the op. Called outside any trace, on concrete
values, they run eagerly in Python on numpy arrays, as JAX's do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..dialects.scf import INDEX
from ..errors import InputError, ShapeError, TraceError, UnsupportedOp
from ..ir.core import Block, Region, Value
from ..ir.types import TensorType
from .creation import fill
from .pytree import TreeDef, flatten, unflatten
from .trace_errors import defined_at
from .tracer import ACTIVE, TraceContext, Tracer

INDEX_TYPE = TensorType((), INDEX)


def _is_tracer(x) -> bool:
    return isinstance(x, Tracer)


def _context(*trees) -> TraceContext | None:
    """The trace these values belong to, else the trace running now; None outside any trace."""
    for tree in trees:
        for leaf in flatten(tree, is_leaf=_is_tracer)[0]:
            if isinstance(leaf, Tracer):
                return leaf.ctx
    return ACTIVE[-1] if ACTIVE else None


# -- tracing regions ------------------------------------------------------------------------------
@dataclass
class _Region:
    """One region to trace: its own block arguments' types, and what traces its body into the block
    (given tracers for those arguments, it returns the terminator's operands)."""

    arg_types: list[TensorType]
    body: Callable[[list[Tracer]], list[Value]]
    terminator: str


def _trace_regions(ctx: TraceContext, specs: Sequence[_Region]) -> tuple[list[Block], list[Value]]:
    """Traces each region into a block; every block takes the same captures, in one order, after its
    own arguments. Returns the blocks and the captured values as the enclosing block sees them."""
    blocks, frames, seed = [], [], []
    with _top_level_untouched(ctx):
        for spec in specs:
            block = Block(spec.arg_types)
            with ctx.region(block, seed) as frame:
                outs = spec.body([Tracer(a, ctx) for a in block.args[:len(spec.arg_types)]])
                ctx.builder.create(spec.terminator, outs, result_types=[], loc=ctx.location())
            seed = list(frame.captures)
            blocks.append(block)
            frames.append(frame)
    captured = list(frames[-1].captures)
    for frame in frames[:-1]:
        for v in captured[len(frame.captures):]:
            frame.captures[v] = (frames[-1].captures[v][0], frame.block.add_arg(v.type))
    return blocks, [frames[-1].captures[v][0] for v in captured]


@contextmanager
def _top_level_untouched(ctx: TraceContext):
    """Refuses a body that adds ops to the program's top level instead of its own block (jl.grad's
    backward pass does), and takes them out again: they would read values of the region."""
    top = ctx.program.body
    mark = top.last_op
    try:
        yield
    finally:
        stray = []
        op = top.first_op if mark is None else mark.next_op
        while op is not None:
            stray.append(op)
            op = op.next_op
        for op in reversed(stray):
            op.erase()
    if stray:
        raise UnsupportedOp(f"jl.grad inside a loop body or a branch is not supported yet: reverse mode is "
                            f"traced at the program's top level ({ctx.where()})")


def _build(ctx: TraceContext, name: str, operands: list[Value], blocks: list[Block],
           result_types: list[TensorType], attrs: dict | None = None) -> list[Tracer]:
    loc = ctx.location()
    op = ctx.builder.create(name, operands, attrs, result_types, [Region([b]) for b in blocks], loc)
    ctx._count(loc)
    return [Tracer(r, ctx) for r in op.results]


# -- values in and out of bodies --------------------------------------------------------------------
def _index(ctx: TraceContext, v, what: str) -> Tracer:
    """A loop bound as an i64 scalar."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer, Tracer)) and \
            not (isinstance(v, np.ndarray) and v.ndim == 0):
        raise TraceError(f"{what} must be an integer scalar, got {type(v).__name__} ({ctx.where()})")
    t = ctx.lift(v) if isinstance(v, Tracer) else ctx.constant(int(v), INDEX)
    if t.ndim != 0 or t.dtype.kind not in "iu":
        raise TraceError(f"{what} must be an integer scalar, got {t.value.type} ({ctx.where()})")
    return t if t.dtype == INDEX else ctx.op("np.cast", t.value, dtype=INDEX)


def _carry_in(ctx: TraceContext, x) -> Tracer:
    return ctx.lift(x) if isinstance(x, Tracer) else ctx.lift(np.asarray(x))


def _leaf_value(ctx: TraceContext, leaf, dtype: np.dtype | None) -> Tracer:
    """A body's output leaf as a tracer: a Python number takes the dtype it stands beside (JAX's weak type)."""
    if isinstance(leaf, Tracer):
        return ctx.lift(leaf)
    if isinstance(leaf, (bool, int, float, complex)) and dtype is not None:
        return ctx.constant(leaf, dtype)
    return ctx.lift(np.asarray(leaf))


def _outputs(ctx: TraceContext, out, tree: TreeDef, types: Sequence[TensorType], names: Sequence[str],
             what: str, fn: Callable) -> list[Value]:
    """The leaves of a body's result as values of `types`; a ShapeError naming the leaf if one differs."""
    leaves, _, got = flatten(out, is_leaf=_is_tracer)
    fn_name = getattr(fn, "__name__", "the function")
    if got != tree:
        raise TraceError(f"{what}: {fn_name}{defined_at(fn)} returns {_structure(got)} where {_structure(tree)} "
                         f"was expected ({ctx.where()})")
    values = []
    for leaf, t, name in zip(leaves, types, names):
        v = _leaf_value(ctx, leaf, t.dtype)
        if v.value.type != t:
            raise CarryMismatch(len(values), t, v.value.type,
                                 f"{what}: {name} is {t} on entry but {fn_name}{defined_at(fn)} returns "
                                 f"{v.value.type} ({ctx.where()}); a carried value keeps its shape and dtype from "
                                 "iteration to iteration: cast it, or start it with the shape and dtype it takes")
        values.append(v.value)
    return values


class CarryMismatch(ShapeError):
    """A carried value whose type the body changes: which one, and the type the body gives it."""

    def __init__(self, index: int, expected: TensorType, got: TensorType, message: str):
        super().__init__(message)
        self.index, self.expected, self.got = index, expected, got


def _weakly_typed(ctx: TraceContext, leaves: list, trace: Callable[[list[Tracer]], Any]):
    """`trace(init)` where a carry that starts as a Python number takes the dtype the body gives it, as
    numpy's weak scalars do (`total = 0.0; total += x[i]` carries x's float32): traced again then."""
    init = [_carry_in(ctx, x) for x in leaves]
    for _ in range(len(leaves) + 1):
        try:
            return trace(init)
        except CarryMismatch as e:
            leaf = leaves[e.index]
            weak = isinstance(leaf, (bool, int, float, complex)) and init[e.index].dtype != e.got.dtype
            if not weak or e.got.shape != () or np.result_type(leaf, e.got.dtype) != e.got.dtype:
                raise
            init[e.index] = ctx.constant(leaf, e.got.dtype)
    raise AssertionError("unreachable: each retry fixes one carry's dtype")


def _structure(tree: TreeDef) -> str:
    if tree.kind in ("leaf", "none"):
        return "an array" if tree.kind == "leaf" else "None"
    return f"a {tree.kind} of {len(tree.children)}"


# -- the four forms --------------------------------------------------------------------------------
def fori_loop(lower, upper, body_fun: Callable, init_val):
    """`for i in range(lower, upper): val = body_fun(i, val)`, returning val; traced as one scf.for."""
    ctx = _context(lower, upper, init_val)
    if ctx is None:
        val = init_val
        for i in range(int(lower), int(upper)):
            val = body_fun(np.int64(i), val)
        return val
    bounds = [_index(ctx, lower, "jl.fori_loop's lower"), _index(ctx, upper, "jl.fori_loop's upper"),
              ctx.constant(1, INDEX)]
    leaves, names, tree = flatten(init_val, "init_val", is_leaf=_is_tracer)

    def trace(init: list[Tracer]):
        types = [t.value.type for t in init]

        def body(args: list[Tracer]) -> list[Value]:
            i, *carried = args
            return _outputs(ctx, body_fun(i, unflatten(tree, carried)), tree, types, names, "jl.fori_loop",
                            body_fun)

        blocks, captures = _trace_regions(ctx, [_Region([INDEX_TYPE, *types], body, "scf.yield")])
        return _build(ctx, "scf.for", [*(b.value for b in bounds), *(t.value for t in init), *captures], blocks,
                      types)

    return unflatten(tree, _weakly_typed(ctx, leaves, trace))


def while_loop(cond_fun: Callable, body_fun: Callable, init_val, max_iterations: int | None = None):
    """`while cond_fun(val): val = body_fun(val)`, returning val; traced as one scf.while. With
    `max_iterations`, a loop whose condition still holds after that many bodies is an InputError."""
    if max_iterations is not None and (isinstance(max_iterations, bool) or not isinstance(max_iterations, int)
                                       or max_iterations < 0):
        raise InputError(f"jl.while_loop: max_iterations must be a non-negative int or None, got {max_iterations!r}")
    ctx = _context(init_val)
    if ctx is None:
        return _while_eager(cond_fun, body_fun, init_val, max_iterations)
    leaves, names, tree = flatten(init_val, "init_val", is_leaf=_is_tracer)

    def trace(init: list[Tracer]):
        types = [t.value.type for t in init]

        def before(args: list[Tracer]) -> list[Value]:
            return [_predicate(ctx, cond_fun(unflatten(tree, args)), "jl.while_loop's cond_fun", strict=True).value]

        def after(args: list[Tracer]) -> list[Value]:
            return _outputs(ctx, body_fun(unflatten(tree, args)), tree, types, names, "jl.while_loop", body_fun)

        blocks, captures = _trace_regions(ctx, [_Region(types, before, "scf.condition"),
                                                _Region(types, after, "scf.yield")])
        return _build(ctx, "scf.while", [*(t.value for t in init), *captures], blocks, types,
                      {"max_iterations": max_iterations})

    return unflatten(tree, _weakly_typed(ctx, leaves, trace))


def _while_eager(cond_fun: Callable, body_fun: Callable, val, bound: int | None):
    k = 0
    while bool(cond_fun(val)):
        if bound is not None and k >= bound:
            raise InputError(f"jl.while_loop: the loop has run max_iterations={bound} times and its condition "
                             "still holds")
        val = body_fun(val)
        k += 1
    return val


def _predicate(ctx: TraceContext, p, what: str, strict: bool = False) -> Tracer:
    """A branch's or loop's condition as a bool scalar (a number: whether it is non-zero, as JAX's cond)."""
    t = _leaf_value(ctx, p, None) if not isinstance(p, (bool, np.bool_)) else ctx.constant(bool(p), np.bool_)
    if t.ndim != 0 or (strict and t.dtype != np.bool_) or t.dtype.kind not in "biuf":
        raise TraceError(f"{what} must give a {'bool' if strict else 'bool or number'} scalar, got {t.value.type} "
                         f"({ctx.where()})")
    return t if t.dtype == np.bool_ else ctx.op("np.not_equal", t.value, ctx.constant(0, t.dtype).value)


def cond(pred, true_fun: Callable, false_fun: Callable, *operands):
    """`true_fun(*operands) if pred else false_fun(*operands)`; traced as one scf.if, both branches traced."""
    ctx = _context(pred, operands)
    if ctx is None or not isinstance(pred, Tracer):
        return true_fun(*operands) if bool(pred) else false_fun(*operands)
    p = _predicate(ctx, pred, "jl.cond's pred")
    seen: dict[str, Any] = {}

    def branch(fn: Callable) -> Callable[[list[Tracer]], list[Value]]:
        def body(_: list[Tracer]) -> list[Value]:
            leaves, names, tree = flatten(fn(*operands), "output", is_leaf=_is_tracer)
            if "tree" not in seen:
                values = [_leaf_value(ctx, x, None).value for x in leaves]
                seen.update(tree=tree, names=names, types=[v.type for v in values])
                return values
            return _outputs(ctx, unflatten(tree, leaves), seen["tree"], seen["types"], seen["names"],
                            "jl.cond (false_fun against true_fun)", fn)
        return body

    blocks, captures = _trace_regions(ctx, [_Region([], branch(true_fun), "scf.yield"),
                                            _Region([], branch(false_fun), "scf.yield")])
    outs = _build(ctx, "scf.if", [p.value, *captures], blocks, seen["types"])
    return unflatten(seen["tree"], outs)


def scan(f: Callable, init, xs, length: int | None = None, reverse: bool = False):
    """`carry, y = f(carry, x)` over the leading axis of `xs`, returning (carry, stacked ys); traced as
    one scf.for whose body slices `xs` and writes `ys` at the step's index."""
    ctx = _context(init, xs)
    x_leaves, _, x_tree = flatten(xs, is_leaf=_is_tracer)
    n = _scan_length(x_leaves, length, ctx)
    if ctx is None:
        return _scan_eager(f, init, x_leaves, x_tree, n, reverse)
    leaves, names, tree = flatten(init, "init", is_leaf=_is_tracer)
    init_t = [_carry_in(ctx, x) for x in leaves]
    types = [t.value.type for t in init_t]
    xs_t = [_carry_in(ctx, x) for x in x_leaves]
    ys: dict[str, Any] = {}

    def body(args: list[Tracer]) -> list[Value]:
        i, *carried = args
        at = ctx.op("np.sub", ctx.constant(n - 1, INDEX).value, i.value) if reverse else i
        x = unflatten(x_tree, [_row(ctx, leaf, at) for leaf in xs_t])
        out = f(unflatten(tree, carried), x)
        if not isinstance(out, tuple) or len(out) != 2:
            raise TraceError(f"jl.scan: {getattr(f, '__name__', 'f')}{defined_at(f)} must return a pair "
                             f"(carry, y) ({ctx.where()})")
        new = _outputs(ctx, out[0], tree, types, names, "jl.scan", f)
        y_leaves, _, ys["tree"] = flatten(out[1], is_leaf=_is_tracer)
        ys["types"] = []
        updated = []
        for j, leaf in enumerate(_leaf_value(ctx, y, None) for y in y_leaves):
            stacked = TensorType((n, *leaf.shape), leaf.dtype)
            buf = ctx.frames[-1].block.insert_arg(1 + len(types) + j, stacked)
            row = ctx.op("np.reshape", leaf.value, shape=(1, *leaf.shape))
            updated.append(ctx.op("np.dynamic_update_slice", buf, row.value, at.value, axes=(0,), sizes=(1,),
                                  index_axes=(0,)).value)
            ys["types"].append(stacked)
        return [*new, *updated]

    blocks, captures = _trace_regions(ctx, [_Region([INDEX_TYPE, *types], body, "scf.yield")])
    zeros = [fill(ctx, t.shape, 0, t.dtype).value for t in ys["types"]]
    bounds = [ctx.constant(0, INDEX), ctx.constant(n, INDEX), ctx.constant(1, INDEX)]
    outs = _build(ctx, "scf.for", [*(b.value for b in bounds), *(t.value for t in init_t), *zeros, *captures],
                  blocks, [*types, *ys["types"]])
    return unflatten(tree, outs[:len(types)]), unflatten(ys["tree"], outs[len(types):])


def _row(ctx: TraceContext, leaf: Tracer, at: Tracer) -> Tracer:
    row = ctx.op("np.dynamic_slice", leaf.value, at.value, axes=(0,), sizes=(1,), index_axes=(0,))
    return ctx.op("np.reshape", row.value, shape=tuple(leaf.shape[1:]))


def _scan_length(x_leaves: list, length: int | None, ctx: TraceContext | None) -> int:
    where = f" ({ctx.where()})" if ctx is not None else ""
    sizes = {np.shape(x)[0] if np.ndim(x) else None for x in x_leaves}
    if None in sizes:
        raise ShapeError(f"jl.scan: every leaf of xs needs a leading axis to scan over{where}")
    if length is not None:
        sizes.add(length)
    if len(sizes) != 1:
        raise ShapeError(f"jl.scan: xs's leading axes and length disagree: {sorted(map(str, sizes))}{where}"
                         if sizes else f"jl.scan: give xs or length{where}")
    (n,) = sizes
    if not isinstance(n, (int, np.integer)):
        raise UnsupportedOp(f"jl.scan over a symbolic leading axis {n} is not supported; give a static length{where}")
    return int(n)


def _scan_eager(f: Callable, carry, x_leaves: list, x_tree: TreeDef, n: int, reverse: bool):
    steps = range(n - 1, -1, -1) if reverse else range(n)
    ys = []
    for i in steps:
        carry, y = f(carry, unflatten(x_tree, [leaf[i] for leaf in x_leaves]))
        ys.append(flatten(y)[0])
    if not ys:
        raise UnsupportedOp("jl.scan of length 0 run eagerly: the shape of ys is not known without tracing f")
    if reverse:
        ys.reverse()
    y_tree = flatten(y)[2]
    return carry, unflatten(y_tree, [np.stack(parts) for parts in zip(*ys)])

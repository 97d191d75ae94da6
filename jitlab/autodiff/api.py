"""`jl.grad` and `jl.value_and_grad`.

Called on tracers (inside `@jl.jit`, `jl.trace` or another `jl.grad`), the function's
forward ops are traced into the current program and its backward ops appended right
after them, so a whole training step compiles as one program. Called on arrays, the
same happens inside a `jl.jit` of the differentiated function, compiled at `level`
once per input signature. Values the function closes over are constants to the
gradient, as in JAX.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import DTypeError, TraceError
from ..frontend.jit import JitFunction
from ..frontend.pytree import flatten, unflatten
from ..frontend.tracer import TraceContext, Tracer
from ..ir.builder import Builder
from ..ir.core import Operation
from .emit import BackwardContext
from .transform import backward, check_loss


def _is_array(x) -> bool:
    return isinstance(x, (Tracer, np.ndarray, np.generic))


def _find_context(tree) -> TraceContext | None:
    for leaf in flatten(tree, is_leaf=_is_array)[0]:
        if isinstance(leaf, Tracer):
            return leaf.ctx
    return None


def _ops_after(ctx: TraceContext, mark: Operation | None) -> list[Operation]:
    op = ctx.builder.block.first_op if mark is None else mark.next_op
    ops = []
    while op is not None:
        ops.append(op)
        op = op.next_op
    return ops


class GradFunction:
    """`fn` turned into a function returning its gradient (and value) w.r.t. `argnums`."""

    def __init__(self, fn: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
                 with_value: bool = False, level: str = "O0", target: str = "auto", recompute: bool = False):
        self.fn, self.argnums, self.has_aux, self.with_value = fn, argnums, has_aux, with_value
        self.recompute = recompute
        self._positions = (argnums,) if isinstance(argnums, int) else tuple(argnums)
        functools.update_wrapper(self, fn, updated=())     # not fn's __dict__: see JitFunction
        self.__name__ = f"{'value_and_grad' if with_value else 'grad'}_{getattr(fn, '__name__', 'fn')}"

        @functools.wraps(fn, updated=())
        def step(*args, **kwargs):
            return self.trace_call(args, kwargs)

        step.__name__ = self.__name__
        self._eager = JitFunction(step, level, target)

    def __call__(self, *args, **kwargs):
        if _find_context((args, kwargs)) is not None:
            return self.trace_call(args, kwargs)
        return self._eager(*self._scalars_to_arrays(args), **kwargs)

    def _scalars_to_arrays(self, args: tuple) -> list:
        """Python scalars to differentiate become arrays, so they are inputs, not constants."""
        args = list(args)
        for i in self._positions:
            if 0 <= i < len(args):
                leaves, _, tree = flatten(args[i], is_leaf=_is_array)
                args[i] = unflatten(tree, [np.asarray(x) if isinstance(x, (bool, int, float)) else x
                                           for x in leaves])
        return args

    def trace_call(self, args: tuple, kwargs: dict) -> Any:
        """Traces fn and its backward graph into the trace its arguments belong to."""
        ctx = _find_context((args, kwargs))
        if ctx is None:
            raise TraceError(f"{self.__name__}: argnums {self.argnums} select no array to differentiate")
        args = list(args)
        taken: set = set()
        wrt = [self._wrt_argument(ctx, args, i, taken) for i in self._positions]
        # the block being traced: a loop's body or a branch when jl.grad is called inside one
        mark = ctx.builder.block.last_op
        inputs = [t.value for _, leaves in wrt for t in leaves]     # before fn can write into them
        value, aux = self._split_output(self.fn(*args, **kwargs))
        loss = ctx.lift(value)
        g = self._gradients(ctx, _ops_after(ctx, mark), wrt, inputs, loss)
        if self.with_value:
            return ((loss, aux) if self.has_aux else loss), g
        return (g, aux) if self.has_aux else g

    def _gradients(self, ctx: TraceContext, forward: list[Operation], wrt: list, inputs: list, loss: Tracer):
        """Appends the backward graph of `forward`; gives the gradients in the arguments' structure."""
        check_loss(loss.value, f"the value {getattr(self.fn, '__name__', 'fn')} returns")
        bctx = BackwardContext(ctx.program, Builder(ctx.builder.block, constraints=ctx.program.constraints),
                               self.__name__, self.recompute)
        flat = backward(bctx, forward, inputs, loss.value)
        grads = iter(Tracer(g.value, ctx) for g in flat)
        trees = [unflatten(tree, [next(grads) for _ in leaves]) for tree, leaves in wrt]
        return trees[0] if isinstance(self.argnums, int) else tuple(trees)

    def _wrt_argument(self, ctx: TraceContext, args: list, i: int, taken: set):
        """Replaces args[i] by fresh tracers, one per array leaf; returns (structure, tracers)."""
        if not 0 <= i < len(args):
            raise TraceError(f"{self.__name__}: argnums {self.argnums} asks for positional argument {i}, "
                             f"but it was called with {len(args)}")
        leaves, names, tree = flatten(args[i], f"argument {i}", is_leaf=_is_array)
        tracers = [self._fresh(ctx, leaf, name, taken) for leaf, name in zip(leaves, names)]
        args[i] = unflatten(tree, tracers)
        return tree, tracers

    def _fresh(self, ctx: TraceContext, leaf, name: str, taken: set) -> Tracer:
        t = ctx.lift(leaf)
        if not ctx.is_local(t.value):   # an array from outside the loop body being traced: its capture
            t = Tracer(ctx.local(t.value), ctx)
        if t.dtype.kind != "f":
            raise DTypeError(f"{self.__name__}: {name} is {t.value.type}; only float arrays can be differentiated")
        if t.value in taken:
            # The same array passed twice must give two gradients: a no-op view makes a second value.
            t = ctx.op("np.reshape", t.value, shape=t.shape)
        taken.add(t.value)
        return t

    def _split_output(self, out) -> tuple[Any, Any]:
        if not self.has_aux:
            return out, None
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise TraceError(f"{self.__name__}: with has_aux=True the function must return (loss, aux), "
                             f"got {type(out).__name__}")
        return out[0], out[1]

    def __repr__(self) -> str:
        return f"<jl.{self.__name__} argnums={self.argnums}>"


def grad(fn: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False, *, level: str = "O0",
         target: str = "auto", recompute: bool = False) -> GradFunction:
    """The gradient of scalar-valued `fn` w.r.t. positional arguments `argnums` (arrays or
    dicts/lists of arrays); with has_aux, fn returns (loss, aux) and this gives (grads, aux).
    With recompute, loops keep no carried value per iteration for the backward pass: each
    reverse iteration reruns the loop up to it (no memory per iteration, trip count squared work)."""
    return GradFunction(fn, argnums, has_aux, False, level, target, recompute)


def value_and_grad(fn: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False, *,
                   level: str = "O0", target: str = "auto", recompute: bool = False) -> GradFunction:
    """Like `grad`, but returns (value, grads), or ((value, aux), grads) with has_aux."""
    return GradFunction(fn, argnums, has_aux, True, level, target, recompute)

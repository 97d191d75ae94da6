"""Optimizer updates written in traced numpy: call them inside `@jl.jit` (or eagerly on
arrays) with parameters, gradients and optimizer state as pytrees (dicts, lists, tuples
of arrays), and they return the new ones in the same structure.

    @jl.jit(donate_argnums=(0, 1))
    def step(params, state, x, y):
        loss, grads = jl.value_and_grad(loss_fn)(params, x, y)
        params, state = jl.optim.adam(params, grads, state, lr=1e-3)
        return loss, params, state
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .errors import JitlabError
from .frontend.pytree import flatten, unflatten
from .frontend.tracer import Tracer


def _is_array(x) -> bool:
    return isinstance(x, (Tracer, np.ndarray, np.generic))


def tree_map(fn: Callable, tree: Any, *others: Any) -> Any:
    """fn applied leaf by leaf to `tree` and trees of the same structure."""
    leaves, _, treedef = flatten(tree, is_leaf=_is_array)
    rest = []
    for other in others:
        other_leaves, _, other_def = flatten(other, is_leaf=_is_array)
        if other_def != treedef:
            raise JitlabError(f"jl.optim: structures differ: {treedef} and {other_def}")
        rest.append(other_leaves)
    return unflatten(treedef, [fn(*args) for args in zip(leaves, *rest)])


def _same_dtype(value, like):
    """value in the dtype of `like`: python-float hyperparameters must not promote f32 to f64."""
    return value.astype(like.dtype) if value.dtype != like.dtype else value


def sgd(params: Any, grads: Any, lr: float, momentum: float = 0.0, velocity: Any = None):
    """Plain SGD `p - lr*g`; with momentum (and `velocity`, a pytree like params) it returns
    (new params, new velocity) for `v = momentum*v + g; p - lr*v`."""
    if momentum == 0.0:
        return tree_map(lambda p, g: _same_dtype(p - lr * g, p), params, grads)
    if velocity is None:
        raise JitlabError("jl.optim.sgd: momentum needs `velocity` (start from jl.optim.zeros_like(params))")
    velocity = tree_map(lambda v, g: _same_dtype(momentum * v + g, v), velocity, grads)
    return tree_map(lambda p, v: _same_dtype(p - lr * v, p), params, velocity), velocity


def zeros_like(params: Any) -> Any:
    """Zero numpy arrays shaped like `params` (optimizer state to start from)."""
    return tree_map(lambda p: np.zeros(np.shape(p), np.asarray(p).dtype), params)


def adam_init(params: Any) -> dict:
    """Adam's state for `params`: first and second moments at zero and the step count."""
    return {"m": zeros_like(params), "v": zeros_like(params), "t": np.zeros((), np.float32)}


def adam(params: Any, grads: Any, state: dict, lr: float = 1e-3, b1: float = 0.9, b2: float = 0.999,
         eps: float = 1e-8) -> tuple[Any, dict]:
    """One Adam step (Kingma & Ba); returns (new params, new state)."""
    t = state["t"] + 1
    m = tree_map(lambda m, g: _same_dtype(b1 * m + (1 - b1) * g, m), state["m"], grads)
    v = tree_map(lambda v, g: _same_dtype(b2 * v + (1 - b2) * g * g, v), state["v"], grads)
    # Bias corrections folded into the step size, as the paper's final formulation does.
    scale = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
    new = tree_map(lambda p, m, v: _same_dtype(p - _same_dtype(scale, p) * m / (np.sqrt(v) + eps), p),
                   params, m, v)
    return new, {"m": m, "v": v, "t": t}

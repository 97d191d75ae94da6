"""Gradient checks: jl.grad at O0 against central finite differences in float64."""

from __future__ import annotations

import numpy as np

import jitlab as jl
from jitlab.frontend.tracer import Tracer
from jitlab.ir import get_opdef
from jitlab.ir.attributes import normalize_attrs


def numeric_grad(f, args: list[np.ndarray], i: int, eps: float = 1e-6) -> np.ndarray:
    """d f / d args[i] by central differences, one element at a time."""
    x = np.array(args[i], dtype=np.float64)
    out = np.zeros_like(x)
    for k in np.ndindex(x.shape):
        hi, lo = x.copy(), x.copy()
        hi[k] += eps
        lo[k] -= eps
        out[k] = (f(*args[:i], hi, *args[i + 1:]) - f(*args[:i], lo, *args[i + 1:])) / (2 * eps)
    return out


def weighted_loss(fn, args, seed: int = 0):
    """sum(fn(*args) * r) for a fixed random r: checks the whole VJP, not only its sum."""
    out = np.asarray(fn(*args))
    r = np.random.default_rng(seed).standard_normal(out.shape)
    return lambda *a: np.sum(fn(*a) * r)


def check_grads(fn, *args, argnums=None, rtol: float = 1e-5, atol: float = 1e-7, eps: float = 1e-6):
    """jl.grad of sum(fn * r) w.r.t. each float argument equals finite differences."""
    args = [np.asarray(a) for a in args]
    if argnums is None:
        argnums = tuple(i for i, a in enumerate(args) if a.dtype.kind == "f")
    loss = weighted_loss(fn, args)
    grads = jl.grad(loss, argnums=argnums)(*args)
    for i, g in zip(argnums, grads):
        assert g.shape == args[i].shape and g.dtype == args[i].dtype, f"argument {i}: {g.dtype}{g.shape}"
        np.testing.assert_allclose(g, numeric_grad(loss, args, i, eps), rtol=rtol, atol=atol,
                                   err_msg=f"gradient of argument {i}")
    return grads


def op_fn(name: str, **attrs):
    """Op `name` as a function: emitted when traced, its numpy reference on arrays."""
    opdef = get_opdef(name)

    def apply(*xs):
        tracer = next((x for x in xs if isinstance(x, Tracer)), None)
        if tracer is None:
            return opdef.reference(*xs, **normalize_attrs(name, opdef.attrs, attrs))
        return tracer.ctx.op(name, *(tracer.ctx.lift(x).value for x in xs), **attrs)

    return apply

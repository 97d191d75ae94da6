"""VJP rules of composite ops, written directly (not through their decompositions) so the
backward graph stays as small as the forward one: softmax, log_softmax, layer_norm,
inference-mode batch_norm and gelu (sigmoid is with the elementwise rules)."""

from __future__ import annotations

import math

import numpy as np

from ..emit import sum_to
from ..registry import Primal, vjp


@vjp("np.softmax")
def _softmax(p: Primal, g):
    y = p.out
    return [y * (g - np.sum(g * y, axis=p.attrs["axis"], keepdims=True))]


@vjp("np.log_softmax")
def _log_softmax(p: Primal, g):
    return [g - np.exp(p.out) * np.sum(g, axis=p.attrs["axis"], keepdims=True)]


@vjp("np.layer_norm")
def _layer_norm(p: Primal, g):
    x, *params = p.args
    axes = tuple(range(p.attrs["axis"], x.ndim))
    centered = x - np.mean(x, axis=axes, keepdims=True)
    rstd = p.emit("np.rsqrt", np.mean(centered * centered, axis=axes, keepdims=True) + p.attrs["eps"])
    normed = centered * rstd
    gn = g * params[0] if params else g
    dx = rstd * (gn - np.mean(gn, axis=axes, keepdims=True) - normed * np.mean(gn * normed, axis=axes, keepdims=True))
    grads = [dx]
    if params:
        grads.append(sum_to(g * normed, params[0].shape) if p.wants[1] else None)
    if len(params) > 1:
        grads.append(sum_to(g, params[1].shape) if p.wants[2] else None)
    return grads


@vjp("np.batch_norm")
def _batch_norm(p: Primal, g):
    x, scale, _, mean, var = p.args
    per_channel = lambda t: np.reshape(t, (1, x.shape[1]) + (1,) * (x.ndim - 2))
    axes = (0,) + tuple(range(2, x.ndim))
    inv = p.emit("np.rsqrt", var + p.attrs["eps"])
    g_sum = np.sum(g, axis=axes)
    g_centered = np.sum(g * (x - per_channel(mean)), axis=axes)
    return [g * per_channel(scale * inv), g_centered * inv, g_sum, -g_sum * scale * inv,
            g_centered * scale * (-0.5) * inv * inv * inv]


@vjp("np.gelu")
def _gelu(p: Primal, g):
    x = p.args[0]
    if p.attrs["approximate"] == "tanh":
        c = math.sqrt(2 / math.pi)
        t = np.tanh(c * (x + 0.044715 * x * x * x))
        d = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x)
    else:
        cdf = 0.5 * (1 + p.emit("np.erf", x * (1 / math.sqrt(2))))
        d = cdf + x * np.exp(-0.5 * x * x) * (1 / math.sqrt(2 * math.pi))
    return [g * d]

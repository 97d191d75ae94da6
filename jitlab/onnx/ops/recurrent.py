"""Ops that carry a state along the sequence: LinearAttention's recurrence (unrolled over
the static sequence length) and CausalConvWithState (a depthwise convolution over the
past state and the input)."""

from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from ..graph import T
from ..node import Node
from ..registry import onnx_op
from .util import repeat_axis, slice_axis, static_dim, unary, unroll_steps
from .window import Window, conv

RULES = ("linear", "gated", "delta", "gated_delta")


def _heads(x: T, heads: int) -> T:
    """(B, T, H*D) -> (B, H, T, D) in float32, where the recurrence runs."""
    b, t, hd = x.shape
    return x.reshape((b, t, heads, hd // heads)).transpose((0, 2, 1, 3)).cast(np.float32)


def _per_head(x: T, heads: int) -> T:
    """A decay or beta input as (B, H, T, 1) when it has one value per head, else per channel."""
    b, t, last = x.shape
    if last != heads:
        return _heads(x, heads)
    return x.reshape((b, t, heads, 1)).transpose((0, 2, 1, 3)).cast(np.float32)


def _step(x: T, t: int) -> T:
    """Step t of (B, H, T, D) as (B, H, D)."""
    one = slice_axis(x, 2, t, t + 1)
    return x.g.op("np.squeeze", one, axes=(2,))


def _update(state: T, k_t: T, v_t: T, g_t: T | None, b_t: T | None) -> T:
    """One step of the recurrence: decay the state, correct the value by what it already holds, add k (x) v."""
    g = state.g
    if g_t is not None:
        state = state * g.op("np.expand_dims", unary("exp", g_t), axes=(3,))
    if b_t is not None:
        held = g.op("np.squeeze", g.op("np.matmul", g.op("np.expand_dims", k_t, axes=(2,)), state), axes=(2,))
        v_t = b_t * (v_t - held)
    return state + g.op("np.expand_dims", k_t, axes=(3,)) * g.op("np.expand_dims", v_t, axes=(2,))


@onnx_op("LinearAttention", 27)
def linear_attention(n: Node):
    q, k, v = n.input(0), n.input(1), n.input(2)
    past, decay, beta = (n.input(i, required=False) for i in (3, 4, 5))
    rule = n.attr("update_rule", "gated_delta")
    if rule not in RULES:
        raise n.unsupported(f"attribute 'update_rule' = {rule!r}")
    n.attr("chunk_size", 64)                    # a tuning hint that does not change the result
    q_heads, kv_heads = n.attr("q_num_heads"), n.attr("kv_num_heads")
    gated, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    if gated != (decay is not None) or delta != (beta is not None):
        raise n.error(ShapeError, f"update_rule {rule!r} takes decay: {gated}, beta: {delta}")
    b, steps = q.shape[0], unroll_steps(n, q.shape[1])
    dk, dv = q.shape[2] // q_heads, v.shape[2] // kv_heads
    q4, k4, v4 = _heads(q, q_heads), _heads(k, kv_heads), _heads(v, kv_heads)
    g4 = _per_head(decay, kv_heads) if decay is not None else None
    b4 = _per_head(beta, beta.shape[2]) if beta is not None else None
    scale = float(n.attr("scale", 0.0) or 1 / np.sqrt(dk))
    state = past.cast(np.float32) if past is not None else n.g.full((b, kv_heads, dk, dv), 0, np.float32)
    outputs = []
    for t in range(steps):
        g_t = _step(g4, t) if g4 is not None else None
        b_t = _step(b4, t) if b4 is not None else None
        state = _update(state, _step(k4, t), _step(v4, t), g_t, b_t)
        read = repeat_axis(state, 1, q_heads // kv_heads)
        outputs.append(n.g.op("np.matmul", n.g.op("np.expand_dims", _step(q4, t), axes=(2,)), read) * scale)
    out = n.g.op("np.concatenate", *outputs, axis=2) if len(outputs) > 1 else outputs[0]
    out = out.transpose((0, 2, 1, 3)).reshape((b, steps, q_heads * dv)).cast(q.dtype)
    return out, state.cast(past.dtype if past is not None else q.dtype)


@onnx_op("CausalConvWithState", 27)
def causal_conv_with_state(n: Node):
    x, w = n.input(0), n.input(1)
    bias, past = n.input(2, required=False), n.input(3, required=False)
    activation = n.attr("activation", "none")
    if activation not in ("none", "silu", "swish"):
        raise n.unsupported(f"attribute 'activation' = {activation!r}")
    batch, channels, _ = x.shape
    k = static_dim(n, w.shape[2], "the kernel size")
    if past is None:
        past = n.g.full((batch, channels, k - 1), 0, x.dtype)
    padded = n.g.op("np.concatenate", past, x, axis=2)
    y = conv(padded, w, Window((k,), (1,), (1,), (0,), (0,)), channels)
    if bias is not None:
        y = y + bias.reshape((channels, 1))
    if activation != "none":
        wide = y.cast(np.float32)
        y = (wide * unary("sigmoid", wide)).cast(x.dtype)
    length = padded.shape[2]
    return y, slice_axis(padded, 2, length - (k - 1), length)

"""Attention and RotaryEmbedding, decomposed into matmuls, masks and a guarded softmax.

The attention bias is built as onnx's reference builds it: the causal frontier and the
sliding window are computed from the query and key positions (at import time when the
offset is fixed, in the graph when it comes from `nonpad_kv_seqlen`), added to the mask,
and a query row whose every key is masked gives zeros, not NaN.
"""

from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from ..graph import T
from ..node import Node
from ..reader import dtype_of
from ..registry import onnx_op
from .util import repeat_axis, slice_axis, unary, where


def _heads(x: T, heads: int) -> T:
    """(B, S, H*D) -> (B, H, S, D)."""
    b, s, hidden = x.shape
    return x.reshape((b, s, heads, hidden // heads)).transpose((0, 2, 1, 3))


def _bias_from_mask(mask: T, dtype) -> T:
    """A boolean mask as 0 (attend) / -inf (masked); a float mask is already a bias."""
    if mask.dtype.kind != "b":
        return mask
    g = mask.g
    return where(mask, g.scalar(0, dtype), g.scalar(-np.inf, dtype))


def _frontier(g, q: int, kv: int, offset, dtype, left: int, right: int, causal: bool) -> T:
    """Bias of allowed (0) / disallowed (-inf) keys: causal `j <= i + offset` and/or the window
    `i + offset - left <= j <= i + offset + right`. `offset` is an int or a (B,) tensor."""
    i = g.const(np.arange(q, dtype=np.int64).reshape(q, 1))
    j = g.const(np.arange(kv, dtype=np.int64).reshape(1, kv))
    batched = not isinstance(offset, int)
    diff = (i + (offset.reshape(offset.shape + (1, 1)) if batched else offset)) - j     # ([B,] q, kv)
    allowed = g.full((q, kv), True, np.bool_)
    if causal:
        allowed = allowed & (diff >= 0)
    if left >= 0:
        allowed = allowed & (diff <= left)
    if right >= 0:
        allowed = allowed & ((-diff) <= right)
    bias = where(allowed, g.scalar(0, dtype), g.scalar(-np.inf, dtype))
    return bias.reshape((offset.shape[0], 1, q, kv)) if batched else bias


def _guarded_softmax(x: T) -> T:
    """Softmax over the last axis where a row of only -inf gives zeros instead of NaN."""
    top = x.reduce("max", (x.rank - 1,), keepdims=True)
    masked = top.eq(-np.inf)
    e = unary("exp", x - where(masked, top._lift(0), top))
    total = e.reduce("sum", (x.rank - 1,), keepdims=True)
    return e / where(total.eq(0), total._lift(1), total)


def _split_heads(n: Node, q: T, k: T, v: T) -> tuple[T, T, T]:
    """Q, K, V as (B, H, S, D): 4-D inputs already are, 3-D ones are unpacked by head counts."""
    q_heads, kv_heads = n.attr("q_num_heads", None), n.attr("kv_num_heads", None)
    if q.rank == 4:
        return q, k, v
    if q.rank != 3 or q_heads is None or kv_heads is None:
        raise n.error(ShapeError, f"Q {q.type} must be 4-D, or 3-D with q_num_heads and kv_num_heads")
    return _heads(q, q_heads), _heads(k, kv_heads), _heads(v, kv_heads)


def _scores(n: Node, q: T, k: T) -> T:
    """softcap(Q*sqrt(scale) @ (K*sqrt(scale))^T), K's heads repeated for grouped queries."""
    scale = n.attr("scale", None)
    root = float(q.dtype.type(np.sqrt(1 / np.sqrt(q.shape[3]) if scale is None else scale)))
    k = repeat_axis(k, 1, q.shape[1] // k.shape[1])
    scores = n.g.op("np.matmul", q * root, (k * root).transpose((0, 1, 3, 2)))
    softcap = n.attr("softcap", 0.0)
    return unary("tanh", scores / softcap) * softcap if softcap > 0 else scores


@onnx_op("Attention", 23, 24, 25)
def attention(n: Node):
    q, k, v = _split_heads(n, n.input(0), n.input(1), n.input(2))
    mask = n.input(3, required=False)
    past_key, past_value = n.input(4, required=False), n.input(5, required=False)
    nonpad = n.input(6, required=False) if n.opset >= 24 else None
    if (past_key is None) != (past_value is None):
        raise n.error(ShapeError, "past_key and past_value go together")
    if past_key is not None:
        k, v = (n.g.op("np.concatenate", past, new, axis=2) for past, new in ((past_key, k), (past_value, v)))
    mode = n.attr("qk_matmul_output_mode", 0)
    if mode not in (0, 1, 2, 3):
        raise n.unsupported(f"attribute 'qk_matmul_output_mode' = {mode}")
    bias = _attention_bias(n, mask, past_key, nonpad, q.shape[2], k.shape[2], q.dtype)
    scores = _scores(n, q, k)
    with_bias = scores + bias
    precision = n.attr("softmax_precision", None)
    probs = _guarded_softmax(with_bias.cast(dtype_of(precision, "attribute 'softmax_precision'"))
                             if precision else with_bias)
    all_masked = bias.reduce("max", (bias.rank - 1,), keepdims=True).eq(-np.inf)
    probs = where(all_masked, probs._lift(0), probs).cast(q.dtype)
    y = n.g.op("np.matmul", probs, repeat_axis(v, 1, q.shape[1] // v.shape[1]))
    if n.input(0).rank == 3:
        b, h, s, d = y.shape
        y = y.transpose((0, 2, 1, 3)).reshape((b, s, h * d))
    return y, k, v, {0: scores, 1: scores, 2: with_bias, 3: probs}[mode].cast(q.dtype)


def _attention_bias(n: Node, mask: T | None, past_key: T | None, nonpad: T | None, q_len: int, kv_len: int,
                    dtype) -> T:
    g = n.g
    if mask is not None and mask.shape[-1] != kv_len:
        fill = 0.0 if mask.dtype.kind == "b" else -np.inf
        pads = (0, 0) * (mask.rank - 1) + (0, kv_len - mask.shape[-1])
        mask = g.op("np.pad", mask, pads=pads, value=fill)
    left, right = n.attr("left_window_size", -1), n.attr("right_window_size", -1)
    causal = bool(n.attr("is_causal", 0))
    if past_key is None and nonpad is not None:
        offset = nonpad.cast(np.int64) - q_len
    else:
        offset = past_key.shape[2] if past_key is not None else 0
    bias = g.full((q_len, kv_len), 0, dtype)
    if mask is not None:
        bias = bias + _bias_from_mask(mask, dtype)
    if causal:
        bias = bias + _frontier(g, q_len, kv_len, offset, dtype, -1, -1, True)
    if left >= 0 or right >= 0:
        bias = bias + _frontier(g, q_len, kv_len, offset, dtype, left, right, False)
    if nonpad is not None:
        valid = g.const(np.arange(kv_len).reshape(1, kv_len)) < nonpad.cast(np.int64).reshape(nonpad.shape + (1,))
        padding = where(valid, g.scalar(0, dtype), g.scalar(-np.inf, dtype))
        bias = bias + padding.reshape((nonpad.shape[0], 1, 1, kv_len))
    return bias


def _rotate(x1: T, x2: T, cos: T, sin: T, interleaved: bool, shape: tuple) -> T:
    """(x1, x2) rotated by the angles whose cosines and sines are given, put back in their layout."""
    real, imag = cos * x1 - sin * x2, sin * x1 + cos * x2
    if interleaved:
        return real.g.op("np.stack", real, imag, axis=4).reshape(shape)
    return real.g.op("np.concatenate", real, imag, axis=3)


@onnx_op("RotaryEmbedding", 23)
def rotary_embedding(n: Node) -> T:
    x, cos, sin = n.input(0), n.input(1), n.input(2)
    positions = n.input(3, required=False)
    interleaved, heads = bool(n.attr("interleaved", 0)), n.attr("num_heads", 0)
    if x.rank == 3 and heads:
        b, s, hidden = x.shape
        x4 = x.reshape((b, s, heads, hidden // heads))
    elif x.rank == 4:
        x4 = x.transpose((0, 2, 1, 3))
    else:
        raise n.error(ShapeError, f"input {x.type} must be 4-D, or 3-D with num_heads")
    head = x4.shape[3]
    dim = n.attr("rotary_embedding_dim", 0) or head
    if positions is not None:
        cos, sin = (n.g.op("np.take", c, positions, axis=0) for c in (cos, sin))
    cos, sin = (n.g.op("np.expand_dims", c, axes=(2,)) for c in (cos, sin))
    rotate, keep = slice_axis(x4, 3, 0, dim), slice_axis(x4, 3, dim, head)
    step, half = (2, 1) if interleaved else (1, dim // 2)
    x1 = slice_axis(rotate, 3, 0, dim if interleaved else half, step)
    x2 = slice_axis(rotate, 3, half, dim, step)
    rotated = _rotate(x1, x2, cos, sin, interleaved, rotate.shape)
    out = n.g.op("np.concatenate", rotated, keep, axis=3) if dim < head else rotated
    return out.reshape(x.shape) if x.rank == 3 else out.transpose((0, 2, 1, 3))

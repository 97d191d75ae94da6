"""Small models written the way numpy code is written in the wild (helper functions,
einsum, `.T`, `np.sqrt(d)` promoting to float64, casts back and forth), traced for the
canonicalization tests and the op-count measurements."""

from __future__ import annotations

import numpy as np

rng = np.random.default_rng(7)


def f32(*shape, scale=0.5):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


# -- an MLP --------------------------------------------------------------------------------
def softmax(z, axis=-1):
    z = z - z.max(axis=axis, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=axis, keepdims=True)


def mlp(x, w1, b1, w2, b2, w3, b3):
    h = np.maximum(x @ w1 + b1, 0)
    h = np.maximum(h @ w2 + b2, 0.0)
    logits = (h @ w3 + b3) * 1.0
    return softmax(logits), -np.negative(logits)


def mlp_args(batch=8):
    return (f32(batch, 32), f32(32, 64), f32(64), f32(64, 64), f32(64), f32(64, 10), f32(10))


# -- a transformer block ------------------------------------------------------------------------
def layer_norm(x, g, b, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def attention(x, wq, wk, wv, wo, heads):
    s, d = x.shape
    dh = d // heads

    def split(t):
        return t.reshape(s, heads, dh).transpose(1, 0, 2)

    q, k, v = split(x @ wq), split(x @ wk), split(x @ wv)
    scores = q @ k.transpose(0, 2, 1) / np.sqrt(dh)
    out = softmax(scores) @ v.astype(np.float64)
    return out.transpose(1, 0, 2).reshape(s, d).astype(np.float32) @ wo


def transformer_block(x, g1, b1, wq, wk, wv, wo, g2, b2, w1, w2):
    h = x + attention(layer_norm(x, g1, b1), wq, wk, wv, wo, heads=4)
    return h + gelu(layer_norm(h, g2, b2) @ w1) @ w2


def transformer_args(seq=8, d=32):
    return (f32(seq, d), 1 + f32(d, scale=0.1), f32(d, scale=0.1), f32(d, d), f32(d, d), f32(d, d), f32(d, d),
            1 + f32(d, scale=0.1), f32(d, scale=0.1), f32(d, 4 * d), f32(4 * d, d))


# -- a small convnet ----------------------------------------------------------------------------
def conv3x3(x, w, b):
    n, c, h, wd = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = 0
    for dy in range(3):
        for dx in range(3):
            patch = xp[:, :, dy:dy + h, dx:dx + wd]
            out = out + np.einsum("nchw,oc->nohw", patch, w[:, :, dy, dx])
    return out + b.reshape(1, -1, 1, 1)


def max_pool2(x):
    n, c, h, w = x.shape
    return x.reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))


def convnet(x, w1, b1, w2, b2, wd, bd):
    h = max_pool2(np.maximum(conv3x3(x, w1, b1), 0))
    h = max_pool2(np.maximum(conv3x3(h, w2, b2), 0))
    flat = h.reshape(h.shape[0], -1)
    return softmax(flat @ wd + bd)


def convnet_args(batch=2):
    return (f32(batch, 3, 8, 8), f32(8, 3, 3, 3), f32(8), f32(8, 8, 3, 3), f32(8), f32(32, 10), f32(10))


MODELS = {"mlp": (mlp, mlp_args), "transformer": (transformer_block, transformer_args),
          "convnet": (convnet, convnet_args)}

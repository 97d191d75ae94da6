"""A traced 12-layer pre-norm transformer encoder (numpy), small, for the explorer's large-graph checks."""

import numpy as np


def layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention(x, p, heads):
    b, s, d = x.shape
    split = lambda t: t.reshape(b, s, heads, d // heads).transpose(0, 2, 1, 3)
    q, k, v = split(x @ p["wq"]), split(x @ p["wk"]), split(x @ p["wv"])
    a = softmax(q @ k.transpose(0, 1, 3, 2) * (1.0 / np.sqrt(d // heads))) @ v
    return a.transpose(0, 2, 1, 3).reshape(b, s, d) @ p["wo"]


def mlp(x, p):
    h = x @ p["w1"]
    return (0.5 * h * (1.0 + np.tanh(0.7978845608 * (h + 0.044715 * h ** 3)))) @ p["w2"]


def block(x, p, heads):
    x = x + attention(layer_norm(x, p["g1"], p["b1"]), p, heads)
    return x + mlp(layer_norm(x, p["g2"], p["b2"]), p)


def example(layers=12, d=16, heads=2, seq=8):
    """(function of x, x): the encoder with its weights captured as constants."""
    rng = np.random.default_rng(0)
    w = lambda *s: (rng.standard_normal(s) * 0.1).astype(np.float32)
    params = [{"wq": w(d, d), "wk": w(d, d), "wv": w(d, d), "wo": w(d, d), "w1": w(d, 2 * d), "w2": w(2 * d, d),
               "g1": np.ones(d, np.float32), "b1": w(d), "g2": np.ones(d, np.float32), "b2": w(d)} for _ in range(layers)]

    def encoder(x):
        for p in params:
            x = block(x, p, heads)
        return x

    return encoder, w(1, seq, d)

"""Training a small MLP and a small convnet with SGD: jl.grad's gradients equal
hand-derived numpy backward passes at every step, the losses go down, and a jitted
training step gives the same losses at every level."""

import numpy as np
import pytest

import jitlab as jl
from tests.autodiff.checks import op_fn
from tests.budget import first_fast

conv = op_fn("np.conv2d", pads=(1, 1, 1, 1))
pool = op_fn("np.max_pool2d", kernel=(2, 2), strides=(2, 2))


def cross_entropy(logits, y):
    shifted = logits - np.max(logits, axis=1, keepdims=True)
    log_p = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
    return -np.mean(np.sum(log_p * y, axis=1))


def softmax_grad(logits, y):
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True) - y) / len(y)


# -- MLP -------------------------------------------------------------------------------
def mlp_loss(p, x, y):
    h = np.maximum(x @ p["w1"] + p["b1"], 0)
    return cross_entropy(h @ p["w2"] + p["b2"], y)


def mlp_grads_by_hand(p, x, y):
    pre = x @ p["w1"] + p["b1"]
    h = np.maximum(pre, 0)
    d_logits = softmax_grad(h @ p["w2"] + p["b2"], y)
    d_pre = (d_logits @ p["w2"].T) * (pre > 0)
    return {"w1": x.T @ d_pre, "b1": d_pre.sum(axis=0), "w2": h.T @ d_logits, "b2": d_logits.sum(axis=0)}


def mlp_setup(rng, dtype=np.float32):
    x = rng.standard_normal((32, 10)).astype(dtype)
    y = np.eye(3, dtype=dtype)[(x[:, 0] + x[:, 1] > 0).astype(int) + (x[:, 2] > 1)]
    params = {"w1": rng.standard_normal((10, 16)) * 0.3, "b1": np.zeros(16), "w2": rng.standard_normal((16, 3)) * 0.3,
              "b2": np.zeros(3)}
    return {k: v.astype(dtype) for k, v in params.items()}, x, y


# -- convnet: conv 3x3 (pad 1) -> relu -> max pool 2x2 -> dense ---------------------------
def cnn_loss(p, x, y):
    h = pool(np.maximum(conv(x, p["k"]) + p["c"], 0))
    return cross_entropy(h.reshape(len(x), -1) @ p["w"], y)


def conv_by_hand(x, k):
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    h, w = x.shape[2:]
    return sum(np.einsum("nchw,oc->nohw", xp[:, :, i:i + h, j:j + w], k[:, :, i, j])
               for i in range(k.shape[2]) for j in range(k.shape[3]))


def cnn_grads_by_hand(p, x, y):
    pre = conv_by_hand(x, p["k"]) + p["c"]
    a = np.maximum(pre, 0)
    n, o, h, w = a.shape
    windows = a.reshape(n, o, h // 2, 2, w // 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(n, o, h // 2, w // 2, 4)
    pooled = windows.max(axis=-1)
    d_logits = softmax_grad(pooled.reshape(n, -1) @ p["w"], y)
    d_pooled = (d_logits @ p["w"].T).reshape(pooled.shape)
    winner = np.eye(4)[windows.argmax(axis=-1)] * d_pooled[..., None]
    d_a = winner.reshape(n, o, h // 2, w // 2, 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(a.shape)
    d_pre = d_a * (pre > 0)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    d_k = np.zeros_like(p["k"])
    for i in range(3):
        for j in range(3):
            d_k[:, :, i, j] = np.einsum("nohw,nchw->oc", d_pre, xp[:, :, i:i + h, j:j + w])
    return {"k": d_k, "c": d_pre.sum(axis=(0, 2, 3)).reshape(p["c"].shape),
            "w": pooled.reshape(n, -1).T @ d_logits}


def cnn_setup(rng, dtype=np.float32):
    x = rng.standard_normal((8, 2, 6, 6)).astype(dtype)
    y = np.eye(3, dtype=dtype)[(x[:, 0, :3].sum(axis=(1, 2)) > 0).astype(int) + (x[:, 1].mean(axis=(1, 2)) > 0.2)]
    params = {"k": rng.standard_normal((4, 2, 3, 3)) * 0.3, "c": np.zeros((1, 4, 1, 1)),
              "w": rng.standard_normal((36, 3)) * 0.3}
    return {k: v.astype(dtype) for k, v in params.items()}, x, y


# model -> (loss, its gradient by hand, data and parameters, learning rate)
MODELS = {"mlp": (mlp_loss, mlp_grads_by_hand, mlp_setup, 0.5),
          "convnet": (cnn_loss, cnn_grads_by_hand, cnn_setup, 0.1)}


@pytest.mark.parametrize("model", sorted(MODELS))
def test_sgd_with_jl_grad_matches_hand_derived_gradients(model):
    loss, by_hand, setup, lr = MODELS[model]
    params, x, y = setup(np.random.default_rng(1))
    value_and_grad = jl.value_and_grad(loss)
    losses = []
    for _ in range(6):
        value, grads = value_and_grad(params, x, y)
        expected = by_hand(params, x, y)
        for k in params:
            np.testing.assert_allclose(grads[k], expected[k], rtol=2e-4, atol=2e-6, err_msg=k)
            assert grads[k].dtype == np.float32
        np.testing.assert_allclose(value, loss(params, x, y), rtol=1e-5)
        losses.append(float(value))
        params = {k: params[k] - lr * grads[k] for k in params}
    assert all(b < a for a, b in zip(losses, losses[1:])), losses


@pytest.mark.parametrize("model", first_fast("mlp", "convnet"))     # the convnet's O1/O2 compiles: -m slow
def test_jitted_training_step_gives_the_same_losses_at_every_level(model):
    loss, _, setup, lr = MODELS[model]

    def step(params, x, y):
        value, grads = jl.value_and_grad(loss)(params, x, y)
        return value, {k: params[k] - lr * grads[k] for k in params}

    runs = {}
    for level in ("O0", "O1", "O2"):
        params, x, y = setup(np.random.default_rng(2))
        jitted, losses = jl.jit(step, level=level), []
        for _ in range(4):
            value, params = jitted(params, x, y)
            losses.append(float(value))
        runs[level] = losses
    assert runs["O0"][-1] < runs["O0"][0]
    np.testing.assert_allclose(runs["O1"], runs["O0"], rtol=1e-5)
    np.testing.assert_allclose(runs["O2"], runs["O0"], rtol=1e-5)

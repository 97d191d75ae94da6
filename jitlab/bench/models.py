"""A small model zoo in plain numpy: the benchmark programs, a ResNet-50-shaped convnet and a
transformer block, for benchmarks, tests and the explorer.

Every builder returns `(fn, args)`: a function of numpy arrays and example arguments, so
`fn(*args)` runs eagerly with numpy and `jl.trace(fn, *args)` gives its Program. Weights
are arrays the function closes over (tracing turns them into the program's weights); the
arguments are the activations (the MLP block also takes its weights, as the benchmark
suite does). Sizes are keyword arguments whose defaults are the benchmark sizes; `QUICK`
holds small sizes for tests and `build(name, quick=True)` uses them:

    from jitlab.bench import models
    fn, args = models.resnet50(batch=1, size=32, width=8)
    program = jl.trace(fn, *args)            # 400+ ops
    fn, args = models.build("softmax", quick=True)

numpy has no convolution, batch norm or pooling functions, so `conv2d`, `batch_norm` and
`max_pool2d` below run the `np` dialect's numpy reference eagerly and record one op of
that dialect while tracing. Symbolic batch (and sequence) sizes work: trace with
`jl.spec(("B", 3, 224, 224))` in place of the example argument.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..frontend.tracer import Tracer
from ..ir.attributes import normalize_attrs
from ..ir.opdef import get_opdef
from ..registry import Registry

Model = tuple[Callable[..., Any], tuple[np.ndarray, ...]]
MODELS: Registry[str, Callable[..., Model]] = Registry("model")
QUICK: dict[str, dict[str, int]] = {}
BENCH = ("chain", "tanh_gelu", "softmax", "layernorm", "mlp", "tiny_chain")


def model(name: str, **quick: int) -> Callable:
    """Registers a builder under `name`, with the small sizes tests use."""

    def register(builder: Callable[..., Model]) -> Callable[..., Model]:
        MODELS.add(name, builder)
        QUICK[name] = quick
        return builder

    return register


def build(name: str, quick: bool = False, **sizes: int) -> Model:
    """The model `name` at its benchmark sizes, its QUICK sizes, or the sizes given."""
    return MODELS.lookup(name)(**{**(QUICK[name] if quick else {}), **sizes})


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _normal(rng: np.random.Generator, shape, scale: float = 1.0) -> np.ndarray:
    a = rng.standard_normal(shape, dtype=np.float32)
    a *= np.float32(scale)
    return a


def _named(fn: Callable, name: str) -> Callable:
    fn.__name__ = fn.__qualname__ = name
    return fn


# -- layers numpy has no function for: one `np` op when traced, its reference otherwise ------
def _layer(op_name: str, x, params: dict[str, np.ndarray], **attrs):
    if isinstance(x, Tracer):
        operands = [x.value] + [x.ctx.capture(a, name).value for name, a in params.items()]
        return x.ctx.op(op_name, *operands, **attrs)
    opdef = get_opdef(op_name)
    return opdef.reference(x, *params.values(), **normalize_attrs(op_name, opdef.attrs, attrs))


def conv2d(x, w: np.ndarray, stride: int = 1, pad: int = 0, name: str = "conv"):
    """2-D convolution of NCHW `x` with OIHW `w` (no bias)."""
    return _layer("np.conv2d", x, {f"{name}.weight": w}, strides=(stride, stride), pads=(pad,) * 4)


def batch_norm(x, p: dict[str, np.ndarray], name: str = "bn", eps: float = 1e-5):
    """Inference batch norm over channel dim 1 with `p` = scale, bias, mean, var."""
    params = {f"{name}.{k}": p[k] for k in ("scale", "bias", "mean", "var")}
    return _layer("np.batch_norm", x, params, eps=eps)


def max_pool2d(x, kernel: int = 3, stride: int = 2, pad: int = 1):
    return _layer("np.max_pool2d", x, {}, kernel=(kernel, kernel), strides=(stride, stride), pads=(pad,) * 4)


def relu(x):
    return np.maximum(x, 0.0)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def layer_norm(x, gamma, beta, eps: float = 1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    centered = x - mu
    var = (centered * centered).mean(axis=-1, keepdims=True)
    return centered / np.sqrt(var + eps) * gamma + beta


def softmax_rows(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


# -- the benchmark programs -------------------------------------------------------------------
@model("chain", n=1024)
def chain(n: int = 1 << 24) -> Model:
    """The memory-bound chain relu((x*y + x - 0.5*y)**2) on n float32."""
    rng = _rng(0)
    return _named(lambda x, y: relu((x * y + x - 0.5 * y) ** 2), "chain"), (_normal(rng, n), _normal(rng, n))


@model("tanh_gelu", n=1024)
def tanh_gelu(n: int = 1 << 24) -> Model:
    """The transcendental chain: tanh, then tanh-form gelu, on n float32."""
    return _named(lambda x: gelu_tanh(np.tanh(x)), "tanh_gelu"), (_normal(_rng(1), n),)


@model("softmax", rows=64, cols=32)
def softmax(rows: int = 4096, cols: int = 1024) -> Model:
    """Row softmax (max-subtracted)."""
    return _named(softmax_rows, "softmax"), (_normal(_rng(2), (rows, cols)),)


@model("layernorm", rows=64, cols=32)
def layernorm(rows: int = 4096, cols: int = 1024) -> Model:
    """Layer norm over rows with a learned scale and shift."""
    rng = _rng(3)
    gamma, beta = 1 + _normal(rng, cols, 0.1), _normal(rng, cols, 0.1)
    return _named(lambda x: layer_norm(x, gamma, beta), "layernorm"), (_normal(rng, (rows, cols)),)


@model("mlp", batch=16, d_in=32, d_hidden=64)
def mlp(batch: int = 256, d_in: int = 1024, d_hidden: int = 4096) -> Model:
    """The MLP block relu(x@W1+b1)@W2+b2; the weights are arguments."""
    rng = _rng(4)

    def mlp_block(x, w1, b1, w2, b2):
        return relu(x @ w1 + b1) @ w2 + b2

    args = (_normal(rng, (batch, d_in)), _normal(rng, (d_in, d_hidden), d_in ** -0.5), _normal(rng, d_hidden, 0.1),
            _normal(rng, (d_hidden, d_in), d_hidden ** -0.5), _normal(rng, d_in, 0.1))
    return mlp_block, args


_TINY_STEPS = (lambda y: y * 0.9, lambda y: y + 0.1, lambda y: np.maximum(y, -1.0), lambda y: y - 0.05)


@model("tiny_chain", n_ops=40, size=8)
def tiny_chain(n_ops: int = 500, size: int = 64) -> Model:
    """A chain of `n_ops` cheap elementwise ops on `size` float32: all call overhead."""

    def tiny(x):
        for i in range(n_ops):
            x = _TINY_STEPS[i % len(_TINY_STEPS)](x)
        return x

    return _named(tiny, "tiny_chain"), (_normal(_rng(5), size),)


# -- a ResNet-50-shaped convnet ---------------------------------------------------------------
RESNET50_BLOCKS = (3, 4, 6, 3)


def _conv_bn(rng, c_in: int, c_out: int, k: int) -> dict:
    return {"w": _normal(rng, (c_out, c_in, k, k), (2.0 / (c_in * k * k)) ** 0.5),
            "bn": {"scale": 1 + _normal(rng, c_out, 0.05), "bias": _normal(rng, c_out, 0.05),
                   "mean": _normal(rng, c_out, 0.05), "var": 1 + np.abs(_normal(rng, c_out, 0.05))}}


def _bottleneck_params(rng, c_in: int, width: int, stride: int) -> dict:
    p = {"conv1": _conv_bn(rng, c_in, width, 1), "conv2": _conv_bn(rng, width, width, 3),
         "conv3": _conv_bn(rng, width, 4 * width, 1)}
    p["conv3"]["bn"]["scale"] *= 0.2    # keeps the residual sum's scale steady over 16 blocks
    if stride != 1 or c_in != 4 * width:
        p["down"] = _conv_bn(rng, c_in, 4 * width, 1)
    return p


def _conv_bn_apply(x, p: dict, name: str, stride: int = 1, pad: int = 0):
    return batch_norm(conv2d(x, p["w"], stride, pad, name), p["bn"], name + ".bn")


def _bottleneck(x, p: dict, name: str, stride: int):
    h = relu(_conv_bn_apply(x, p["conv1"], f"{name}.conv1"))
    h = relu(_conv_bn_apply(h, p["conv2"], f"{name}.conv2", stride, 1))
    h = _conv_bn_apply(h, p["conv3"], f"{name}.conv3")
    shortcut = _conv_bn_apply(x, p["down"], f"{name}.down", stride) if "down" in p else x
    return relu(h + shortcut)


def _resnet_params(rng, width: int, classes: int, blocks: tuple[int, ...]) -> dict:
    stages, c_in = [], width
    for i, n in enumerate(blocks):
        w = width * 2 ** i
        stages.append([_bottleneck_params(rng, c_in if j == 0 else 4 * w, w, 2 if i and j == 0 else 1)
                       for j in range(n)])
        c_in = 4 * w
    return {"stem": _conv_bn(rng, 3, width, 7), "stages": stages,
            "fc_w": _normal(rng, (c_in, classes), c_in ** -0.5), "fc_b": _normal(rng, classes, 0.01)}


@model("resnet50", batch=1, size=32, width=8, classes=10)
def resnet50(batch: int = 1, size: int = 224, width: int = 64, classes: int = 1000,
             blocks: tuple[int, ...] = RESNET50_BLOCKS) -> Model:
    """ResNet-50's graph (bottleneck blocks 3-4-6-3, conv/batch norm/relu, max pool, residual
    adds, global average pool, fc) on NCHW images of `size`; `width` is the stem's channel
    count (64 in ResNet-50; smaller keeps tests light)."""
    p = _resnet_params(_rng(6), width, classes, blocks)

    def resnet(x):
        h = max_pool2d(relu(_conv_bn_apply(x, p["stem"], "stem", 2, 3)))
        for i, stage in enumerate(p["stages"]):
            for j, block in enumerate(stage):
                h = _bottleneck(h, block, f"layer{i + 1}.{j}", 2 if i and j == 0 else 1)
        return h.mean(axis=(2, 3)) @ p["fc_w"] + p["fc_b"]

    return _named(resnet, "resnet50"), (_normal(_rng(7), (batch, 3, size, size)),)


# -- a transformer block ----------------------------------------------------------------------
def _transformer_params(rng, d_model: int, d_ff: int) -> dict:
    def norm():
        return 1 + _normal(rng, d_model, 0.1), _normal(rng, d_model, 0.1)

    def dense(n_in, n_out):
        return _normal(rng, (n_in, n_out), n_in ** -0.5), _normal(rng, n_out, 0.02)

    (wqkv, bqkv), (wo, bo), (w1, b1), (w2, b2) = (dense(d_model, 3 * d_model), dense(d_model, d_model),
                                                  dense(d_model, d_ff), dense(d_ff, d_model))
    return {"ln1": norm(), "ln2": norm(), "wqkv": wqkv, "bqkv": bqkv, "wo": wo, "bo": bo,
            "w1": w1, "b1": b1, "w2": w2, "b2": b2}


@model("transformer", batch=1, seq=16, d_model=32, heads=4, d_ff=64)
def transformer(batch: int = 1, seq: int = 128, d_model: int = 256, heads: int = 4, d_ff: int = 1024) -> Model:
    """A pre-norm transformer encoder block: attention with `heads` heads and a gelu MLP,
    each with a residual connection, on x of shape (batch, seq, d_model)."""
    p = _transformer_params(_rng(8), d_model, d_ff)
    d_head = d_model // heads

    def heads_first(t, b, s):
        return t.reshape(b, s, heads, d_head).transpose(0, 2, 1, 3)

    def block(x):
        b, s, _ = x.shape
        qkv = layer_norm(x, *p["ln1"]) @ p["wqkv"] + p["bqkv"]
        q, k, v = (heads_first(qkv[:, :, i * d_model:(i + 1) * d_model], b, s) for i in range(3))
        attn = softmax_rows(q @ k.transpose(0, 1, 3, 2) * (1.0 / d_head ** 0.5)) @ v
        x = x + attn.transpose(0, 2, 1, 3).reshape(b, s, d_model) @ p["wo"] + p["bo"]
        return x + gelu_tanh(layer_norm(x, *p["ln2"]) @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]

    return _named(block, "transformer"), (_normal(_rng(9), (batch, seq, d_model)),)

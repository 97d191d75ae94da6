"""Explorer data of a few kinds of program, for the schema checks (tests/explore/test_schema.py,
tests/browser/test_schema_browser.py): a small traced function, a training step at O1 with a
profile and a recompile, an ONNX model with namespaced node names and a symbolic batch, O0,
a Program alone and compare pages (timed and not)."""

from __future__ import annotations

import json

import numpy as np
from onnx import helper

import jitlab as jl
from jitlab.explore import explore
from tests.onnx.models import model, tensor

PARAMS = {"w1": np.full((8, 16), 0.1, np.float32), "b1": np.zeros(16, np.float32),
          "w2": np.full((16, 3), 0.1, np.float32), "b2": np.zeros(3, np.float32)}


def small(x, w):
    h = np.tanh(x @ w)
    return np.cumsum(h, axis=1).reshape(h.shape), h.sum(axis=0)


def loss_fn(p, x):
    h = np.maximum(x @ p["w1"] + p["b1"], 0)
    return np.mean((h @ p["w2"] + p["b2"]) ** 2)


def train_step(p, x):
    loss, g = jl.value_and_grad(loss_fn)(p, x)
    return loss, jl.optim.sgd(p, g, 0.1)


def onnx_model():
    """Conv, Relu, Flatten, Gemm with namespaced node names; the batch is the symbol N."""
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="stem/conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="stem/relu"),
             helper.make_node("Flatten", ["r"], ["f"], name="head/flatten"),
             helper.make_node("Gemm", ["f", "fc", "bias"], ["y"], name="head/fc")]
    weights = {"w": rng.standard_normal((4, 2, 3, 3)).astype(np.float32),
               "fc": rng.standard_normal((4 * 5 * 5, 3)).astype(np.float32), "bias": np.zeros(3, np.float32)}
    return model(nodes, [tensor("x", np.float32, ["N", 2, 5, 5])], [tensor("y", np.float32, ["N", 3])], weights)


def saved(widget) -> dict:
    """The data a saved page of `widget` holds, as the page reads it (JSON, as `html.pack` writes it)."""
    return json.loads(json.dumps(widget.session.static_data(dict(widget.data)), default=str))


def samples() -> dict[str, dict]:
    """Each sample's page data (as a saved page holds it) by name."""
    x, w = np.ones((4, 8), np.float32), np.ones((8, 6), np.float32)
    out = {}
    exe = jl.compile(jl.trace(small, x, w), level="O1", target="cpu", progress=False)
    out["small"] = saved(explore(exe))
    step = jl.jit(train_step, level="O1", donate_argnums=(0,))
    for n in (16, 32):          # a recompile, with its reason
        step({k: v.copy() for k, v in PARAMS.items()}, np.ones((n, 8), np.float32))
    jl.profile(step, {k: v.copy() for k, v in PARAMS.items()}, np.ones((32, 8), np.float32), repeats=2)
    out["training"] = saved(explore(step))
    onnx_exe = jl.compile(jl.onnx.load(onnx_model()), level="O1", target="cpu", progress=False)
    xs = np.ones((2, 2, 5, 5), np.float32)
    onnx_exe(xs)
    jl.profile(onnx_exe, xs, repeats=2)
    out["onnx"] = saved(explore(onnx_exe))
    out["o0"] = saved(explore(jl.compile(jl.trace(small, x, w), level="O0")))
    out["program"] = saved(explore(jl.trace(small, x, w)))
    out["compare"] = saved(explore.compare(exe, jl.compile(jl.trace(small, x, w), level="O2", target="cpu"),
                                           args=(x, w), repeats=2))
    # not timed, and pipelines of different lengths (pass rows with one side only)
    out["compare_untimed"] = saved(explore.compare(exe, jl.compile(jl.trace(small, x, w), level="O0")))
    return out

"""The memory view's categories on training programs: weights, inputs, activations, gradients,
temporaries and outputs, each buffer named by the op, scope and line that made it."""

import numpy as np

import jitlab as jl
from jitlab import optim
from jitlab.explore import from_object
from jitlab.passes.activations import BackwardLocation

KEYS = ("w1", "w2", "w3")


def loss(p, x):
    h = x
    for k in KEYS:
        h = np.tanh(h @ p[k])
    return np.mean(h * h)


def sgd_step(p, x):
    value, g = jl.value_and_grad(loss)(p, x)
    return value, optim.sgd(p, g, 0.1)


def setup(batch=64):
    rng = np.random.default_rng(0)
    p = {k: (rng.standard_normal((16, 16)) * 0.3).astype(np.float32) for k in KEYS}
    return p, rng.standard_normal((batch, 16)).astype(np.float32)


def buffers_by_category(exe):
    data = from_object(exe).build()
    out = {}
    for b in data["memory"]["buffers"]:
        out.setdefault(b["category"], []).append(b)
    return data, out


def test_a_training_step_has_gradients_apart_from_activations_and_outputs():
    p, x = setup()
    exe = jl.compile(jl.trace(sgd_step, p, x), level="O1")
    _, cats = buffers_by_category(exe)
    made_by = {op.uid: op for op in exe.program.body.ops}
    # the oracle: a gradient is made by an op the autodiff transform marked backward, and only those are
    assert cats["gradient"] and all(isinstance(made_by[b["producer"]].loc, BackwardLocation) for b in cats["gradient"])
    others = [b for c, bs in cats.items() if c != "gradient" for b in bs if b["producer"] is not None]
    assert not any(isinstance(made_by[b["producer"]].loc, BackwardLocation) for b in others)
    assert {b["name"] for b in cats["input"]} == set(exe.input_names)
    plan = {b.name: b for b in exe.report.memory.buffers}
    assert cats["activation"] and all(plan[b["name"]].role == "activation" for b in cats["activation"])
    # outputs: the loss and the three new weights (the update fused with each weight's gradient)
    assert len(cats["output"]) == 1 + len(KEYS)
    # a gradient buffer is named by its scope and line: the forward line it differentiates
    line = loss.__code__.co_firstlineno + 3
    assert all(b["path"].startswith("loss") and b["loc"].startswith("backward of ") and f":{line} " in b["loc"]
               for b in cats["gradient"])


def test_gradients_returned_are_gradients_and_captured_weights_are_weights():
    p, x = setup()
    exe = jl.compile(jl.trace(lambda x: jl.value_and_grad(lambda x: loss(p, x))(x), x), level="O1")
    _, cats = buffers_by_category(exe)
    outputs = {b.name for b in exe.report.memory.buffers if b.kind == "output"}
    assert [b["name"] for b in cats["gradient"] if b["name"] in outputs]          # d loss / d x is returned
    assert len(cats["weight"]) >= len(KEYS) and "gradient" not in {b["category"] for b in cats["weight"]}


def test_dry_run_plans_carry_their_inputs_bytes():
    p, x = setup(batch=64)
    exe = jl.compile(jl.trace(lambda x, w: np.tanh(x @ w) @ p["w2"], x, p["w1"]), level="O1")
    plans = {plan["scale"]: plan for plan in from_object(exe).build()["dry_run"]["plans"]}
    # inputs at that size: x scales with the batch, w (an input too, not batch-like) keeps its bytes
    assert plans[2.0]["input_bytes"] == {"x": 2 * x.nbytes, "w": p["w1"].nbytes}
    assert plans[1.0]["input_bytes"] == {"x": x.nbytes, "w": p["w1"].nbytes}

"""Recomputation under a memory limit: results equal O0, the peak goes down, activations
are tagged, and an unreachable limit is reported with the best peak found."""

import numpy as np
import pytest

import jitlab as jl
from jitlab import optim
from jitlab.passes.recompute import peak


def deep_loss(p, x):          # activations (batch x width) dominate the small weights
    h = x
    for k in ("w1", "w2", "w3"):
        h = np.tanh(h @ p[k])
    return np.mean(h * h)


def step(p, x):
    loss, g = jl.value_and_grad(deep_loss)(p, x)
    return loss, optim.sgd(p, g, 0.1)


def setup():
    rng = np.random.default_rng(0)
    p = {k: (rng.standard_normal((16, 16)) * 0.3).astype(np.float32) for k in ("w1", "w2", "w3")}
    return p, rng.standard_normal((512, 16)).astype(np.float32)


@pytest.mark.parametrize("level", ("O1", "O2"))
def test_recompute_lowers_the_peak_and_keeps_results(level):
    p, x = setup()
    expected = jl.jit(step, level="O0")(p, x)
    unconstrained = peak(jl.trace(step, p, x))
    f = jl.jit(step, level=level, recompute=True, memory_limit=int(0.6 * unconstrained))
    loss, new = f(p, x)
    np.testing.assert_allclose(loss, expected[0], rtol=1e-5)
    for k in p:
        np.testing.assert_allclose(new[k], expected[1][k], rtol=1e-4, atol=1e-6)
    record = f.last.report.recompute
    assert record["peak_after"] < record["peak_before"] and record["ops_added"] > 0 and record["values"]


def test_unreachable_limit_warns_with_best_peak():
    p, x = setup()
    f = jl.jit(step, level="O1", recompute=True, memory_limit=1000)
    f(p, x)
    (warning,) = [w for w in f.last.report.warnings if w.startswith("recompute")]
    assert str(f.last.report.recompute["peak_after"]) in warning


def test_memory_plan_marks_forward_activations():
    p, x = setup()
    f = jl.jit(step, level="O2")
    f(p, x)
    acts = [b for b in f.last.report.memory.buffers if b.role == "activation"]
    assert acts and all(b.last > b.first for b in acts)
    assert all(b.kind in ("temp", "output") for b in acts)

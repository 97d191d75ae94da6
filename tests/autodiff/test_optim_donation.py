"""jl.optim against numpy written by hand, and donated buffers: the same answers as
without donation, the new values in the caller's arrays, never a wrong answer."""

import numpy as np
import pytest

import jitlab as jl
from jitlab import optim
from tests.autodiff.test_training import mlp_grads_by_hand, mlp_loss, mlp_setup
from tests.budget import first_fast

LEVELS = first_fast("O0", "O1", "O2", keep=2)      # O2: under -m slow; its donation runs in test_donation_random


def adam_by_hand(p, g, m, v, t, lr, b1=0.9, b2=0.999, eps=1e-8):
    m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
    m_hat, v_hat = m / (1 - b1 ** t), v / (1 - b2 ** t)
    return p - lr * m_hat / (np.sqrt(v_hat) + eps), m, v


def adam_step(params, state, x, y):
    loss, grads = jl.value_and_grad(mlp_loss)(params, x, y)
    params, state = optim.adam(params, grads, state, lr=0.01)
    return loss, params, state


@pytest.mark.parametrize("level", LEVELS)
def test_adam_step_matches_numpy_by_hand(level):
    params, x, y = mlp_setup(np.random.default_rng(3))
    ref = {k: v.astype(np.float64) for k, v in params.items()}
    m = {k: np.zeros_like(v) for k, v in ref.items()}
    v = {k: np.zeros_like(a) for k, a in ref.items()}
    state, step = optim.adam_init(params), jl.jit(adam_step, level=level)
    for t in range(1, 4):
        grads = mlp_grads_by_hand({k: a.astype(np.float32) for k, a in ref.items()}, x, y)
        for k in ref:
            ref[k], m[k], v[k] = adam_by_hand(ref[k], grads[k].astype(np.float64), m[k], v[k], t, 0.01)
        _, params, state = step(params, state, x, y)
        for k in ref:
            np.testing.assert_allclose(params[k], ref[k], rtol=2e-4, atol=2e-5, err_msg=k)
    assert float(state["t"]) == 3


def test_sgd_with_momentum_matches_numpy():
    rng = np.random.default_rng(0)
    p, g, vel = (rng.standard_normal(5).astype(np.float32) for _ in range(3))
    new_p, new_v = jl.jit(lambda p, g, v: optim.sgd(p, g, 0.1, momentum=0.9, velocity=v))(p, g, vel)
    np.testing.assert_allclose(new_v, 0.9 * vel + g, rtol=1e-6)
    np.testing.assert_allclose(new_p, p - 0.1 * (0.9 * vel + g), rtol=1e-6)
    with pytest.raises(jl.JitlabError, match="velocity"):
        optim.sgd(p, g, 0.1, momentum=0.9)


def sgd_step(params, x, y):
    loss, grads = jl.value_and_grad(mlp_loss)(params, x, y)
    return loss, optim.sgd(params, grads, 0.5)


@pytest.mark.parametrize("level", LEVELS)
def test_donated_step_gives_the_undonated_results_in_the_callers_arrays(level):
    params, x, y = mlp_setup(np.random.default_rng(4))
    plain, donated = jl.jit(sgd_step, level=level), jl.jit(sgd_step, level=level, donate_argnums=0)
    mine = {k: a.copy() for k, a in params.items()}
    for _ in range(3):
        loss, params = plain(params, x, y)
        given = dict(mine)
        loss_d, mine = donated(mine, x, y)
        assert all(mine[k] is given[k] for k in mine)        # written into the arrays passed in
        np.testing.assert_allclose(loss_d, loss, rtol=1e-6)
        for k in params:
            np.testing.assert_allclose(mine[k], params[k], rtol=1e-6, err_msg=k)
    pairs = {d.input_name: d for d in donated.last.report.donations}
    assert set(pairs) == {f"params.{k}" for k in params}
    assert all(d.mode in ("in place", "copy") for d in pairs.values())


@pytest.mark.parametrize("level", first_fast("O1", "O2"))
def test_elementwise_update_writes_in_place(level):
    rng = np.random.default_rng(5)
    w, g = rng.standard_normal((64, 8)).astype(np.float32), rng.standard_normal((64, 8)).astype(np.float32)
    expected = w - 0.1 * g * g
    step = jl.jit(lambda w, g: w - 0.1 * g * g, level=level, donate_argnums=0)
    out = step(w, g)
    assert out is w
    np.testing.assert_allclose(w, expected, rtol=1e-6)
    assert [d.mode for d in step.last.report.donations] == ["in place"]


@pytest.mark.parametrize("level", LEVELS)
def test_donation_never_overwrites_what_is_still_read(level):
    rng = np.random.default_rng(6)
    w = rng.standard_normal((16, 16)).astype(np.float32)
    original = w.copy()

    def f(w):       # the update reads w transposed: writing into w early would be wrong
        return w.T @ w + w.T, w.sum()

    out, total = jl.jit(f, level=level, donate_argnums=0)(w)
    # float32 sums of 16 products near 1: entries that cancel to ~0.01 keep an absolute error, not a relative one
    np.testing.assert_allclose(out, original.T @ original + original.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(total, original.sum(), rtol=1e-5)


@pytest.mark.parametrize("level", first_fast("O1", "O2"))
def test_donated_array_passed_twice_stays_correct(level):
    # The plan lodges the result in a's array; with b the same array, this call gets a buffer of its own.
    rng = np.random.default_rng(7)
    w = rng.standard_normal(32).astype(np.float32)
    expected = w * 2 + w
    out = jl.jit(lambda a, b: a * 2 + b, level=level, donate_argnums=0)(w, w)
    np.testing.assert_allclose(out, expected, rtol=1e-6)


@pytest.mark.parametrize("level", first_fast("O1", "O2"))
def test_adam_step_updates_weights_and_moments_in_place_and_the_plan_counts_them_once(level):
    # The optimizer's update stays out of the gradient's matmul group and runs after the backward
    # pass's last read of the weight, so every output goes straight into its donated array.
    rng = np.random.default_rng(8)        # weights and moments, not activations, fill the memory
    params = {"w1": rng.standard_normal((48, 48)) * 0.2, "b1": np.zeros(48), "w2": rng.standard_normal((48, 3)) * 0.2,
              "b2": np.zeros(3)}
    params = {k: v.astype(np.float32) for k, v in params.items()}
    x = rng.standard_normal((4, 48)).astype(np.float32)
    y = np.eye(3, dtype=np.float32)[[0, 1, 2, 1]]
    plain, donated = jl.jit(adam_step, level=level), jl.jit(adam_step, level=level, donate_argnums=(0, 1))
    state, mine, my_state = optim.adam_init(params), {k: a.copy() for k, a in params.items()}, optim.adam_init(params)
    for _ in range(2):
        loss, params, state = plain(params, state, x, y)
        given = dict(mine)
        loss_d, mine, my_state = donated(mine, my_state, x, y)
        assert all(mine[k] is given[k] for k in mine)
        np.testing.assert_allclose(loss_d, loss, rtol=1e-6)
        for k in params:
            np.testing.assert_allclose(mine[k], params[k], rtol=1e-6, err_msg=k)
            np.testing.assert_allclose(my_state["m"][k], state["m"][k], rtol=1e-6, atol=1e-9, err_msg=k)
    report = donated.last.report
    assert {d.mode for d in report.donations} == {"in place"}
    records = {b.name: b for b in report.memory.buffers}
    donated_bytes = 0
    for d in report.donations:
        assert records[d.output_name].alias_of == d.input_name
        donated_bytes += d.bytes
    # the largest live set: the dynamic pool's chunk rounding blurs O1's reserved peak at this size
    assert report.memory.lower_bound_bytes <= plain.last.report.memory.lower_bound_bytes - donated_bytes // 2
    assert any(f.reason.startswith("updates a donated input") for f in report.fusion if not f.fused)

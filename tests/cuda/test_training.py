"""Training steps on cuda: jl.value_and_grad's backward graph compiled for the device gives the
losses and new weights of O0, for a small MLP and a small convnet (tiny shapes: the simulator
runs every thread in Python)."""

import numpy as np
import pytest

import jitlab as jl
from tests.autodiff.test_training import cnn_loss, mlp_loss
from tests.budget import first_fast


def mlp_setup(rng):
    x = rng.standard_normal((4, 3)).astype(np.float32)
    y = np.eye(2, dtype=np.float32)[(x[:, 0] > 0).astype(int)]
    p = {"w1": rng.standard_normal((3, 5)) * 0.5, "b1": np.zeros(5), "w2": rng.standard_normal((5, 2)) * 0.5,
         "b2": np.zeros(2)}
    return {k: v.astype(np.float32) for k, v in p.items()}, x, y


def cnn_setup(rng):
    x = rng.standard_normal((2, 1, 4, 4)).astype(np.float32)
    y = np.eye(3, dtype=np.float32)[[0, 2]]
    p = {"k": rng.standard_normal((2, 1, 3, 3)) * 0.3, "c": np.zeros((1, 2, 1, 1)),
         "w": rng.standard_normal((8, 3)) * 0.3}
    return {k: v.astype(np.float32) for k, v in p.items()}, x, y


MODELS = {"mlp": (mlp_loss, mlp_setup), "convnet": (cnn_loss, cnn_setup)}


# all under -m slow (33 s under the simulator for the mlp alone); a quicker training step on cuda is
# tests/cuda/test_bench.py's mlp_train at O2
@pytest.mark.parametrize("model,level", first_fast(("mlp", "O2"), ("convnet", "O2"), ("mlp", "O1"), ("convnet", "O1"),
                                                   unpack=True, keep=0))
def test_training_steps_on_cuda_match_o0(model, level):
    loss, setup = MODELS[model]

    def step(params, x, y):
        value, grads = jl.value_and_grad(loss)(params, x, y)
        return value, {k: params[k] - 0.1 * grads[k] for k in params}

    params, x, y = setup(np.random.default_rng(3))
    reference, on_cuda = jl.jit(step, level="O0"), jl.jit(step, level=level, target="cuda", progress=False)
    p_ref, p_dev = params, params
    for _ in range(2):
        (expected, p_ref), (got, p_dev) = reference(p_ref, x, y), on_cuda(p_dev, x, y)
        np.testing.assert_allclose(float(got), float(expected), rtol=1e-5)
        for k in params:
            np.testing.assert_allclose(np.asarray(p_dev[k]), p_ref[k], rtol=1e-4, atol=1e-6, err_msg=k)
    assert on_cuda.last.report.kernels and all(k.backend == "numba_cuda" for k in on_cuda.last.report.kernels)

"""On a real GPU only (JITLAB_TEST_GPU=1): CUDA graph capture and replay, cuBLAS contractions at full
float32 precision, and the executor's device timing, all against numpy or O0."""

import importlib.util

import numpy as np
import pytest
from numba import cuda

import jitlab as jl
from tests.cuda.helpers import on_cuda, rand
from tests.cuda.test_contractions import conv_program

pytestmark = pytest.mark.gpu
needs_cupy = pytest.mark.skipif(importlib.util.find_spec("cupy") is None, reason="CuPy (jitlab[cuda]) is not installed")


def chain(x, y):
    return np.maximum((x * y + x - 0.5 * y) ** 2, 0)


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_host_arrays_replay_a_captured_graph(level):
    x, y = rand(1 << 16), rand(1 << 16)
    exe = jl.compile(jl.trace(chain, x, y), level=level, target="cuda", progress=False)
    for k in range(4):
        # NVVM contracts x * y + x into one fma, which rounds once where numpy rounds twice
        np.testing.assert_allclose(exe(x + k, y)[0], chain(x + k, y), rtol=1e-5, atol=1e-6)
    record = exe.report.cuda_graphs
    assert record.replay and record.failures == [], record
    [capture] = record.captures
    assert capture.kernel_nodes >= 1 and capture.copy_nodes == 3    # two inputs in, one result out


def test_device_results_of_replays_are_each_the_caller_s():
    x = rand(4096)
    exe = jl.compile(jl.trace(lambda x: np.tanh(x) * 2.0, x), level="O2", target="cuda", device_outputs=True,
                     progress=False)
    results = [exe(cuda.to_device(x + k))[0] for k in range(4)]
    for k, r in enumerate(results):
        np.testing.assert_allclose(r.copy_to_host(), np.tanh(x + k) * 2.0, rtol=1e-6)
    assert exe.report.cuda_graphs.captures[0].signature == "device <f4 [4096]"


def test_device_times_are_measured_on_the_replayed_graph():
    x, y = rand(1 << 20), rand(1 << 20)
    exe = jl.compile(jl.trace(chain, x, y), level="O2", target="cuda", device_outputs=True, progress=False)
    args = [cuda.to_device(x), cuda.to_device(y)]
    for _ in range(3):
        exe(*args)
    times = exe._runner.device_times(lambda: exe(*args), 5)
    assert len(times) == 5 and all(t > 0 for t in times)
    assert exe._runner.stats["graph_launches"] >= 7


@needs_cupy
def test_matmul_through_cublas_keeps_float32_precision():
    a, b = rand(512, 1024), rand(1024, 256)
    exe = jl.compile(jl.trace(lambda a, b: a @ b, a, b), level="O2", target="cuda", progress=False)
    assert "cuBLAS" in exe.report.kernels[0].choice and "no TF32" in exe.report.kernels[0].choice
    exact = a.astype(np.float64) @ b.astype(np.float64)
    error = np.abs(exe(a, b)[0] - exact).max() / np.abs(exact).max()
    assert error < 1e-5, error        # TF32's 10-bit mantissa would leave ~1e-3


@needs_cupy
@pytest.mark.parametrize("level", ["O1", "O2"])
def test_mlp_through_cublas_runs_directly_and_matches_o0(level):
    x, w1, b1, w2, b2 = rand(64, 128), rand(128, 256) * 0.1, rand(256), rand(256, 32) * 0.1, rand(32)
    fn = lambda x, w1, b1, w2, b2: np.maximum(x @ w1 + b1, 0) @ w2 + b2  # noqa: E731
    exe = on_cuda(jl.trace(fn, x, w1, b1, w2, b2), [x, w1, b1, w2, b2], level=level, rtol=1e-4, atol=1e-4)
    for _ in range(2):
        np.testing.assert_allclose(exe(x, w1, b1, w2, b2)[0], fn(x, w1, b1, w2, b2), rtol=1e-4, atol=1e-4)
    assert sum("cuBLAS" in k.choice for k in exe.report.kernels) == 2
    record = exe.report.cuda_graphs       # CuPy refuses cuBLAS calls in a capture: none is tried
    assert not record.replay and "CuPy" in record.reason and record.failures == record.captures == []


@needs_cupy
def test_conv2d_through_im2col_and_cublas_matches_o0():
    program = conv_program((4, 32, 33, 33), (64, 16, 3, 3), strides=(2, 2), pads=(1, 1, 1, 1), groups=2)
    exe = on_cuda(program, [rand(4, 32, 33, 33), rand(64, 16, 3, 3) * 0.1, rand(64, 1, 1)], rtol=1e-4, atol=1e-4)
    assert any("im2col" in k.choice for k in exe.report.kernels)

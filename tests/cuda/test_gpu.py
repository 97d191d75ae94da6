"""On a real GPU only (JITLAB_TEST_GPU=1): sizes the simulator cannot run, launches with many
blocks, streams under real concurrency, interop with CuPy and PyTorch, the device's own memory size."""

import numpy as np
import pytest
from numba import cuda

import jitlab as jl
from tests.cuda.helpers import check, on_cuda, rand
from tests.cuda.test_contractions import conv_program
from tests.cuda.test_kernels import layernorm, softmax
from tests.cuda.test_streams import two_branches

pytestmark = pytest.mark.gpu


def test_elementwise_over_many_blocks():
    x, y = rand(1 << 22), rand(1 << 22)
    check(lambda x, y: np.maximum((x * y + x - 0.5 * y) ** 2, 0), x, y)
    check(lambda x, y: np.tanh(x[:, None] * y[None, :4096]) + 1.0, rand(777), y)


@pytest.mark.parametrize("shape", [(1000, 3000), (4096, 1024), (3, 100_000)])
def test_long_and_many_rows(shape):
    x = rand(*shape)
    check(softmax, x, rtol=1e-4, atol=1e-6)
    check(layernorm, x, rand(shape[1]), rand(shape[1]), rtol=1e-4, atol=1e-4)
    check(lambda x: (x.sum(axis=0), x.max(axis=1)), x, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("m,k,n", [(257, 129, 65), (1024, 1024, 1024), (1, 4096, 7)])
def test_matmul_tiles(m, k, n):
    check(lambda x, w, b: np.maximum(x @ w + b, 0), rand(m, k), rand(k, n) * 0.05, rand(n), rtol=1e-3, atol=1e-3)


def test_conv2d_at_network_sizes():
    program = conv_program((4, 32, 33, 33), (64, 32, 3, 3), strides=(2, 2), pads=(1, 1, 1, 1))
    on_cuda(program, [rand(4, 32, 33, 33), rand(64, 32, 3, 3) * 0.1, rand(64, 1, 1)], rtol=1e-3, atol=1e-3)


def test_streams_give_the_same_results_every_time():
    args = rand(2048, 512), rand(512, 1024), rand(1024, 512)
    exe = on_cuda(jl.trace(two_branches, *args), list(args), rtol=1e-3, atol=1e-4)
    assert exe.report.streams.streams == 2
    first = exe(*args)[0]
    for _ in range(20):
        np.testing.assert_array_equal(exe(*args)[0], first)


def test_device_memory_size_is_the_budget():
    program = jl.trace(lambda x: x * 2.0, jl.spec((1 << 40,), np.float32))
    with pytest.raises(jl.OutOfMemoryError, match="free"):
        jl.compile(program, target="cuda", progress=False)


def test_numba_cupy_and_torch_arrays_are_taken_without_a_copy():
    f = jl.jit(target="cuda", device_outputs=True, progress=False)(lambda x: np.exp(x) + 1.0)
    x = rand(1000)
    np.testing.assert_allclose(f(cuda.to_device(x)).copy_to_host(), np.exp(x) + 1.0, rtol=1e-6)
    cupy = pytest.importorskip("cupy")
    np.testing.assert_allclose(f(cupy.asarray(x)).copy_to_host(), np.exp(x) + 1.0, rtol=1e-6)


def test_torch_cuda_tensors_are_inputs():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA here")
    f = jl.jit(target="cuda", progress=False)(lambda x: np.tanh(x) * 2.0)
    x = rand(64, 64)
    np.testing.assert_allclose(f(torch.as_tensor(x, device="cuda")), np.tanh(x) * 2.0, rtol=1e-6)

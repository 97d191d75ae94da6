"""Tiled matmul and conv kernels, and edge shapes, against the O0 reference."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jitlab.ir import Builder, Program, TensorType
from tests.cuda.helpers import check, layouts, on_cuda, rand
from tests.cuda.test_kernels import TINY_GRID


@pytest.mark.parametrize("m,k,n", [(5, 7, 20), (1, 1, 1), (9, 17, 3), (16, 8, 16), (3, 0, 4)])
def test_matmul_is_tiled_with_the_epilogue_fused(m, k, n, generated_contractions):
    x, w, b = rand(m, k), rand(k, n), rand(n)
    exe = check(lambda x, w, b: np.maximum(x @ w + b, 0), x, w, b, rtol=1e-4, atol=1e-5, **TINY_GRID)
    assert "tiled matmul with the epilogue fused" in layouts(exe)[0]
    assert exe.report.kernels[0].source.count("cuda.syncthreads()") == 2


def test_batched_matmul_broadcasts_batches():
    check(lambda a, b: a @ b, rand(2, 3, 5, 4), rand(3, 4, 6), rtol=1e-4, atol=1e-5, **TINY_GRID)
    check(lambda a, b: a @ b + 1.0, rand(2, 5, 4), rand(4, 3), rtol=1e-4, atol=1e-5)


def test_epilogue_reading_other_elements_goes_through_a_temporary(generated_contractions):
    exe = check(lambda x, w: (x @ w).T[::2] * 2.0, rand(6, 5), rand(5, 4), rtol=1e-4, atol=1e-5)
    assert any("temporary" in c or "tiled matmul" in c for c in layouts(exe))


def conv_program(x_shape, w_shape, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), groups=1, bias=True):
    program = Program("conv", [TensorType(x_shape, np.float32), TensorType(w_shape, np.float32),
                               TensorType((w_shape[0], 1, 1), np.float32)], ["x", "w", "b"])
    b = Builder(program.body, constraints=program.constraints)
    x, w, bias_value = program.inputs
    y = b("np.conv2d", x, w, strides=strides, pads=pads, dilations=dilations, groups=groups)
    if bias:
        y = b("np.relu", b("np.add", y, bias_value))
    program.set_outputs([y])
    return program


@pytest.mark.parametrize("x_shape,w_shape,attrs", [
    ((1, 2, 5, 5), (3, 2, 3, 3), {}),
    ((2, 3, 6, 7), (4, 3, 3, 2), {"strides": (2, 1), "pads": (1, 0, 1, 2)}),
    ((1, 4, 7, 7), (4, 2, 3, 3), {"groups": 2, "dilations": (2, 2), "pads": (2, 2, 2, 2)}),
    ((1, 2, 4, 4), (2, 2, 1, 1), {}),
])
def test_conv2d_is_an_implicit_gemm_with_the_epilogue_fused(x_shape, w_shape, attrs, generated_contractions):
    program = conv_program(x_shape, w_shape, **attrs)
    inputs = [rand(*x_shape), rand(*w_shape), rand(w_shape[0], 1, 1)]
    exe = on_cuda(program, inputs, rtol=1e-4, atol=1e-4, **TINY_GRID)
    assert "implicit-GEMM conv2d with the epilogue fused" in layouts(exe)[0]


# a 3-d shape's kernels take 10 s under the simulator: -m slow (2-d ones cover the default run)
@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 5), (), (1,), (1, 1), (33,), (7, 1),
                                   pytest.param((5, 3, 2), marks=pytest.mark.slow)])
def test_edge_shapes(shape):
    x = rand(*shape)
    check(lambda x: np.tanh(x * 2.0) + np.exp(-x), x, **TINY_GRID)
    if len(shape) >= 1 and shape[-1] > 0:
        check(lambda x: x - x.max(axis=-1, keepdims=True), x, **TINY_GRID)
    check(lambda x: (x * x).sum(axis=-1) if x.ndim else x * x, x, **TINY_GRID)


EPILOGUES = {"none": lambda y, b: y, "bias relu": lambda y, b: np.maximum(y + b, 0),
             "transposed": lambda y, b: np.swapaxes(y, -1, -2) * 2.0}


@settings(max_examples=20)
@given(m=st.integers(0, 9), k=st.integers(0, 9), n=st.integers(1, 9), batch=st.sampled_from([(), (2,), (3, 1)]),
       b_batch=st.sampled_from([(), (1,)]), epilogue=st.sampled_from(sorted(EPILOGUES)))
def test_random_matmuls_match_o0(m, k, n, batch, b_batch, epilogue):
    fn = EPILOGUES[epilogue]
    check(lambda x, w, b: fn(x @ w, b), rand(*batch, m, k), rand(*b_batch, k, n), rand(n),
          rtol=1e-4, atol=1e-5, **TINY_GRID)


@settings(max_examples=15)
@given(n=st.integers(1, 2), groups=st.integers(1, 2), cg=st.integers(1, 2), og=st.integers(1, 2),
       h=st.integers(1, 6), w=st.integers(1, 6), kh=st.integers(1, 3), kw=st.integers(1, 3),
       stride=st.integers(1, 2), pad=st.integers(0, 1), dilation=st.integers(1, 2))
def test_random_convolutions_match_o0(n, groups, cg, og, h, w, kh, kw, stride, pad, dilation):
    x_shape, w_shape = (n, groups * cg, h, w), (groups * og, cg, kh, kw)
    program = conv_program(x_shape, w_shape, strides=(stride, stride), pads=(pad, pad, pad, pad),
                           dilations=(dilation, dilation), groups=groups)
    on_cuda(program, [rand(*x_shape), rand(*w_shape), rand(groups * og, 1, 1)], rtol=1e-4, atol=1e-5, **TINY_GRID)

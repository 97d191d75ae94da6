"""The O0 executor: input validation at call time, and the reference implementations of
ops numpy has no single function for (checked against naive loops)."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import jitlab as jl
from jitlab.errors import InputError
from jitlab.ir import Builder, Program, TensorType
from tests.programs import assert_same, programs

rng = np.random.default_rng(0)


def mlp(x, w1, b1, w2, b2):
    h = np.maximum(x @ w1 + b1, 0.0)
    logits = h @ w2 + b2
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def mlp_args():
    return (rng.standard_normal((16, 32)).astype(np.float32), rng.standard_normal((32, 64)).astype(np.float32),
            rng.standard_normal(64).astype(np.float32), rng.standard_normal((64, 10)).astype(np.float32),
            rng.standard_normal(10).astype(np.float32))


def test_mlp_with_softmax_end_to_end():
    args = mlp_args()
    program = jl.trace(mlp, *args)
    text = str(program)
    assert "np.matmul(%x, %w1) : f32[16,64]" in text and "np.exp" in text
    assert str(jl.parse(text)) == text
    out, = jl.compile(jl.parse(text), level="O0")(*args)
    np.testing.assert_allclose(out, mlp(*args), rtol=1e-6)


def test_input_count_dtype_rank_and_shape_errors():
    exe = jl.compile(jl.trace(mlp, *mlp_args()), level="O0")
    args = list(mlp_args())
    with pytest.raises(InputError, match=r"takes \(x, w1, b1, w2, b2\) \(or its 5 inputs one by one\): missing a required argument: 'b2'"):
        exe(*args[:4])
    with pytest.raises(InputError, match="input 'w1' must have dtype f32, got f64"):
        exe(args[0], args[1].astype(np.float64), *args[2:])
    with pytest.raises(InputError, match="input 'b1' must have rank 1"):
        exe(args[0], args[1], args[2][None], *args[3:])
    with pytest.raises(InputError, match="input 'x': dim 0 must be 16"):
        exe(args[0][:3], *args[1:])
    with pytest.raises(InputError, match="input 'x' must be an array, got str"):
        exe("x", *args[1:])


def test_outputs_are_arrays_in_a_tuple():
    exe = jl.compile(jl.trace(lambda x: (x + 1, x.sum()), np.ones(3, np.float32)), level="O0")
    out = exe(np.ones(3, np.float32))
    assert isinstance(out, tuple) and len(out) == 2 and out[1].shape == ()


def naive_conv(x, w, stride, pad, dil, groups):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[2]), (pad[1], pad[3])))
    oh = (h + pad[0] + pad[2] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + pad[1] + pad[3] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for b in range(n):
        for oc in range(o):
            g = oc // og
            for i in range(oh):
                for j in range(ow):
                    acc = 0.0
                    for ic in range(cg):
                        for p in range(kh):
                            for q in range(kw):
                                acc += xp[b, g * cg + ic, i * stride[0] + p * dil[0], j * stride[1] + q * dil[1]] \
                                    * w[oc, ic, p, q]
                    out[b, oc, i, j] = acc
    return out.astype(x.dtype)


@given(st.integers(1, 2), st.sampled_from([1, 2]), st.integers(3, 6), st.integers(1, 3), st.integers(1, 2),
       st.integers(0, 1), st.integers(1, 2), st.integers(0, 2**31))
def test_conv2d_matches_naive_loops(n, groups, size, k, stride, pad, dil, seed):
    r = np.random.default_rng(seed)
    c, o = 2 * groups, 2 * groups
    x = r.standard_normal((n, c, size, size)).astype(np.float32)
    w = r.standard_normal((o, c // groups, k, k)).astype(np.float32)
    attrs = dict(strides=(stride, stride), pads=(pad, pad, pad, pad), dilations=(dil, dil), groups=groups)
    if size + 2 * pad < dil * (k - 1) + 1:
        return
    p = Program("conv", [TensorType(x.shape, "f32"), TensorType(w.shape, "f32")], ["x", "w"])
    p.set_outputs([Builder(p.body)("np.conv2d", *p.inputs, **attrs)])
    out, = jl.compile(p, level="O0")(x, w)
    expected = naive_conv(x, w, (stride, stride), (pad,) * 4, (dil, dil), groups)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)


def naive_pool(x, k, s, pad, ceil_mode, kind, include_pad=False):
    n, c, h, w = x.shape
    def out_len(size):
        span = size + 2 * pad - k
        length = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (length - 1) * s >= size + pad:
            length -= 1
        return length
    oh, ow = out_len(h), out_len(w)
    out = np.zeros((n, c, oh, ow), x.dtype)
    for i in range(oh):
        for j in range(ow):
            rows = [r for r in range(i * s - pad, i * s - pad + k)]
            cols = [q for q in range(j * s - pad, j * s - pad + k)]
            inside = [(r, q) for r in rows for q in cols if 0 <= r < h and 0 <= q < w]
            vals = np.stack([x[:, :, r, q] for r, q in inside], axis=-1)
            if kind == "max":
                out[:, :, i, j] = vals.max(axis=-1)
            else:
                count = len([1 for r in rows for q in cols if -pad <= r < h + pad and -pad <= q < w + pad]) \
                    if include_pad else len(inside)
                out[:, :, i, j] = vals.sum(axis=-1) / count
    return out


@given(st.integers(3, 7), st.integers(1, 3), st.integers(1, 3), st.integers(0, 1), st.booleans(),
       st.sampled_from(["max", "avg"]), st.booleans(), st.integers(0, 2**31))
def test_pooling_matches_naive_loops(size, k, s, pad, ceil_mode, kind, include_pad, seed):
    if pad * 2 > k or size + 2 * pad < k:
        return
    x = np.random.default_rng(seed).standard_normal((1, 2, size, size)).astype(np.float32)
    attrs = dict(kernel=(k, k), strides=(s, s), pads=(pad,) * 4, ceil_mode=ceil_mode)
    if kind == "avg":
        attrs["count_include_pad"] = include_pad
    p = Program("pool", [TensorType(x.shape, "f32")], ["x"])
    p.set_outputs([Builder(p.body)(f"np.{kind}_pool2d", p.inputs[0], **attrs)])
    out, = jl.compile(p, level="O0")(x)
    np.testing.assert_allclose(out, naive_pool(x, k, s, pad, ceil_mode, kind, include_pad), rtol=1e-5, atol=1e-6)


def test_composites_match_their_formulas():
    x = rng.standard_normal((3, 5)).astype(np.float64)
    g, b = rng.standard_normal(5), rng.standard_normal(5)
    p = Program("c", [TensorType((3, 5), "f64"), TensorType((5,), "f64"), TensorType((5,), "f64")], ["x", "g", "b"])
    bd = Builder(p.body)
    outs = [bd("np.softmax", p.inputs[0], axis=1), bd("np.log_softmax", p.inputs[0], axis=0),
            bd("np.layer_norm", *p.inputs, axis=1, eps=1e-5), bd("np.gelu", p.inputs[0]),
            bd("np.gelu", p.inputs[0], approximate="tanh"), bd("np.sigmoid", p.inputs[0])]
    p.set_outputs(outs)
    got = jl.compile(p, level="O0")(x, g, b)
    erf = np.vectorize(math.erf)
    mean, var = x.mean(1, keepdims=True), x.var(1, keepdims=True)
    expected = [np.exp(x) / np.exp(x).sum(1, keepdims=True),
                x - np.log(np.exp(x).sum(0, keepdims=True)),
                (x - mean) / np.sqrt(var + 1e-5) * g + b,
                0.5 * x * (1 + erf(x / np.sqrt(2))),
                0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
                1 / (1 + np.exp(-x))]
    assert_same(got, expected, rtol=1e-12, atol=1e-12)


def test_batch_norm_inference():
    x = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    s, b, m, v = (rng.standard_normal(3).astype(np.float32) for _ in range(4))
    v = np.abs(v)
    p = Program("bn", [TensorType(a.shape, "f32") for a in (x, s, b, m, v)], list("xsbmv"))
    p.set_outputs([Builder(p.body)("np.batch_norm", *p.inputs, eps=1e-3)])
    got, = jl.compile(p, level="O0")(x, s, b, m, v)
    c = lambda a: a.reshape(1, 3, 1, 1)  # noqa: E731
    # float32, computed in another order than this expression: an element near 0 needs an absolute bound
    np.testing.assert_allclose(got, (x - c(m)) / np.sqrt(c(v) + 1e-3) * c(s) + c(b), rtol=1e-5, atol=1e-6)


def test_float_to_int_cast_saturates():
    p = Program("c", [TensorType((5,), "f32")], ["x"])
    p.set_outputs([Builder(p.body)("np.cast", p.inputs[0], dtype=np.dtype(np.int32))])
    out, = jl.compile(p, level="O0")(np.array([np.nan, 1e20, -1e20, -2.7, 2.7], np.float32))
    assert out.tolist() == [0, 2**31 - 1, -2**31, -2, 2]


@given(programs(max_ops=10, special_values=True))
def test_random_programs_run_at_o0(case):
    out = jl.compile(case.program, level="O0")(*case.inputs)
    assert len(out) == len(case.program.outputs)
    for o, v in zip(out, case.program.outputs):
        assert o.shape == v.type.shape and o.dtype == v.type.dtype

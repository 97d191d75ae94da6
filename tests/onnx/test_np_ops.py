"""The `np` ops added for ONNX import: reference implementations against independent
oracles (numpy's own functions and plain loops), shape errors, and the text round trip."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import jitlab as jl
from jitlab.errors import InputError, ShapeError
from jitlab.ir import Builder, Program, TensorType
from tests.programs import assert_same

rng = np.random.default_rng(7)


def run_op(name, inputs, n_results=1, **attrs):
    """Builds a one-op program over `inputs`, checks its text round trip, runs it at O0."""
    program = Program("op", [TensorType(a.shape, a.dtype) for a in inputs], [f"x{i}" for i in range(len(inputs))])
    b = Builder(program.body, constraints=program.constraints)
    op = b.create(name, program.inputs, attrs)
    program.set_outputs(op.results)
    text = str(program)
    assert str(jl.parse(text)) == text
    return jl.compile(jl.parse(text), level="O0")(*inputs)


def test_take_along_axis_matches_numpy_and_allows_smaller_indices():
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    idx = rng.integers(-4, 4, size=(3, 2, 5))
    out, = run_op("np.take_along_axis", [x, idx], axis=1)
    expected = np.take_along_axis(x[:, :, :], np.where(idx < 0, idx + 4, idx), axis=1)
    assert_same([out], [expected])


def test_take_along_axis_out_of_range_is_an_input_error():
    with pytest.raises(InputError, match="out of range"):
        run_op("np.take_along_axis", [np.zeros((2, 3), np.float32), np.full((2, 3), 3)], axis=1)


def _gather_nd_loop(x, idx, b):
    out = np.empty(idx.shape[:-1] + x.shape[b + idx.shape[-1]:], x.dtype)
    for pos in np.ndindex(*idx.shape[:-1]):
        coords = tuple(int(c) % x.shape[b + k] for k, c in enumerate(idx[pos]))
        out[pos] = x[pos[:b] + coords]
    return out


@pytest.mark.parametrize("batch_dims", [0, 1])
def test_gather_nd_matches_a_loop(batch_dims):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    idx = rng.integers(-2, 2, size=(2, 5, 2))
    out, = run_op("np.gather_nd", [x, idx], batch_dims=batch_dims)
    assert_same([out], [_gather_nd_loop(x, idx, batch_dims)])


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_elements_matches_a_loop_in_order(reduction):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    idx = rng.integers(-4, 4, size=(3, 3))          # repeats: the order of writes matters
    upd = rng.standard_normal((3, 3)).astype(np.float32)
    out, = run_op("np.scatter_elements", [x, idx, upd], axis=1, reduction=reduction)
    expected = x.copy()
    combine = {"none": lambda a, b: b, "add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}
    for i, j in np.ndindex(*idx.shape):
        k = idx[i, j] % 4
        expected[i, k] = combine[reduction](expected[i, k], upd[i, j])
    assert_same([out], [expected])


@pytest.mark.parametrize("reduction", ["none", "add", "max"])
def test_scatter_nd_matches_a_loop_in_order(reduction):
    x = rng.standard_normal((4, 3)).astype(np.float32)
    idx = np.array([[1], [3], [1], [-1]])
    upd = rng.standard_normal((4, 3)).astype(np.float32)
    out, = run_op("np.scatter_nd", [x, idx, upd], reduction=reduction)
    expected = x.copy()
    combine = {"none": lambda a, b: b, "add": np.add, "max": np.maximum}[reduction]
    for row, (k,) in enumerate(idx):
        expected[k % 4] = combine(expected[k % 4], upd[row])
    assert_same([out], [expected])


@given(st.lists(st.integers(-3, 3), min_size=1, max_size=8), st.booleans(), st.data())
def test_topk_is_stable_and_matches_sorting(values, largest, data):
    x = np.array(values, dtype=np.int32)
    k = data.draw(st.integers(0, len(values)))
    vals, idx = run_op("np.topk", [x], k=k, axis=0, largest=largest)
    order = sorted(range(len(values)), key=lambda i: (-values[i] if largest else values[i], i))[:k]
    assert idx.tolist() == order and vals.tolist() == [values[i] for i in order]


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumprod_matches_numpy(exclusive, reverse):
    x = rng.integers(1, 4, size=(3, 4)).astype(np.int64)
    out, = run_op("np.cumprod", [x], axis=1, exclusive=exclusive, reverse=reverse)
    flipped = x[:, ::-1] if reverse else x
    shifted = np.concatenate([np.ones((3, 1), np.int64), flipped[:, :-1]], axis=1) if exclusive else flipped
    expected = np.cumprod(shifted, axis=1)
    assert_same([out], [expected[:, ::-1] if reverse else expected])


def test_bitcast_reads_the_same_bits_and_refuses_other_widths():
    x = np.array([1.0, -2.5, np.inf], np.float32)
    out, = run_op("np.bitcast", [x], dtype=np.dtype(np.int32))
    assert_same([out], [x.view(np.int32)])
    with pytest.raises(ShapeError, match="widths differ"):
        run_op("np.bitcast", [x], dtype=np.dtype(np.int64))


def test_dims_evaluates_symbols_at_call_time():
    text = """func @f(%x: f32[B,3]) -> (i64[2]) {
  %0 = np.dims() {dims = [B, 2*B-1]} : i64[2]
  func.return(%0)
}
"""
    program = jl.parse(text)
    assert str(program) == text
    out, = jl.compile(program, level="O0")(np.zeros((4, 3), np.float32))
    assert out.tolist() == [4, 7]


def test_shape_errors_name_the_op():
    with pytest.raises(ShapeError, match="np.gather_nd: .*exceed the rank"):
        run_op("np.gather_nd", [np.zeros((2, 3), np.float32), np.zeros((4, 3), np.int64)])
    with pytest.raises(ShapeError, match=r"np.topk: k = 4 is outside \[0, 3\]"):
        run_op("np.topk", [np.zeros(3, np.float32)], k=4, axis=0)
    with pytest.raises(ShapeError, match="np.scatter_nd: dim 1 of the updates"):
        run_op("np.scatter_nd", [np.zeros((4, 3), np.float32), np.zeros((2, 1), np.int64), np.zeros((2, 2), np.float32)])


@pytest.mark.parametrize("inverse,onesided", [(False, False), (True, False), (False, True), (True, True)])
def test_fft_matches_numpy_and_its_shapes(inverse, onesided):
    signal = rng.standard_normal((3, 8)) + 1j * rng.standard_normal((3, 8))
    if onesided and not inverse:
        x = signal.real[..., None]
        expected = np.fft.rfft(signal.real, n=8, axis=1)
    elif onesided:
        x = np.stack([signal.real[:, :5], signal.imag[:, :5]], axis=-1)
        expected = np.fft.irfft(signal[:, :5], n=8, axis=1)[..., None]
    else:
        x = np.stack([signal.real, signal.imag], axis=-1)
        expected = (np.fft.ifft if inverse else np.fft.fft)(signal, n=8, axis=1)
    out, = run_op("np.fft", [x.astype(np.float64)], axis=1, length=8, inverse=inverse, onesided=onesided)
    if not (inverse and onesided):
        expected = np.stack([expected.real, expected.imag], axis=-1)
    assert_same([out], [expected.astype(np.float64)], rtol=1e-12, atol=1e-12)

"""np.sort, np.argsort, np.median, np.quantile and np.percentile (frontend/order.py) against numpy:
at O0 bit for bit, dtype and shape included; at O1 within float32 rounding (its kernels contract
a + d t into one fma)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jitlab as jl

RNG = np.random.default_rng(3)
X32 = RNG.standard_normal((5, 7)).astype(np.float32)
X32[2, 3] = np.nan                     # sorts last; a slice holding it has a NaN median and quantiles
XI = RNG.integers(0, 5, (4, 6))        # ties: argsort keeps index order, as kind="stable"
XB = RNG.random(9) > 0.5


def sort_in_place(x):
    y = x.copy()
    y.sort(axis=0)
    return y


CASES = [
    (lambda x: np.sort(x), X32), (lambda x: np.sort(x, axis=0), X32), (lambda x: np.sort(x, axis=None), X32),
    (lambda x: np.sort(x), XB), (sort_in_place, X32),
    (lambda x: np.argsort(x, axis=1, kind="stable"), XI), (lambda x: x.argsort(axis=0), X32), (np.argsort, XB),
    (np.median, X32), (lambda x: np.median(x, axis=1), X32), (lambda x: np.median(x, axis=0, keepdims=True), X32),
    (lambda x: np.median(x[:, :6], axis=1), X32), (lambda x: np.median(x, axis=1), XI),
    (lambda x: np.median(x, keepdims=True), XI),
    (lambda x: np.percentile(x, 90, axis=0), X32), (lambda x: np.percentile(x, [10, 50, 99]), XI),
    (lambda x: np.percentile(x, [10, 50]), X32),          # a list of q promotes float32 to float64
    (lambda x: np.quantile(x, 0.3, axis=1, keepdims=True), X32),
    (lambda x: np.quantile(x, np.float32(0.3), axis=0), X32),
    (lambda x: np.quantile(x, [0.25, 0.75], axis=1, keepdims=True), XI),
    (lambda x: np.quantile(x, [0.0, 1.0], axis=1), X32),
]


@pytest.mark.parametrize("k", range(len(CASES)))
def test_matches_numpy(k):
    fn, x = CASES[k]
    expected = np.asarray(fn(x))
    got = np.asarray(jl.jit(fn, level="O0")(x))
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)
    compiled = np.asarray(jl.jit(fn, level="O1")(x))
    assert compiled.dtype == expected.dtype and compiled.shape == expected.shape
    np.testing.assert_allclose(compiled, expected, rtol=2e-7 if expected.dtype == np.float32 else 1e-15)


@settings(max_examples=40, deadline=None)
@given(shape=st.lists(st.integers(1, 6), min_size=1, max_size=3), data=st.data())
def test_sorts_and_medians_of_random_arrays(shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    q = data.draw(st.floats(0, 100))
    x = np.random.default_rng(data.draw(st.integers(0, 2**16))).integers(-3, 4, shape).astype(np.float64)
    fn = lambda x: (np.sort(x, axis=axis), np.argsort(x, axis=axis, kind="stable"),  # noqa: E731
                    np.median(x, axis=axis), np.percentile(x, q, axis=axis))
    for got, expected in zip(jl.jit(fn, level="O0")(x), fn(x)):
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("fn, error", [
    (lambda x: np.percentile(x, 120), jl.TraceError),
    (lambda x: np.quantile(x, [0.5, -0.1]), jl.TraceError),
    (lambda x: np.sort(x, order="a"), jl.UnsupportedOp),
    (lambda x: np.sort(x * 1j), jl.UnsupportedOp),
    (lambda x: np.median(x[:, :0], axis=1), jl.UnsupportedOp),
    (lambda x: np.median(x, axis=(0, 1)), jl.UnsupportedOp),
    (lambda x: np.quantile(x, 0.5, method="nearest"), jl.UnsupportedOp),
])
def test_what_it_does_not_do_is_an_error_that_says_so(fn, error):
    with pytest.raises(error, match=r"np\.|quantiles"):
        jl.jit(fn, level="O0")(X32)

"""The LLVM-level helpers of the numba backend, against numpy."""

import numpy as np
import pytest
from numba import njit

from jitlab.backends.numba_cpu import bits
from jitlab.backends.numba_cpu.mathcheck import binade_sample, special_values


@njit
def _maximum(a, b, out):
    for i in range(a.size):
        out[i] = bits.maximum(a[i], b[i])


@njit
def _minimum(a, b, out):
    for i in range(a.size):
        out[i] = bits.minimum(a[i], b[i])


@njit
def _split(x, m, e):
    for i in range(x.size):
        m[i], e[i] = bits.mantissa(x[i]), bits.exponent(x[i])


@njit
def _pow2(k, out):
    for i in range(k.size):
        out[i] = bits.pow2(k[i])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("loop, reference", [(_maximum, np.maximum), (_minimum, np.minimum)])
def test_maximum_minimum_as_numpy_with_nan(dtype, loop, reference):
    values = np.concatenate([binade_sample(dtype, 4, seed=1), special_values(dtype)])
    a = np.repeat(values, values.size)
    b = np.tile(values, values.size)
    out = np.empty_like(a)
    loop(a, b, out)
    expected = reference(a, b)
    assert np.array_equal(out, expected, equal_nan=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_mantissa_and_exponent_rebuild_positive_normals(dtype):
    x = np.abs(binade_sample(dtype, 16, seed=2))
    x = x[(x >= np.finfo(dtype).tiny) & np.isfinite(x)]
    m, e = np.empty_like(x), np.empty_like(x)
    _split(x, m, e)
    assert np.all((m >= 1) & (m < 2))
    assert np.array_equal(np.ldexp(m, e.astype(np.int64)), x)
    assert np.array_equal(e, np.frexp(x)[1] - 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pow2_over_the_normal_exponent_range(dtype):
    fi = np.finfo(dtype)
    k = np.arange(fi.minexp, fi.maxexp, dtype=dtype)
    out = np.empty_like(k)
    _pow2(k, out)
    assert np.array_equal(out, np.ldexp(np.ones_like(k), k.astype(np.int64)))

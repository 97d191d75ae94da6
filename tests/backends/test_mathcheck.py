"""The accuracy oracle itself: ulp arithmetic, samples and special values."""

import numpy as np
import pytest

from jitlab.backends.numba_cpu import mathcheck as mc


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_ulp_error_counts_units_and_treats_nan_and_inf_strictly(dtype):
    wide = mc.wide(dtype)
    one = dtype(1.0)
    up = np.nextafter(one, dtype(2))
    got = np.array([one, up, np.nan, np.inf, np.inf, one, 0.0], dtype=dtype)
    ref = np.array([1, 1, np.nan, np.inf, 1, np.nan, 0], dtype=wide)
    err = mc.ulp_error(got, ref, dtype)
    assert err[0] == 0 and err[1] == pytest.approx(1) and err[2] == 0 and err[3] == 0
    assert np.isinf(err[4]) and np.isinf(err[5]) and err[6] == 0


def test_ulp_error_in_subnormals_uses_the_smallest_spacing():
    tiny = np.finfo(np.float32).smallest_subnormal
    err = mc.ulp_error(np.array([3 * tiny], np.float32), np.array([float(tiny)]), np.float32)
    assert err[0] == pytest.approx(2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_binade_sample_covers_every_exponent_and_sign(dtype):
    x = mc.binade_sample(dtype, 8, seed=3)
    fi = np.finfo(dtype)
    assert np.isfinite(x).all()
    exponents = (np.abs(x).view(np.uint32 if dtype == np.float32 else np.uint64) >> fi.nmant)
    assert len(np.unique(exponents)) == (1 << fi.nexp) - 1
    assert (x < 0).any() and (x > 0).any()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_special_values_include_the_ieee_edges(dtype):
    x = mc.special_values(dtype)
    assert np.isnan(x).sum() == 2 and np.isposinf(x).any() and np.isneginf(x).any()
    assert ((x == 0) & np.signbit(x)).any() and ((x == 0) & ~np.signbit(x)).any()
    assert np.finfo(dtype).smallest_subnormal in x and np.finfo(dtype).max in x


def test_exhaustive_sweep_finds_a_planted_error():
    from numba import njit

    from jitlab.backends.numba_cpu.fastmath import MathImpl

    off_by_two = njit(lambda x: np.nextafter(np.nextafter(x, np.float32(np.inf)), np.float32(np.inf))
                      if x == np.float32(1.5) else x)
    impl = MathImpl("np.abs", "", "float32", off_by_two, 0.5, True, "test")
    sweep = mc.sweep_for(impl.fn, njit(lambda x: x))
    worst, where = sweep(0x3FC00000 >> 16, 1)       # the 2**16 patterns holding 1.5
    assert worst.max() == pytest.approx(2) and where[np.argmax(worst)] == np.float32(1.5)

"""The fastmath table: each implementation within its stated ulp bound against a higher-precision
reference on every binade and at thresholds, numpy's special values, and vectorized loops."""


import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import jitlab  # noqa: F401  (registers the np ops)
from jitlab.backends.numba_cpu import fastmath
from jitlab.backends.numba_cpu import mathcheck as mc
from jitlab.ir.opdef import get_opdef

IMPLS = list(fastmath.TABLE.values())
F32 = [i for i in IMPLS if i.dtype == "float32"]


def name(impl):
    return f"{impl.op}{'[' + impl.variant + ']' if impl.variant else ''}-{impl.dtype}"


def check_bound(impl, x):
    err, at = mc.max_error(impl, x)
    assert err <= impl.ulps, f"{name(impl)}: {err:.2f} ulps at x={at!r} (bound {impl.ulps})"


@pytest.mark.parametrize("impl", IMPLS, ids=name)
def test_within_bound_on_every_binade(impl):
    per_binade = 4096 if impl.dtype == "float32" else 256      # 2.1M float32, 1.0M float64 values
    check_bound(impl, mc.binade_sample(impl.dtype, per_binade, seed=7))


@pytest.mark.parametrize("impl", IMPLS, ids=name)
def test_within_bound_around_thresholds(impl):
    critical = mc.oracle(impl).critical(np.finfo(impl.dtype))
    check_bound(impl, np.concatenate([mc.special_values(impl.dtype), mc.around(critical, impl.dtype, steps=64)]))


@pytest.mark.parametrize("impl", IMPLS, ids=name)
def test_special_values_as_numpy(impl):
    x = mc.special_values(impl.dtype)
    got = mc.evaluate(impl.fn, x)
    expected = mc.numpy_eager(impl)(x).astype(impl.dtype)
    assert np.array_equal(np.isnan(got), np.isnan(expected)), (x, got, expected)
    exact = np.isinf(expected) | (expected == 0)
    assert np.array_equal(got[exact], expected[exact]), (x[exact], got[exact], expected[exact])
    assert np.array_equal(np.signbit(got[exact]), np.signbit(expected[exact])), (x[exact], got[exact])


def _saturated(v):
    return (v == 0) | (np.abs(v) == 1) | np.isinf(v)


@pytest.mark.parametrize("impl", IMPLS, ids=name)
def test_saturates_exactly_where_the_result_rounds_to_its_limit(impl):
    # Within the ulp bound is not enough at 0, +-1 and +-inf: float32 tanh stayed at 0.99999976 up to
    # inf, so np.tanh(x).astype(int) was 0 where numpy gives 1. Where the reference clearly rounds to
    # a limit (not within a quarter ulp of a tie), and where the function gives one, both agree.
    fi = np.finfo(impl.dtype)
    x = np.concatenate([mc.special_values(impl.dtype), mc.around(mc.oracle(impl).critical(fi), impl.dtype, 64),
                        np.linspace(-45, 45, 90001).astype(impl.dtype), np.geomspace(1, float(fi.max), 2000,
                                                                                     dtype=impl.dtype)])
    x = np.concatenate([x, -x])
    got = mc.evaluate(impl.fn, x)
    with np.errstate(all="ignore"):
        reference = mc.oracle(impl).reference(x.astype(mc.wide(impl.dtype)))
        rounded = reference.astype(impl.dtype)
        toward = np.where(reference < rounded, -np.inf, np.inf).astype(impl.dtype)
        gap = np.abs(np.nextafter(rounded, toward).astype(reference.dtype) - rounded)
        clear = np.abs(reference - rounded) <= gap / 4      # gap: to the neighbour on the reference's side
    limit = (_saturated(rounded) | _saturated(got)) & clear & ~np.isnan(rounded)
    bad = limit & ((got != rounded) | (np.signbit(got) != np.signbit(rounded)))
    assert not bad.any(), list(zip(x[bad][:5], got[bad][:5], rounded[bad][:5]))


@given(st.data())
def test_random_floats_within_bound(data):
    impl = data.draw(st.sampled_from(IMPLS), label="impl")
    width = 32 if impl.dtype == "float32" else 64
    values = data.draw(st.lists(st.floats(width=width), min_size=1, max_size=32), label="x")
    check_bound(impl, np.array(values, dtype=impl.dtype))


@pytest.mark.skipif(not mc.is_x86(), reason="the vector check reads x86-64 assembly")
@pytest.mark.parametrize("impl", IMPLS, ids=name)
def test_loop_calling_it_vectorizes(impl):
    assert (mc.vector_width(impl.fn, impl.dtype) != "") == impl.vectorizes


def test_lookup_by_op_dtype_and_variant():
    assert fastmath.lookup("np.exp", np.float32).fn is fastmath.TABLE["np.exp", "", "float32"].fn
    assert fastmath.lookup("np.gelu", "float32", variant="tanh").op == "np.gelu"
    assert fastmath.lookup("np.gelu", "float32").method != fastmath.lookup("np.gelu", "float32", "tanh").method
    assert fastmath.lookup("np.sin", np.float32) is None
    assert fastmath.lookup("np.erf", np.float64) is None


@pytest.mark.parametrize("impl", IMPLS, ids=name)
def test_table_names_real_float_ops(impl):
    assert get_opdef(impl.op).reference is not None
    assert impl.ulps >= 0.5


@pytest.mark.slow           # 2**32 inputs take 1.5-4 minutes per function: `pytest -m slow` runs them
@pytest.mark.parametrize("impl", F32, ids=name)
def test_within_bound_on_all_float32_inputs(impl):
    err, at = mc.exhaustive_error(impl)
    assert err <= impl.ulps, f"{name(impl)}: {err:.2f} ulps at x={at!r} (bound {impl.ulps})"

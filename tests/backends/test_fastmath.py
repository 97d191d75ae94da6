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

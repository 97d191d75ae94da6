"""Backward graphs of random programs compiled at O1 and O2, with and without recomputation
under a memory limit, give the O0 reference's values and gradients."""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import jitlab as jl
from jitlab.passes.recompute import peak
from tests.autodiff.test_transform import with_weighted_sum_loss
from tests.budget import compiled_examples, slow_o2
from tests.programs import assert_same, programs


@pytest.mark.parametrize("level", slow_o2("O1", "O2"))
@settings(max_examples=compiled_examples(4), deadline=None)
@given(case=programs(dtypes=("f64",), allow_empty=False), seed=st.integers(0, 2**31), recompute=st.booleans())
def test_backward_graphs_of_random_programs_equal_o0(level, case, seed, recompute):
    program, _ = with_weighted_sum_loss(case.program, seed)
    graded = jl.opt(program, "grad,dce")
    expected = jl.compile(graded, level="O0")(*case.inputs)
    assume(all(np.all(np.isfinite(e)) for e in expected))
    options = {"recompute": True, "memory_limit": int(0.6 * peak(graded))} if recompute else {}
    got = jl.compile(graded, level=level, **options)(*case.inputs)
    scale = max(float(np.max(np.abs(e))) if np.size(e) else 0.0 for e in expected)
    assert_same(got, expected, rtol=1e-6, atol=1e-9 * (1 + scale))

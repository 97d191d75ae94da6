"""Donation on random programs: donating every input never changes an answer, and an output
written in place is in the caller's array (O0 on untouched copies is the oracle). An input
overwritten too early gives wrong elements, not last-digit differences: each float32 output
may differ from O0 by a few times the rounding error O0 itself has against float64."""

import numpy as np
import pytest
from hypothesis import given, settings

import jitlab as jl
from tests.budget import compiled_examples, slow_o2
from tests.programs import assert_same, programs, rounding_noise


def assert_matches_reference(program, inputs, got, expected) -> None:
    for k, (relative, absolute) in enumerate(rounding_noise(program, inputs, expected)):
        assert_same(got[k:k + 1], expected[k:k + 1], rtol=2e-5 + 8 * relative, atol=1e-5 + 8 * absolute)


@pytest.mark.parametrize("level", slow_o2("O1", "O2"))
@settings(max_examples=compiled_examples(10), deadline=None)
@given(case=programs(max_ops=8))
def test_donating_every_input_gives_the_same_answers(level, case):
    expected = jl.compile(case.program, level="O0")(*case.inputs)
    exe = jl.compile(case.program, level=level, donate=tuple(case.program.input_names))
    mine = [np.array(a) for a in case.inputs]          # rank-0 inputs come as numpy scalars
    got = exe(*mine)
    got = got if isinstance(got, tuple) else (got,)
    assert_matches_reference(case.program, case.inputs, got, expected if isinstance(expected, tuple) else (expected,))
    for d in exe.report.donations:
        if d.mode == "in place":
            assert got[d.output] is mine[d.input], d


def test_an_ill_conditioned_float32_result_is_compared_within_its_rounding():
    # exp of row sums in [64, 88]: an ulp of the sum (7.6e-6) is that much of the result. A kernel
    # summing in another order lands some ulps away: 5 ulps (3.8e-5) failed a fixed rtol of 2e-5.
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((8, 32)) * 0.3 + 0.75).astype(np.float32)
    program = jl.trace(lambda x: np.exp(np.exp(x).sum(axis=1, keepdims=True)), x)
    expected = jl.compile(program, level="O0")(x)
    summed_elsewhere = expected[0] * np.float32(np.exp(5 * np.spacing(np.float32(64))))
    assert_matches_reference(program, [x], (summed_elsewhere,), expected)
    with pytest.raises(AssertionError):
        assert_same((summed_elsewhere,), expected, rtol=2e-5, atol=1e-5)
    wrong_row = expected[0].copy()
    wrong_row[3] *= np.float32(1.01)
    with pytest.raises(AssertionError):
        assert_matches_reference(program, [x], (wrong_row,), expected)


def test_an_ill_conditioned_result_below_one_is_compared_within_its_rounding():
    # sin(exp(7.3)): exp is 1480, where its last-ulp rounding (1.2e-4) moves sin by about that much,
    # in any implementation; a result of magnitude below 1 is decided by the absolute tolerance.
    x = np.full((4,), 7.3, np.float32)
    program = jl.trace(lambda x: np.sin(np.exp(x)), x)
    expected = jl.compile(program, level="O0")(x)
    rounded_elsewhere = np.sin(np.nextafter(np.exp(x), np.float32(np.inf)))
    assert np.abs(rounded_elsewhere - expected[0]).max() > 1e-5
    assert_matches_reference(program, [x], (rounded_elsewhere,), expected)
    with pytest.raises(AssertionError):
        assert_matches_reference(program, [x], (expected[0] + np.float32(0.01),), expected)

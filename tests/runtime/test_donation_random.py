"""Donation on random programs: donating every input never changes an answer, and an output
written in place is in the caller's array (O0 on untouched copies is the oracle)."""

import numpy as np
import pytest
from hypothesis import given, settings

import jitlab as jl
from tests.programs import assert_same, programs


@pytest.mark.parametrize("level", ("O1", "O2"))
@settings(max_examples=60, deadline=None)
@given(case=programs(max_ops=8))
def test_donating_every_input_gives_the_same_answers(level, case):
    expected = jl.compile(case.program, level="O0")(*case.inputs)
    exe = jl.compile(case.program, level=level, donate=tuple(case.program.input_names))
    mine = [np.array(a) for a in case.inputs]          # rank-0 inputs come as numpy scalars
    got = exe(*mine)
    got = got if isinstance(got, tuple) else (got,)
    assert_same(got, expected if isinstance(expected, tuple) else (expected,), rtol=2e-5, atol=1e-5)
    for d in exe.report.donations:
        if d["mode"] == "in place":
            assert got[d["output"]] is mine[d["input"]], d

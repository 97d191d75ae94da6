"""Random programs (tests/programs.py) on cuda at O1 and O2 equal O0, NaN and inf included."""

import pytest
from hypothesis import given, settings

from tests.budget import compiled_examples
from tests.cuda.helpers import on_cuda
from tests.programs import programs

TINY_GRID = {"threads_per_block": 32, "max_blocks": 1}


@pytest.mark.parametrize("level", ["O1", "O2"])
@settings(max_examples=compiled_examples(12))
@given(case=programs(max_ops=6, special_values=True))
def test_random_programs_match_o0(level, case):
    on_cuda(case.program, case.inputs, level, rtol=2e-5, atol=1e-5, **TINY_GRID)


@settings(max_examples=compiled_examples(5))
@given(case=programs(max_ops=5, dtypes=("f64",), allow_empty=False))
def test_random_programs_on_default_launches(case):
    on_cuda(case.program, case.inputs, "O1", rtol=1e-9, atol=1e-9)

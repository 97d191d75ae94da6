"""Semantic preservation: random programs (with NaN, inf and signed zeros in their
inputs) give the same O0 results before and after every pass and every level pipeline.
Canonicalization, CSE and DCE must be exact to the bit; decompositions and level
pipelines must agree to within float rounding."""

import pytest
from hypothesis import given, settings

import jitlab as jl
from jitlab.passes import LEVELS, pipeline_for
from tests.budget import compiled_examples
from tests.passes.filecheck import assert_identical
from tests.passes.strategies import redundant_programs
from tests.programs import assert_same, programs

pytestmark = pytest.mark.filterwarnings("ignore:Mean of empty slice")

EXACT = ["verify", "infer-shapes", "dce", "cse", "canonicalize", "canonicalize,cse,dce"]
CLOSE = ["decompose", *(pipeline_for(level) for level in LEVELS)]


def o0(program, inputs):
    return jl.compile(program, level="O0")(*inputs)


def check_identical(before, after, inputs):
    for i, (a, e) in enumerate(zip(o0(after, inputs), o0(before, inputs))):
        assert a.shape == e.shape and a.dtype == e.dtype, f"output {i}"
        assert_identical(a, e, f"output {i}")


@pytest.mark.parametrize("pipeline", EXACT)
@given(case=programs(special_values=True))
def test_exact_passes_keep_results_bit_for_bit(pipeline, case):
    check_identical(case.program, jl.opt(case.program, pipeline), case.inputs)


@pytest.mark.parametrize("pipeline", CLOSE)
@given(case=programs(special_values=True))
def test_decomposition_and_level_pipelines_keep_results(pipeline, case):
    out = jl.opt(case.program, pipeline)
    assert_same(o0(out, case.inputs), o0(case.program, case.inputs))


@given(case=redundant_programs())
def test_canonicalize_removes_redundancy_exactly_and_reaches_a_fixpoint(case):
    report = jl.CompileReport()
    out = jl.opt(case.program, "canonicalize,canonicalize,cse,dce", report=report)
    check_identical(case.program, out, case.inputs)
    assert not report.passes[1].changed, "a second canonicalize still found something"
    assert sum(report.passes[-1].ops_after.values()) <= sum(report.passes[0].ops_before.values())


@settings(max_examples=compiled_examples(10), deadline=None)
@given(case=redundant_programs())
def test_o1_on_redundant_programs(case):
    exe = jl.compile(case.program, level="O1")
    assert_same(exe(*case.inputs), o0(case.program, case.inputs))

"""The decompose pass: every composite op has a rule; the primitives it produces are the
ones fusion expects (max-subtracted softmax, keepdims reductions, mean and variance as
sums times 1/N); and decomposed programs give O0's results, NaN and inf included."""

import numpy as np
import pytest

import jitlab as jl
from jitlab.ir.opdef import Trait, registered_ops
from tests.passes.filecheck import assert_identical, check_rewrite


def test_every_composite_op_has_a_decomposition():
    roots = {root for p in jl.passes.DECOMPOSE for root in p.roots}
    composites = {d.name for d in registered_ops() if d.has(Trait.COMPOSITE)}
    assert composites and composites <= roots


def test_softmax_is_max_sub_exp_sum_div_with_keepdims():
    check_rewrite("""
        func @f(%x: f32[B,4]) -> (f32[B,4]) {
          %0 = np.softmax(%x) {axis = 1} : f32[B,4]
          func.return(%0)
        }
        """, "decompose", """
        func @f(%x: f32[B,4]) -> (f32[B,4]) {
          %1 = np.max(%x) {axes = [1], keepdims = true} : f32[B,1]
          %2 = np.sub(%x, %1) : f32[B,4]
          %3 = np.exp(%2) : f32[B,4]
          %4 = np.sum(%3) {axes = [1], keepdims = true} : f32[B,1]
          %0 = np.div(%3, %4) : f32[B,4]
          func.return(%0)
        }
        """, bindings={"B": 5})


def test_log_softmax():
    check_rewrite("""
        func @f(%x: f64[3,5]) -> (f64[3,5]) {
          %0 = np.log_softmax(%x) {axis = 0} : f64[3,5]
          func.return(%0)
        }
        """, "decompose", """
        CHECK: %1 = np.max(%x) {axes = [0], keepdims = true} : f64[1,5]
        CHECK-NEXT: %2 = np.sub(%x, %1)
        CHECK-NEXT: %3 = np.exp(%2)
        CHECK-NEXT: %4 = np.sum(%3) {axes = [0], keepdims = true}
        CHECK-NEXT: %5 = np.log(%4)
        CHECK-NEXT: %0 = np.sub(%2, %5)
        """)


def test_layer_norm_mean_and_variance_are_sums_times_one_over_n():
    check_rewrite("""
        func @f(%x: f32[2,3,4], %g: f32[4], %b: f32[4]) -> (f32[2,3,4]) {
          %0 = np.layer_norm(%x, %g, %b) {axis = 1, eps = 1e-05} : f32[2,3,4]
          func.return(%0)
        }
        """, "decompose", """
        func @f(%x: f32[2,3,4], %g: f32[4], %b: f32[4]) -> (f32[2,3,4]) {
          %1 = np.sum(%x) {axes = [1, 2], keepdims = true} : f32[2,1,1]
          %2 = np.constant() {value = dense<f32[] 12.0>} : f32[]
          %3 = np.div(%1, %2) : f32[2,1,1]
          %4 = np.sub(%x, %3) : f32[2,3,4]
          %5 = np.mul(%4, %4) : f32[2,3,4]
          %6 = np.sum(%5) {axes = [1, 2], keepdims = true} : f32[2,1,1]
          %7 = np.div(%6, %2) : f32[2,1,1]
          %8 = np.constant() {value = dense<f32[] 1e-05>} : f32[]
          %9 = np.add(%7, %8) : f32[2,1,1]
          %10 = np.sqrt(%9) : f32[2,1,1]
          %11 = np.div(%4, %10) : f32[2,3,4]
          %12 = np.mul(%11, %g) : f32[2,3,4]
          %0 = np.add(%12, %b) : f32[2,3,4]
          func.return(%0)
        }
        """, exact=False)


@pytest.mark.parametrize("operands,rule", [("%x", "layer-norm"), ("%x, %g", "layer-norm-scale")])
def test_layer_norm_without_bias_or_scale(operands, rule):
    _, report = check_rewrite(f"""
        func @f(%x: f64[3,4], %g: f64[4]) -> (f64[3,4]) {{
          %0 = np.layer_norm({operands}) {{axis = 1, eps = 0.001}} : f64[3,4]
          func.return(%0)
        }}
        """, "decompose", "CHECK-NOT: np.layer_norm\nCHECK-NOT: np.cast", exact=False)
    assert [r.rule for r in report.passes[0].rewrites] == [rule]


def test_layer_norm_over_symbolic_dims_stays_whole():
    check_rewrite("""
        func @f(%x: f32[2,S]) -> (f32[2,S]) {
          %0 = np.layer_norm(%x) {axis = 1} : f32[2,S]
          func.return(%0)
        }
        """, "decompose", None, misses=[("layer-norm", "normalized dims of $x to be static")])


def test_batch_norm_per_channel():
    check_rewrite("""
        func @f(%x: f32[2,3,4,4], %g: f32[3], %b: f32[3], %m: f32[3], %v: f32[3]) -> (f32[2,3,4,4]) {
          %0 = np.batch_norm(%x, %g, %b, %m, %v) : f32[2,3,4,4]
          func.return(%0)
        }
        """, "decompose", """
        CHECK-NOT: f64
        CHECK: np.reshape(%m) {shape = [3, 1, 1]} : f32[3,1,1]
        CHECK: np.sub(%x, %1) : f32[2,3,4,4]
        CHECK: np.constant() {value = dense<f32[] 1e-05>}
        CHECK: np.sqrt
        CHECK: %6 = np.div(%g, %5) : f32[3]
        CHECK: np.mul(%2, %7) : f32[2,3,4,4]
        CHECK-NOT: np.batch_norm
        """, exact=False)


@pytest.mark.parametrize("approximate,rule,misses", [
    ("none", "gelu-erf", []),
    ("tanh", "gelu-tanh", [("gelu-erf", 'attribute approximate of np.gelu is "tanh", not "none"')])])
def test_gelu_both_forms_match_the_reference_exactly(approximate, rule, misses):
    _, report = check_rewrite(f"""
        func @f(%x: f32[2,5]) -> (f32[2,5]) {{
          %0 = np.gelu(%x) {{approximate = "{approximate}"}} : f32[2,5]
          func.return(%0)
        }}
        """, "decompose", "CHECK-NOT: f64\nCHECK-NOT: np.gelu", misses=misses)
    assert [r.rule for r in report.passes[0].rewrites] == [rule]


def test_sigmoid_in_the_stable_form():
    check_rewrite("""
        func @f(%x: f32[6]) -> (f32[6]) {
          %0 = np.sigmoid(%x) : f32[6]
          func.return(%0)
        }
        """, "decompose", """
        CHECK: %2 = np.greater_equal(%x, %1) : bool[6]
        CHECK: %4 = np.abs(%x)
        CHECK-NEXT: %5 = np.neg(%4)
        CHECK-NEXT: %6 = np.exp(%5)
        CHECK-NEXT: %7 = np.add(%3, %6)
        CHECK-NEXT: %8 = np.div(%3, %7)
        CHECK-NEXT: %9 = np.div(%6, %7)
        CHECK-NEXT: %0 = np.where(%2, %8, %9)
        """)


@pytest.mark.parametrize("dtype", ["f16", "f32", "f64"])
def test_mean_is_numpys_sum_over_n(dtype):
    check_rewrite(f"""
        func @f(%x: {dtype}[3,5]) -> ({dtype}[5], {dtype}[1,1]) {{
          %0 = np.mean(%x) {{axes = [0]}} : {dtype}[5]
          %1 = np.mean(%x) {{axes = [0, 1], keepdims = true}} : {dtype}[1,1]
          func.return(%0, %1)
        }}
        """, "decompose", "CHECK: np.sum\nCHECK: np.div\nCHECK-NOT: np.mean")


@pytest.mark.filterwarnings("ignore:Mean of empty slice")
def test_mean_over_a_symbolic_axis_stays_whole_and_over_an_empty_axis_is_nan():
    check_rewrite("""
        func @f(%x: f32[B,4]) -> (f32[4]) {
          %0 = np.mean(%x) {axes = [0]} : f32[4]
          func.return(%0)
        }
        """, "decompose", None, misses=[("mean", "reduced dims of $x to be static")])
    out, _ = check_rewrite("""
        func @f(%x: f32[0,4]) -> (f32[4]) {
          %0 = np.mean(%x) {axes = [0]} : f32[4]
          func.return(%0)
        }
        """, "decompose", "CHECK-NOT: np.mean")
    assert np.isnan(jl.compile(out, level="O0")(np.zeros((0, 4), np.float32))[0]).all()


def test_softmax_over_an_empty_axis_stays_whole():
    check_rewrite("""
        func @f(%x: f32[3,0]) -> (f32[3,0], f32[3,0]) {
          %0 = np.softmax(%x) {axis = 1} : f32[3,0]
          %1 = np.log_softmax(%x) {axis = 1} : f32[3,0]
          func.return(%0, %1)
        }
        """, "decompose", None, misses=[("softmax", "cannot reduce a size-0 axis"),
                                       ("log-softmax", "cannot reduce a size-0 axis")])


def test_stack_is_expand_dims_and_concatenate():
    check_rewrite("""
        func @f(%x: f32[3], %y: f32[3], %z: f32[3]) -> (f32[3,3]) {
          %0 = np.stack(%x, %y, %z) {axis = 1} : f32[3,3]
          func.return(%0)
        }
        """, "decompose", """
        func @f(%x: f32[3], %y: f32[3], %z: f32[3]) -> (f32[3,3]) {
          %1 = np.expand_dims(%x) {axes = [1]} : f32[3,1]
          %2 = np.expand_dims(%y) {axes = [1]} : f32[3,1]
          %3 = np.expand_dims(%z) {axes = [1]} : f32[3,1]
          %0 = np.concatenate(%1, %2, %3) {axis = 1} : f32[3,3]
          func.return(%0)
        }
        """)


@pytest.mark.parametrize("op", ["softmax", "log_softmax", "layer_norm", "gelu", "sigmoid"])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_decomposed_ops_agree_with_the_reference_on_extreme_values(op, dtype):
    x = np.array([[0.0, -0.0, 1e4, -1e4, np.inf, 3.0], [np.nan, 2.5, -np.inf, 1e-30, 7.0, -7.0],
                  [1.0, 1.0, 1.0, 1.0, 1.0, 1.0], [6e4, -6e4, 6e4, -6e4, 1e-3, 0.0]]).astype(dtype)
    attrs = {"gelu": {}, "sigmoid": {}}.get(op, {"axis": 1})
    program = jl.trace(lambda a: a, x)
    b = jl.ir.Builder(program.body, before=program.return_op, constraints=program.constraints)
    program.set_outputs([b(f"np.{op}", program.inputs[0], **attrs)])
    decomposed = jl.opt(program, "decompose,canonicalize,cse,dce")
    assert f"np.{op}(" not in str(decomposed)
    expected, = jl.compile(program, level="O0")(x)
    actual, = jl.compile(decomposed, level="O0")(x)
    if op in ("softmax", "log_softmax", "sigmoid", "gelu"):
        assert_identical(actual, expected, op)
    else:
        np.testing.assert_allclose(actual, expected, rtol=2e-3 if dtype == np.float16 else 1e-6, equal_nan=True)

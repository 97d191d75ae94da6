"""FileCheck tests of the arithmetic canonicalization rules (constant folding, identities
of +, -, *, /, pow and negation): each rule rewrites what it should (the result checked
against O0 bit for bit, NaN, inf and signed zeros included), and leaves alone what it
must not (wrong dtype, several uses, NaN- or sign-sensitive identities), recording why.
test_canon_unary and test_canon_shape hold the other rules' cases."""

import pytest

import jitlab as jl
from tests.passes.filecheck import check_rewrite


def case(name, source, expected, misses=(), options=""):
    return pytest.param(source, expected, misses, options, id=name)


def returns(value):
    """Expected IR with no op left: the function returns `value` directly."""
    return f"CHECK-NOT: = np.\nCHECK: func.return({value})"


CASES = [
    case('fold-constants',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %a = np.constant() {value = dense<f32[] 2.0>} : f32[]
          %b = np.constant() {value = dense<f32[4] [1.0, 2.0, 3.0, 4.0]>} : f32[4]
          %0 = np.add(%a, %b) : f32[4]
          %1 = np.mul(%x, %0) : f32[4]
          func.return(%1)
        }
        """,
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %0 = np.constant() {value = dense<f32[4] [3.0, 4.0, 5.0, 6.0]>} : f32[4]
          %1 = np.mul(%x, %0) : f32[4]
          func.return(%1)
        }
        """),
    case('fold-constants-limit',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %a = np.constant() {value = dense<f32[] 2.0>} : f32[]
          %b = np.constant() {value = dense<f32[4] [1.0, 2.0, 3.0, 4.0]>} : f32[4]
          %0 = np.add(%a, %b) : f32[4]
          %1 = np.mul(%x, %0) : f32[4]
          func.return(%1)
        }
        """,
         None,
         misses=[('fold-constants', '4 elements, over the folding limit of 3')],
         options='{fold-limit=3}'),
    case('constant-to-right',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %c = np.constant() {value = dense<f32[] 2.0>} : f32[]
          %0 = np.add(%c, %x) : f32[4]
          func.return(%0)
        }
        """,
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %c = np.constant() {value = dense<f32[] 2.0>} : f32[]
          %0 = np.add(%x, %c) : f32[4]
          func.return(%0)
        }
        """),
    case('constant-to-right-maximum',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %c = np.constant() {value = dense<f32[] 2.0>} : f32[]
          %0 = np.maximum(%c, %x) : f32[4]
          func.return(%0)
        }
        """,
         None,
         misses=[('constant-to-right', 'sign of a zero')]),
    case('mul-one',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %c = np.constant() {value = dense<f32[] 1.0>} : f32[]
          %0 = np.mul(%x, %c) : f32[4]
          func.return(%0)
        }
        """,
         returns('%x')),
    case('mul-one-int',
         """
        func @f(%x: i32[4]) -> (i32[4]) {
          %c = np.constant() {value = dense<i32[4] [1, 1, 1, 1]>} : i32[4]
          %0 = np.mul(%c, %x) : i32[4]
          func.return(%0)
        }
        """,
         returns('%x')),
    case('mul-one-not-one',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %c = np.constant() {value = dense<f32[4] [1.0, 1.0, 2.0, 1.0]>} : f32[4]
          %0 = np.mul(%x, %c) : f32[4]
          func.return(%0)
        }
        """,
         None,
         misses=[('mul-one', 'splat of 1: it is dense<f32[4] [1.0, 1.0, 2.0, 1.0]>')]),
    case('mul-one-broadcasts',
         """
        func @f(%x: f32[4]) -> (f32[2,4]) {
          %c = np.constant() {value = dense<f32[2,1] [[1.0], [1.0]]>} : f32[2,1]
          %0 = np.mul(%x, %c) : f32[2,4]
          func.return(%0)
        }
        """,
         None,
         misses=[('mul-one', 'the target gives f32[4], the op gives f32[2,4]')]),
    case('mul-zero-kept',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %c = np.constant() {value = dense<f32[] 0.0>} : f32[]
          %0 = np.mul(%x, %c) : f32[4]
          func.return(%0)
        }
        """,
         None,
         misses=[('mul-one', 'splat of 1')]),
    case('sub-self-kept',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %0 = np.sub(%x, %x) : f32[4]
          func.return(%0)
        }
        """,
         None,
         misses=[('sub-zero', 'not a constant')]),
    case('div-one',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %c = np.constant() {value = dense<f32[] 1.0>} : f32[]
          %0 = np.div(%x, %c) : f32[4]
          func.return(%0)
        }
        """,
         returns('%x')),
    case('div-one-int',
         """
        func @f(%x: i64[4]) -> (i64[4]) {
          %c = np.constant() {value = dense<i64[] 1>} : i64[]
          %0 = np.div(%x, %c) : i64[4]
          func.return(%0)
        }
        """,
         returns('%x')),
    case('div-three',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %c = np.constant() {value = dense<f32[] 3.0>} : f32[]
          %0 = np.div(%x, %c) : f32[4]
          func.return(%0)
        }
        """,
         None,
         misses=[('div-one', 'splat of 1'), ('div-power-of-two', 'power of two')]),
    case('pow-one',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %c = np.constant() {value = dense<f32[] 1.0>} : f32[]
          %0 = np.pow(%x, %c) : f32[4]
          func.return(%0)
        }
        """,
         returns('%x')),
    case('pow-two-kept',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %c = np.constant() {value = dense<f32[] 2.0>} : f32[]
          %0 = np.pow(%x, %c) : f32[4]
          func.return(%0)
        }
        """,
         None,
         misses=[('pow-one', 'splat of 1')]),
    case('add-zero',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %c = np.constant() {value = dense<f32[] -0.0>} : f32[]
          %0 = np.add(%x, %c) : f32[4]
          func.return(%0)
        }
        """,
         returns('%x')),
    case('add-zero-int',
         """
        func @f(%x: i32[4]) -> (i32[4]) {
          %c = np.constant() {value = dense<i32[] 0>} : i32[]
          %0 = np.add(%c, %x) : i32[4]
          func.return(%0)
        }
        """,
         returns('%x')),
    case('add-positive-zero-kept',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %c = np.constant() {value = dense<f32[] 0.0>} : f32[]
          %0 = np.add(%x, %c) : f32[4]
          func.return(%0)
        }
        """,
         None,
         misses=[('add-zero', 'needs $c to be -0.0')]),
    case('sub-zero',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %c = np.constant() {value = dense<f32[] 0.0>} : f32[]
          %0 = np.sub(%x, %c) : f32[4]
          func.return(%0)
        }
        """,
         returns('%x')),
    case('sub-negative-zero-kept',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %c = np.constant() {value = dense<f32[] -0.0>} : f32[]
          %0 = np.sub(%x, %c) : f32[4]
          func.return(%0)
        }
        """,
         None,
         misses=[('sub-zero', 'splat of 0')]),
    case('mul-minus-one',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %c = np.constant() {value = dense<f32[] -1.0>} : f32[]
          %0 = np.mul(%x, %c) : f32[4]
          func.return(%0)
        }
        """,
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %0 = np.neg(%x) : f32[4]
          func.return(%0)
        }
        """),
    case('div-minus-one',
         """
        func @f(%x: i32[4]) -> (i32[4]) {
          %c = np.constant() {value = dense<i32[] -1>} : i32[]
          %0 = np.div(%x, %c) : i32[4]
          func.return(%0)
        }
        """,
         """
        func @f(%x: i32[4]) -> (i32[4]) {
          %0 = np.neg(%x) : i32[4]
          func.return(%0)
        }
        """),
    case('div-power-of-two',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %c = np.constant() {value = dense<f32[] 4.0>} : f32[]
          %0 = np.div(%x, %c) : f32[4]
          func.return(%0)
        }
        """,
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %1 = np.constant() {value = dense<f32[] 0.25>} : f32[]
          %0 = np.mul(%x, %1) : f32[4]
          func.return(%0)
        }
        """),
    case('div-power-of-two-int',
         """
        func @f(%x: i32[4]) -> (i32[4]) {
          %c = np.constant() {value = dense<i32[] 4>} : i32[]
          %0 = np.div(%x, %c) : i32[4]
          func.return(%0)
        }
        """,
         None,
         misses=[('div-power-of-two', 'float splat of a power of two')]),
    case('div-power-of-two-overflows',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %c = np.constant() {value = dense<f32[] 1e-45>} : f32[]
          %0 = np.div(%x, %c) : f32[4]
          func.return(%0)
        }
        """,
         None,
         misses=[('div-power-of-two', 'representable reciprocal')]),
    case('maximum-zero',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %c = np.constant() {value = dense<f32[] 0.0>} : f32[]
          %0 = np.maximum(%x, %c) : f32[4]
          func.return(%0)
        }
        """,
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %0 = np.relu(%x) : f32[4]
          func.return(%0)
        }
        """),
    case('maximum-negative-zero-kept',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %c = np.constant() {value = dense<f32[] -0.0>} : f32[]
          %0 = np.maximum(%x, %c) : f32[4]
          func.return(%0)
        }
        """,
         None,
         misses=[('maximum-zero', 'splat of 0')]),
    case('maximum-zero-first-kept',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %c = np.constant() {value = dense<f32[] 0.0>} : f32[]
          %0 = np.maximum(%c, %x) : f32[4]
          func.return(%0)
        }
        """,
         None,
         misses=[('maximum-zero', 'operand 1 of np.maximum is input %x, not a constant')]),
    case('neg-neg',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %0 = np.neg(%x) : f32[4]
          %1 = np.neg(%0) : f32[4]
          func.return(%1)
        }
        """,
         returns('%x')),
    case('neg-abs-kept',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %0 = np.abs(%x) : f32[4]
          %1 = np.neg(%0) : f32[4]
          func.return(%1)
        }
        """,
         None,
         misses=[('neg-neg', 'operand 0 of np.neg is np.abs, not np.neg')]),
    case('sub-neg',
         """
        func @f(%x: f32[4], %y: f32[4]) -> (f32[4]) {
          %0 = np.neg(%y) : f32[4]
          %1 = np.sub(%x, %0) : f32[4]
          func.return(%1)
        }
        """,
         """
        func @f(%x: f32[4], %y: f32[4]) -> (f32[4]) {
          %1 = np.add(%x, %y) : f32[4]
          func.return(%1)
        }
        """),
    case('sub-neg-two-uses',
         """
        func @f(%x: f32[4], %y: f32[4]) -> (f32[4], f32[4]) {
          %0 = np.neg(%y) : f32[4]
          %1 = np.sub(%x, %0) : f32[4]
          func.return(%1, %0)
        }
        """,
         None,
         misses=[('sub-neg', 'needs $n to have one use: %0 from np.neg has 2 uses')]),
    case('add-neg',
         """
        func @f(%x: f32[4], %y: f32[4]) -> (f32[4]) {
          %0 = np.neg(%y) : f32[4]
          %1 = np.add(%0, %x) : f32[4]
          func.return(%1)
        }
        """,
         """
        func @f(%x: f32[4], %y: f32[4]) -> (f32[4]) {
          %1 = np.sub(%x, %y) : f32[4]
          func.return(%1)
        }
        """),
    case('add-neg-two-uses',
         """
        func @f(%x: f32[4], %y: f32[4]) -> (f32[4]) {
          %0 = np.neg(%y) : f32[4]
          %1 = np.add(%x, %0) : f32[4]
          %2 = np.mul(%1, %0) : f32[4]
          func.return(%2)
        }
        """,
         None,
         misses=[('add-neg', 'one use')]),
    case('mul-neg-neg',
         """
        func @f(%x: f32[4], %y: f32[4]) -> (f32[4]) {
          %0 = np.neg(%x) : f32[4]
          %1 = np.neg(%y) : f32[4]
          %2 = np.mul(%0, %1) : f32[4]
          func.return(%2)
        }
        """,
         """
        func @f(%x: f32[4], %y: f32[4]) -> (f32[4]) {
          %2 = np.mul(%x, %y) : f32[4]
          func.return(%2)
        }
        """),
    case('div-neg-neg-two-uses',
         """
        func @f(%x: f32[4], %y: f32[4]) -> (f32[4], f32[4]) {
          %0 = np.neg(%x) : f32[4]
          %1 = np.neg(%y) : f32[4]
          %2 = np.div(%0, %1) : f32[4]
          func.return(%2, %1)
        }
        """,
         None,
         misses=[('div-neg-neg', 'needs $b to have one use')]),
    case('fold-constants-reference-raises',
         """
        func @f() -> (f32[1]) {
          %a = np.constant() {value = dense<f32[3] [1.0, 2.0, 3.0]>} : f32[3]
          %i = np.constant() {value = dense<i64[1] [7]>} : i64[1]
          %0 = np.take(%a, %i) {axis = 0} : f32[1]
          func.return(%0)
        }
        """,
         None,
         misses=[('fold-constants', 'raised InputError')]),
    case('mul-minus-two-kept',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %c = np.constant() {value = dense<f32[] -2.0>} : f32[]
          %0 = np.mul(%x, %c) : f32[4]
          func.return(%0)
        }
        """,
         None,
         misses=[('mul-minus-one', 'splat of -1')]),
    case('div-minus-one-mixed-kept',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %c = np.constant() {value = dense<f32[4] [-1.0, 1.0, -1.0, -1.0]>} : f32[4]
          %0 = np.div(%x, %c) : f32[4]
          func.return(%0)
        }
        """,
         None,
         misses=[('div-minus-one', 'splat of -1')]),
    case('mul-neg-one-side-kept',
         """
        func @f(%x: f32[4], %y: f32[4]) -> (f32[4]) {
          %0 = np.neg(%x) : f32[4]
          %1 = np.mul(%0, %y) : f32[4]
          func.return(%1)
        }
        """,
         None,
         misses=[('mul-neg-neg', 'not np.neg')]),
    case('div-neg-neg',
         """
        func @f(%x: f32[4], %y: f32[4]) -> (f32[4]) {
          %0 = np.neg(%x) : f32[4]
          %1 = np.neg(%y) : f32[4]
          %2 = np.div(%0, %1) : f32[4]
          func.return(%2)
        }
        """,
         """
        func @f(%x: f32[4], %y: f32[4]) -> (f32[4]) {
          %2 = np.div(%x, %y) : f32[4]
          func.return(%2)
        }
        """),
]


@pytest.mark.parametrize("source,expected,misses,options", CASES)
def test_rule(source, expected, misses, options):
    check_rewrite(source, "canonicalize" + options, expected, misses=misses)


def test_every_rule_has_a_positive_and_a_negative_case():
    from tests.passes import test_canon_shape, test_canon_unary

    applied, missed = set(), set()
    for param in CASES + test_canon_shape.CASES + test_canon_unary.CASES:
        source, expected, misses, options = param.values
        report = jl.CompileReport()
        jl.opt(jl.parse(source), "canonicalize" + options, report=report)
        applied.update(r.rule for r in report.passes[0].rewrites)
        missed.update(rule for rule, _ in misses)
    rules = {p.name for p in jl.passes.CANONICALIZE}
    assert rules - applied == set(), "rules no case applies"
    assert rules - missed == set(), "rules no case shows not applying"

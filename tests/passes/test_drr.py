"""Declarative rewrite rules: matching (commutative operands, repeated captures, op
alternatives, variadic operands), constraints and the reason recorded when one fails,
targets (shared nodes, computed attributes and constants, native builders), the checks
that keep a rewrite from changing types or adding symbolic constraints, and the
provenance questions answered from the report."""

import json

import numpy as np
import pytest

import jitlab as jl
from jitlab.errors import PassError, UnknownOpError, VerifyError
from jitlab.passes import produced_by, rule_pass, why_not
from jitlab.passes.drr import Const, Constant, Many, Native, P, Rule, V, check, one_use, splat
from jitlab.passes.provenance import history
from jitlab.passes.rewriter import apply_patterns
from jitlab.report import CompileReport
from tests.passes.filecheck import assert_same_results


def run(text: str, *rules):
    """Applies `rules` to the parsed text; (result, rewrites, misses)."""
    program = jl.parse(text)
    log = jl.passes.rewriter.RewriteLog()
    apply_patterns(program, rules, log)
    jl.verify(program)
    return program, log.rewrites, log.misses


DOUBLE = Rule("add-self-is-double", P.add(V.x, V.x), P.mul(V.x, Constant(2, V.x)), doc="x + x == 2 * x exactly")

XY = "func @f(%x: f32[4], %y: f32[4]) -> (f32[4]) {\n"


def test_rule_rewrites_and_prints_as_ir_like_text():
    out, rewrites, _ = run(XY + "  %0 = np.add(%x, %x) : f32[4]\n  func.return(%0)\n}\n", DOUBLE)
    assert str(out) == XY + ("  %1 = np.constant() {value = dense<f32[] 2.0>} : f32[]\n"
                             "  %0 = np.mul(%x, %1) : f32[4]\n  func.return(%0)\n}\n")
    assert [r.rule for r in rewrites] == ["add-self-is-double"]
    assert str(DOUBLE) == "np.add($x, $x) => np.mul($x, constant(2 like $x))"


def test_repeated_capture_must_be_the_same_value():
    _, rewrites, misses = run(XY + "  %0 = np.add(%x, %y) : f32[4]\n  func.return(%0)\n}\n", DOUBLE)
    assert rewrites == []
    assert misses[0].reason == "$x would be both input %x and input %y (tried both operand orders)"


def test_commutative_operands_match_in_either_order_but_not_for_float_maximum():
    # ~x is order-reversing on integers and -x on floats, so both rules are exact
    int_rule = Rule("max-invert", P.maximum(P.bitwise_not(V.x), V.y), P.bitwise_not(P.minimum(V.x, P.bitwise_not(V.y))))
    float_rule = Rule("max-neg", P.maximum(P.neg(V.x), V.y), P.neg(P.minimum(V.x, P.neg(V.y))))

    def body(t, op):
        return (f"func @f(%x: {t}[4], %y: {t}[4]) -> ({t}[4]) {{\n  %0 = np.{op}(%x) : {t}[4]\n"
                f"  %1 = np.maximum(%y, %0) : {t}[4]\n  func.return(%1)\n}}\n")

    source = jl.parse(body("i32", "bitwise_not"))
    out, rewrites, _ = run(body("i32", "bitwise_not"), int_rule)
    assert [r.rule for r in rewrites] == ["max-invert"]
    assert_same_results(source, out, {})
    _, rewrites, misses = run(body("f32", "neg"), float_rule)
    assert rewrites == [] and "operand 0 of np.maximum is input %y, not np.neg" in misses[0].reason


def test_first_failing_constraint_is_the_reason():
    rule = Rule("two-checks", P.mul(V.x, Const(V.c)), V.x,
                where=[check("$x to be a float", lambda x: x.dtype.kind == "f"), splat(V.c, 1)])
    _, _, misses = run("func @f(%x: i32[4]) -> (i32[4]) {\n  %c = np.constant() {value = dense<i32[] 3>} : i32[]\n"
                       "  %0 = np.mul(%x, %c) : i32[4]\n  func.return(%0)\n}\n", rule)
    assert [m.reason for m in misses] == ["needs $x to be a float"]


def test_a_target_of_another_type_is_a_miss_not_a_change():
    rule = Rule("drop-add", P.add(V.x, V.y), V.y)
    out, rewrites, misses = run("func @f(%x: f32[2,4], %y: f32[4]) -> (f32[2,4]) {\n  %0 = np.add(%x, %y) : f32[2,4]\n"
                                "  func.return(%0)\n}\n", rule)
    assert rewrites == [] and "np.add" in str(out)
    assert misses[0].reason == "the target gives f32[4], the op gives f32[2,4]"


def test_a_target_needing_a_new_symbolic_constraint_is_a_miss():
    rule = Rule("skip-the-sum", P.add(V.x, P.sum(V.z, axes=V.a, keepdims=True)), P.add(V.x, V.z))
    text = ("func @f(%x: f32[B,4], %z: f32[C,4]) -> (f32[B,4]) {\n  %0 = np.sum(%z) {axes = [0], keepdims = true} : "
            "f32[1,4]\n  %1 = np.add(%x, %0) : f32[B,4]\n  func.return(%1)\n}\n")
    out, rewrites, misses = run(text, rule)
    assert rewrites == [] and len(out.constraints) == 0
    assert misses[0].reason == "the target needs B == C, which the program does not assume"


def test_op_alternatives_shared_target_nodes_and_computed_attributes():
    e = P.exp(V.x)
    square_exp = Rule("square-exp", P.square(P.exp(V.x)), P.mul(e, e))
    unit_reduce = Rule("unit-reduce", P.one_of(("np.max", "np.min"), V.x, axes=V.a).named("r"),
                       P.reshape(V.x, shape=lambda r: r.type.shape),
                       where=[check("the reduced dims to have size 1", lambda x, a: all(x.shape[i] == 1 for i in a))])
    text = ("func @f(%x: f32[3,1]) -> (f32[3,1], f32[3]) {\n  %0 = np.exp(%x) : f32[3,1]\n"
            "  %1 = np.square(%0) : f32[3,1]\n  %2 = np.min(%1) {axes = [1]} : f32[3]\n  func.return(%1, %2)\n}\n")
    out, rewrites, _ = run(text, square_exp, unit_reduce)
    assert str(out) == ("func @f(%x: f32[3,1]) -> (f32[3,1], f32[3]) {\n  %3 = np.exp(%x) : f32[3,1]\n"
                        "  %1 = np.mul(%3, %3) : f32[3,1]\n  %2 = np.reshape(%1) {shape = [3]} : f32[3]\n"
                        "  func.return(%1, %2)\n}\n")
    assert [r.rule for r in rewrites] == ["square-exp", "unit-reduce"]
    assert_same_results(jl.parse(text), out, {})
    assert str(square_exp) == "np.square(np.exp($x)) => t0 = np.exp($x); np.mul(t0, t0)"


def test_variadic_capture_and_native_target():
    def reverse(rw, xs, axis):
        return rw.op("np.concatenate", *reversed(xs), axis=axis)

    rule = Rule("shortest-last", P.concatenate(Many(V.xs), axis=V.axis), Native(reverse),
                where=[check("the first of $xs to be shorter than the last",
                             lambda xs, axis: xs[0].type.shape[axis] < xs[-1].type.shape[axis])])
    out, rewrites, misses = run("func @f(%x: f32[2], %y: f32[1], %z: f32[3]) -> (f32[6]) {\n"
                                "  %0 = np.concatenate(%x, %y, %z) {axis = 0} : f32[6]\n  func.return(%0)\n}\n", rule)
    assert "np.concatenate(%z, %y, %x)" in str(out)
    assert [r.rule for r in rewrites] == ["shortest-last"]
    assert misses[0].reason == "needs the first of $xs to be shorter than the last"
    assert str(rule) == ("np.concatenate($xs...) {axis = $axis} => native reverse "
                         "where the first of $xs to be shorter than the last")


def test_a_native_target_of_the_wrong_type_is_an_error_naming_the_rule():
    rule = Rule("bad", P.exp(V.x), Native(lambda rw, x: rw.op("np.sum", x, axes=(0,))))
    with pytest.raises(PassError, match="result type f32\\[4\\] != replacement type f32\\[\\]"):
        run(XY + "  %0 = np.exp(%x) : f32[4]\n  func.return(%0)\n}\n", rule)


@pytest.mark.parametrize("make,error,message", [
    (lambda: P.expp(V.x), UnknownOpError, "did you mean np.exp"),
    (lambda: P.sum(V.x, axis=V.a), VerifyError, "unknown attribute"),
    (lambda: Rule("r", P.exp(V.x), V.y), PassError, "uses \\$y, which the source does not capture"),
    (lambda: Rule("r", P.exp(V.x), V.x, where=[one_use(V.z)]), PassError, "\\$z to have one use uses \\$z"),
    (lambda: Rule("r", V.x, V.x), PassError, "the source must be an op pattern"),
    (lambda: Rule("r", P.exp(V.x), P.one_of(("np.exp", "np.log"), V.x)), PassError, None),
])
def test_mistakes_in_rules_fail_where_they_are_written(make, error, message):
    if message is None:
        rule = make()
        with pytest.raises(error, match="names several ops"):
            run(XY + "  %0 = np.exp(%x) : f32[4]\n  func.return(%0)\n}\n", rule)
        return
    with pytest.raises(error, match=message):
        make()


def test_dead_matched_ops_are_erased_by_the_rule_that_freed_them():
    _, rewrites, _ = run(XY + "  %0 = np.neg(%y) : f32[4]\n  %1 = np.sub(%x, %0) : f32[4]\n  func.return(%1)\n}\n",
                         jl.passes.RULES["sub-neg"])
    (record,) = rewrites
    assert record.rule == "sub-neg" and len(record.erased) == 2 and len(record.created) == 1


def test_rule_pass_in_a_pipeline_and_its_records():
    rule_pass("test-double-rules", [DOUBLE], "Rewrites x + x into 2 * x.")
    source = jl.parse(XY + "  %0 = np.add(%x, %x) : f32[4]\n  %1 = np.add(%0, %0) : f32[4]\n  func.return(%1)\n}\n")
    report = CompileReport()
    out = jl.opt(source, "test-double-rules,canonicalize,cse", report=report)
    assert [r.name for r in report.passes] == ["test-double-rules", "canonicalize", "cse"]
    assert [w.rule for w in report.passes[0].rewrites] == ["add-self-is-double"] * 2
    assert_same_results(source, out, {})
    with pytest.raises(PassError, match="has no rule"):
        jl.opt(source, "test-double-rules{disable=nope}")


def traced_model():
    def f(x):
        z = np.exp(np.negative(-x)).T.T
        return z.mean(axis=1), np.exp(x - x.max(axis=1, keepdims=True)).sum(axis=1)
    return jl.trace(f, np.ones((3, 4), np.float32))


def test_produced_by_follows_created_ops_back_through_passes():
    exe = jl.compile(traced_model(), level="O1")
    report = exe.report
    div_or_mul = [op for op in exe.program.walk() if op.name == "np.mul"]
    chains = [produced_by(report, op) for op in div_or_mul]
    rules = [[s.record.rule for s in chain] for chain in chains]
    assert ["div-power-of-two", "mean"] in rules
    chain = chains[rules.index(["div-power-of-two", "mean"])]
    assert [s.pass_name for s in chain] == ["canonicalize", "decompose"]
    originals = {op.uid for op in traced_model().walk()}
    assert all(produced_by(report, uid) == [] for uid in originals)


def test_history_and_why_not_answer_from_a_report_read_back_from_json():
    program = traced_model()
    report = CompileReport.from_dict(json.loads(jl.compile(program, level="O1").report.to_json()))
    negs = [op for op in program.walk() if op.name == "np.neg"]
    outer = negs[1]
    assert [s.record.rule for s in history(report, outer)] == ["neg-neg"]
    assert why_not(report, "neg-neg", outer).startswith("neg-neg applied at np.neg")
    assert why_not(report, "neg-neg", negs[0]) == (f"neg-neg did not apply at np.neg (op {negs[0].uid}) in "
                                                   "canonicalize: operand 0 of np.neg is input %x, not np.neg")
    assert why_not(report, "mul-one", outer) == f"mul-one only applies to np.mul; op {outer.uid} is np.neg"
    exp = next(op for op in program.walk() if op.name == "np.exp")
    assert "has no record at op" in why_not(report, "fold-constants", exp)


def test_misses_are_recorded_once_per_rule_and_op():
    _, _, misses = run(XY + "  %0 = np.exp(%x) : f32[4]\n  %1 = np.neg(%0) : f32[4]\n  %2 = np.neg(%1) : f32[4]\n"
                       "  %3 = np.abs(%2) : f32[4]\n  func.return(%3)\n}\n", *jl.passes.CANONICALIZE)
    keys = [(m.rule, m.op) for m in misses]
    assert len(keys) == len(set(keys))


def test_exact_identities_keep_nan_inf_and_signed_zero_bit_for_bit():
    x = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5, -2.5, 3e38], np.float32)
    program = jl.trace(lambda v: (np.negative(-v) * 1.0 - 0.0) / 1.0 + (-0.0), x)
    out = jl.opt(program, "canonicalize,cse,dce")
    assert str(out).count("= np.") == 0
    result, = jl.compile(out, level="O0")(x)
    assert np.array_equal(np.signbit(result), np.signbit(x)) and np.array_equal(result, x, equal_nan=True)

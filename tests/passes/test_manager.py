"""The pass manager: pipeline strings with options, one record per pass run, verification
after each pass, printing after all / after change, stop-after, errors that name the
pass, and the level pipelines behind jl.compile."""

import io
import re

import numpy as np
import pytest

import jitlab as jl
from jitlab.errors import PassError, ShapeError
from jitlab.passes import LEVELS, PASSES, PassManager, function_pass, parse_pipeline, register_pass
from jitlab.passes.canonicalize import Canonicalize

TEXT = """func @f(%x: f32[2,3]) -> (f32[2,3], f32[3,2]) {
  %0 = np.neg(%x) : f32[2,3]
  %1 = np.neg(%0) : f32[2,3]
  %2 = np.exp(%x) : f32[2,3]
  %3 = np.exp(%x) : f32[2,3]
  %4 = np.transpose(%3) {perm = [1, 0]} : f32[3,2]
  %5 = np.softmax(%2) {axis = 1} : f32[2,3]
  %6 = np.add(%1, %5) : f32[2,3]
  func.return(%6, %4)
}
"""


def test_pipeline_strings_with_options():
    passes = parse_pipeline("canonicalize{fold-limit=8,disable=mul-one:neg-neg, max-iterations=3}, cse ,dce")
    assert [p.name for p in passes] == ["canonicalize", "cse", "dce"]
    canon = passes[0]
    assert isinstance(canon, Canonicalize)
    assert (canon.fold_limit, canon.disable, canon.max_iterations) == (8, ("mul-one", "neg-neg"), 3)
    assert canon.options_text() == "{max_iterations=3,disable=mul-one:neg-neg,fold_limit=8}"


@pytest.mark.parametrize("pipeline,message", [
    ("canonicalise", "unknown pass 'canonicalise' \\(did you mean canonicalize\\?\\)"),
    ("canonicalize{fold-limit=many}", "option fold_limit takes a int, got 'many'"),
    ("canonicalize{speed=3}", "unknown option 'speed'"),
    ("cse,,dce", "cannot read the pipeline at column 5"),
])
def test_bad_pipelines_are_explained(pipeline, message):
    with pytest.raises(PassError, match=message):
        parse_pipeline(pipeline)


def test_disabling_an_unknown_rule_lists_the_rules():
    with pytest.raises(PassError, match="canonicalize has no rule\\(s\\) nope; its rules are fold-constants, "):
        jl.opt(jl.parse(TEXT), "canonicalize{disable=nope}")


def test_disabled_rules_do_not_fire():
    report = jl.CompileReport()
    jl.opt(jl.parse(TEXT), "canonicalize{disable=neg-neg}", report=report)
    assert [r.rule for r in report.passes[0].rewrites] == ["add-neg", "sub-neg"]


def test_one_record_per_pass_with_text_counts_changes_and_timing():
    report = jl.CompileReport()
    out = jl.opt(jl.parse(TEXT), "verify,canonicalize,decompose,cse,dce", report=report)
    records = report.passes
    assert [r.name for r in records] == ["verify", "canonicalize", "decompose", "cse", "dce"]
    assert [r.changed for r in records] == [False, True, True, True, False]
    assert records[0].before == records[0].after == TEXT
    for earlier, later in zip(records, records[1:]):
        assert earlier.after == later.before
    assert records[-1].after == str(out)
    assert all(isinstance(r.seconds, float) and r.seconds >= 0 for r in records)
    assert records[1].ops_before == {"np": 7} and records[1].ops_after == {"np": 5}
    assert records[2].ops_after == {"np": 9} and records[3].ops_after == {"np": 8}
    assert [w.rule for w in records[1].rewrites] == ["neg-neg"]
    assert [w.rule for w in records[2].rewrites] == ["softmax"]
    assert records[3].rewrites[0].rule == "cse"
    assert {n.name for n in records[1].graph_after.nodes} == {"np.exp", "np.transpose", "np.softmax", "np.add"}


def test_print_after_all_and_after_change():
    for option, expected in [("print_after_all", ["verify", "canonicalize", "dce"]),
                             ("print_after_change", ["canonicalize"])]:
        out = io.StringIO()
        jl.opt(jl.parse(TEXT), "verify,canonicalize,dce", **{option: True, "out": out})
        assert re.findall(r"// ----- IR after (\S+) -----", out.getvalue()) == expected


def test_stop_after():
    report = jl.CompileReport()
    jl.opt(jl.parse(TEXT), "canonicalize,decompose,cse", stop_after="decompose", report=report)
    assert [r.name for r in report.passes] == ["canonicalize", "decompose"]
    with pytest.raises(PassError, match="stop_after names 'fuse', which is not in the pipeline"):
        jl.opt(jl.parse(TEXT), "canonicalize,cse", stop_after="fuse")


@function_pass("test-break-types", "Sets a wrong result type: the verifier must catch it.")
def break_types(program, ctx):
    op = next(op for op in program.walk() if op.name == "np.exp")
    op.results[0].type = op.results[0].type.with_dtype("f64")


def test_a_pass_that_breaks_the_ir_is_named_with_the_op_and_the_ir():
    with pytest.raises(PassError) as info:
        jl.opt(jl.parse(TEXT), "canonicalize,test-break-types,dce")
    message = str(info.value)
    assert message.startswith("pass test-break-types left the IR invalid: ")
    assert "np.exp: result types (f64[2,3]) differ from the inferred (f32[2,3])" in message
    assert "--- IR after test-break-types ---" in message
    assert "  %2 = np.exp(%x) : f64[2,3]    // <-- here" in message
    jl.opt(jl.parse(TEXT), "test-break-types", verify_each=False)


@function_pass("test-raise-shape-error")
def raise_shape_error(program, ctx):
    raise ShapeError("np.exp: made up")


@function_pass("test-raise-bug")
def raise_bug(program, ctx):
    return {}["missing"]


def test_errors_inside_a_pass_name_the_pass():
    with pytest.raises(ShapeError, match="made up") as info:
        jl.opt(jl.parse(TEXT), "cse,test-raise-shape-error")
    assert "(raised by pass test-raise-shape-error)" in getattr(info.value, "__notes__", [])
    with pytest.raises(PassError, match="pass test-raise-bug failed: KeyError: 'missing'"):
        jl.opt(jl.parse(TEXT), "test-raise-bug")


def test_pass_names_are_unique():
    with pytest.raises(ValueError, match="registered twice"):
        register_pass(type("Again", (Canonicalize,), {"name": "canonicalize"}))
    assert len(PASSES) == len(set(PASSES)) and all(cls.name == name for name, cls in PASSES.items())


def test_level_pipelines():
    assert LEVELS["O0"] == ["verify", "infer-shapes", "dce"]
    for level in ("O1", "O2"):
        assert LEVELS[level][:3] == ["verify", "infer-shapes", "dce"]
        assert LEVELS[level][3:9] == ["canonicalize", "decompose", "canonicalize", "cse", "fold-weights", "dce"]


def test_compile_at_o1_records_every_pass_with_before_and_after():
    program = jl.parse(TEXT)
    exe = jl.compile(program, level="O1")
    assert [r.name for r in exe.report.passes] == [name.split("{")[0] for name in LEVELS["O1"]]
    assert exe.report.passes[0].before == TEXT and exe.report.passes[-1].after == str(exe.program)
    assert "np.softmax" not in str(exe.program) and "np.neg" not in str(exe.program)
    x = np.array([[0.5, -0.0, np.inf], [np.nan, 2.0, -3.0]], np.float32)
    for a, b in zip(exe(x), jl.compile(program, level="O0")(x)):
        np.testing.assert_allclose(a, b, rtol=1e-6, equal_nan=True)


def test_compile_with_a_custom_pipeline_and_manager_options():
    out = io.StringIO()
    exe = jl.compile(jl.parse(TEXT), passes="decompose,dce", print_after_change=True, out=out)
    assert [r.name for r in exe.report.passes] == ["decompose", "dce"]
    assert "IR after decompose" in out.getvalue() and "np.softmax" not in str(exe.program)


def test_pass_manager_runs_passes_directly():
    manager = PassManager(parse_pipeline("canonicalize"), verify_each=True, snapshots=False)
    report = jl.CompileReport()
    manager.run(jl.parse(TEXT), jl.passes.PassContext(report=report))
    assert report.passes[0].graph_before is None and report.passes[0].changed


def test_cse_merges_commuted_operands_except_float_maximum():
    check = "func @f(%x: {t}[4], %y: {t}[4]) -> ({t}[4], {t}[4], {t}[4], {t}[4]) {{\n" \
            "  %0 = np.add(%x, %y) : {t}[4]\n  %1 = np.add(%y, %x) : {t}[4]\n" \
            "  %2 = np.maximum(%x, %y) : {t}[4]\n  %3 = np.maximum(%y, %x) : {t}[4]\n" \
            "  func.return(%0, %1, %2, %3)\n}}\n"
    report = jl.CompileReport()
    source = jl.parse(check.format(t="f32"))
    floats = jl.opt(source, "cse", report=report)
    assert str(floats).count("np.add") == 1 and str(floats).count("np.maximum") == 2
    (record,) = report.passes[0].rewrites
    assert (record.rule, record.modified) == ("cse", [source.return_op.uid])
    ints = jl.opt(jl.parse(check.format(t="i32")), "cse")
    assert str(ints).count("np.add") == 1 and str(ints).count("np.maximum") == 1

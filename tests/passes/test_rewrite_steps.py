"""Each rewrite record says where its rule is written and the IR lines it replaced and made, so
the explorer can step through a pass one rewrite at a time."""

import pathlib

import numpy as np

import jitlab as jl
from jitlab.passes import PassContext, PassManager
from tests.passes.test_rewrite_records import SPLIT

ROOT = pathlib.Path(jl.__file__).resolve().parents[1]


def source_line(source: str) -> str:
    path, line = source.rsplit(":", 1)
    return (ROOT / path).read_text().splitlines()[int(line) - 1]


def run(text: str, pipeline: str):
    program = jl.parse(text)
    ctx = PassContext()
    PassManager.parse(pipeline).run(program, ctx)
    return ctx.report


ONE = """func @f(%x: f32[4]) -> (f32[4]) {
  %c = np.constant() {value = dense<f32[] 1.0>} : f32[]
  %m = np.mul(%x, %c) : f32[4]
  %t = np.tanh(%m) : f32[4]
  func.return(%t)
}
"""


def test_a_declarative_rule_points_at_the_line_that_writes_it_and_shows_its_lines():
    report = run(ONE, "canonicalize")
    mul_one = next(r for p in report.passes for r in p.rewrites if r.rule == "mul-one")
    assert 'Rule("mul-one"' in source_line(mul_one.source)
    assert mul_one.before[0] == "%m = np.mul(%x, %c) : f32[4]"      # the root first
    assert "%t = np.tanh(%m) : f32[4]" in mul_one.before               # its user, which now reads %x
    assert mul_one.after == ["%t = np.tanh(%x) : f32[4]"]
    dead = next(r for p in report.passes for r in p.rewrites if r.rule == "remove-dead")
    assert "def is_trivially_dead" in source_line(dead.source) and dead.before[0].startswith("%c = np.constant")


def test_pass_code_that_records_a_rewrite_is_its_source():
    report = run(SPLIT, "mark-subgraphs{exclude=np.tanh},fuse")
    build = next(p for p in report.passes if p.name == "fuse").rewrites[0]
    assert build.rule == "fuse-cluster" and "rw.record(\"fuse-cluster\"" in source_line(build.source)
    assert any(line.startswith("%a, %c = jit.group(%x)") for line in build.after)


def test_the_lines_a_rewrite_made_are_the_ir_after_the_pass_where_nothing_changed_them_later():
    x = np.ones((8, 4), np.float32)
    exe = jl.compile(jl.trace(lambda v: np.exp(v * 1.0 + 0.0).sum(axis=1) / 4.0, x), level="O1", target="cpu")
    checked = 0
    for record in exe.report.passes:
        later: set[int] = set()
        lines = {line.strip() for line in record.after.splitlines()}
        for rw in reversed(record.rewrites):
            touched = {*rw.created, *rw.modified, *rw.moved}
            if not touched & later:
                for line in rw.after:
                    if "%?" not in line:       # a value named only when the program is printed
                        assert line in lines, (record.name, rw.rule, line)
                        checked += 1
            later |= touched | set(rw.erased)
    assert checked


def test_a_pipeline_without_snapshots_records_sources_but_no_lines():
    program = jl.parse(ONE)
    ctx = PassContext()
    PassManager.parse("canonicalize", snapshots=False).run(program, ctx)
    (record,) = ctx.report.passes
    assert record.rewrites and all(r.source and r.before == [] == r.after for r in record.rewrites)

"""The pass context's typed seams: passes ask a backend through a capability, never by import,
and read the compile's options from typed fields."""

import ast
import pathlib
from dataclasses import dataclass

import pytest

import jitlab as jl
from jitlab.passes import PassContext, PassManager

TEXT = """func @f(%x: f32[2,3], %y: f32[2,3]) -> (f32[2,3]) {
  %0 = np.exp(%x) : f32[2,3]
  %1 = np.add(%0, %y) : f32[2,3]
  func.return(%1)
}
"""


@dataclass
class OnlyAdds:
    """A capability that compiles np.add alone."""

    name: str = "only_adds"
    donates_in_place: bool = False
    folds_operand_transposes: bool = False

    def supports(self, op):
        return None if op.name == "np.add" else "only adds here"

    def fusion_kind(self, op):
        return "elementwise"


def test_mark_subgraphs_asks_the_context_s_backend():
    asked = []

    def lookup(name):
        asked.append(name)
        return OnlyAdds()

    ctx = PassContext(target="mine", backends=lookup)
    PassManager.parse("mark-subgraphs,fuse").run(jl.parse(TEXT), ctx)
    assert asked == ["mine"]
    assert [(g.op_names, g.backend) for g in ctx.report.groups] == [(["np.add"], "only_adds")]
    assert [(r.name, r.reason) for r in ctx.report.rejected] == [("np.exp", "only adds here")]


def test_a_context_built_by_hand_finds_the_registered_backends():
    ctx = PassContext()
    PassManager.parse("mark-subgraphs,fuse").run(jl.parse(TEXT), ctx)
    assert [g.backend for g in ctx.report.groups] == ["numba_cpu"]


def test_no_pass_imports_a_backend():
    passes = pathlib.Path(jl.__file__).parent / "passes"
    found = []
    for path in passes.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and "backends" in (node.module or ""):
                found.append(f"{path.name}:{node.lineno}")
            if isinstance(node, ast.Import) and any("backends" in a.name for a in node.names):
                found.append(f"{path.name}:{node.lineno}")
    assert found == []


def test_opt_takes_the_context_s_options_and_refuses_others():
    report = jl.CompileReport()
    jl.opt(jl.parse(TEXT), "mark-subgraphs,fuse,schedule", report=report, bindings={}, donate=["x"])
    assert report.schedule is not None
    jl.opt(jl.parse(TEXT), "recompute", report=report, memory_limit="1KiB")
    assert report.recompute.limit_bytes == 1024
    with pytest.raises(jl.JitlabError, match="jl.opt: unknown option 'memory_limt'"):
        jl.opt(jl.parse(TEXT), "dce", memory_limt=10)

"""Fusion kinds are a FusionKind enum between backends, the fusion pass and the report,
spelt in JSON as the strings they replaced; a backend may still answer with those strings."""

import json

import pytest

import jitlab as jl
from jitlab.backends.numba_cpu.backend import NumbaCPUBackend
from jitlab.errors import PassError
from jitlab.report import FusionKind

MLP = """func @f(%x: f32[4,8], %w: f32[8,3]) -> (f32[3], f32[4,3]) {
  %m = np.matmul(%x, %w) : f32[4,3]
  %r = np.relu(%m) : f32[4,3]
  %s = np.sum(%r) {axes = [0]} : f32[3]
  %t = np.exp(%r) : f32[4,3]
  func.return(%s, %t)
}
"""


def _groups(report=None):
    report = report or jl.CompileReport()
    jl.opt(jl.parse(MLP), "mark-subgraphs,fuse", report=report)
    return report


def test_group_kinds_are_enum_members_and_json_keeps_their_spelling():
    report = _groups()
    kinds = [g.kind for g in report.groups]
    assert all(isinstance(k, FusionKind) for k in kinds) and FusionKind.CONTRACTION in kinds
    assert [g["kind"] for g in json.loads(report.to_json())["groups"]] == [k.value for k in kinds]
    assert f"{FusionKind.REDUCTION}" == str(FusionKind.REDUCTION) == "reduction"
    again = jl.CompileReport.from_dict(json.loads(report.to_json()))
    assert [g.kind for g in again.groups] == kinds and all(isinstance(g.kind, FusionKind) for g in again.groups)


def test_a_backend_answering_with_strings_fuses_the_same(monkeypatch):
    expected = [(g.op_names, g.kind) for g in _groups().groups]
    original = NumbaCPUBackend.fusion_kind
    monkeypatch.setattr(NumbaCPUBackend, "fusion_kind", lambda self, op: original(self, op).value)
    assert [(g.op_names, g.kind) for g in _groups().groups] == expected and len(expected) > 1


def test_an_unknown_kind_is_an_error_naming_backend_and_op(monkeypatch):
    monkeypatch.setattr(NumbaCPUBackend, "fusion_kind", lambda self, op: "sideways")
    with pytest.raises(PassError, match=r"numba_cpu: fusion_kind\(np\.matmul\) gave 'sideways'"):
        _groups()


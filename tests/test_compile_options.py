"""jl.compile's seams: its options read once into a CompileOptions, and the compiler reaching
backends through their public interface only."""

import ast
import pathlib

import numpy as np
import pytest

import jitlab as jl
from jitlab.compiler import CompileOptions


def test_options_are_read_once_and_checked():
    opts = CompileOptions.read({"memory_limit": "2KiB", "donate": ["x"], "print_after_all": True}, "O1", "cpu")
    assert (opts.memory_limit, opts.donate, opts.instrumentation) == (2048, ("x",), {"print_after_all": True})
    assert opts.executable_limit == 2048 and not opts.limit_on_device
    assert opts.backend_options() == {"donate": ("x",)}
    with pytest.raises(jl.JitlabError, match="unknown option 'bogus'"):
        CompileOptions.read({"bogus": 1}, "O1", "cpu")
    with pytest.raises(jl.JitlabError, match="cannot read memory_limit 'lots'"):
        CompileOptions.read({"memory_limit": "lots"}, "O1", "cpu")
    with pytest.raises(jl.JitlabError, match=r"recompute=True\) needs memory_limit"):
        CompileOptions.read({"recompute": True}, "O1", "cpu")


def test_the_compiler_imports_nothing_of_the_cpu_backend():
    tree = ast.parse((pathlib.Path(jl.__file__).parent / "compiler.py").read_text())
    modules = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert not [m for m in modules if m.startswith("backends.numba_cpu")]


def test_kernel_sharing_asks_the_backend(monkeypatch):
    from jitlab.backends.numba_cpu.backend import NumbaCPUBackend

    def fn(x, y):
        return np.tanh(x * 3.0) + 1.0, np.tanh(y * 3.0) + 1.0

    x = np.ones((4, 8), np.float32)
    program = jl.trace(fn, x, x)
    shared = jl.compile(program, passes="mark-subgraphs,fuse,dce", level="O1", progress=False)
    assert len(shared.report.kernels) == 1 and shared.report.kernels[0].reused_by == [1]
    monkeypatch.setattr(NumbaCPUBackend, "kernel_variant", lambda self, group: str(group.attrs["id"]))
    apart = jl.compile(program, passes="mark-subgraphs,fuse,dce", level="O1", progress=False)
    assert [k.group for k in apart.report.kernels] == [0, 1]
    np.testing.assert_allclose(apart(x, x)[0], shared(x, x)[0])


def test_donations_and_recompute_are_records_that_round_trip_through_json():
    import json

    from jitlab.report import CompileReport, DonationRecord, RecomputeRecord

    def step(w, g):
        return w - 0.1 * g

    w = np.ones(8, np.float32)
    exe = jl.compile(jl.trace(step, w, w), level="O1", target="cpu", donate=("w",), progress=False)
    (donation,) = exe.report.donations
    assert isinstance(donation, DonationRecord) and (donation.input_name, donation.mode) == ("w", "in place")
    exe.report.recompute = RecomputeRecord(limit_bytes=64, peak_before=128, peak_after=96, values=["a"])
    data = json.loads(exe.report.to_json())
    assert data["donations"][0]["input_name"] == "w" and data["recompute"]["values"] == ["a"]
    back = CompileReport.from_dict(data)
    assert back.donations == exe.report.donations and back.recompute == exe.report.recompute

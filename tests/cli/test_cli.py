"""Every `jitlab` subcommand, in-process through main(argv), and the installed script once."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess

import numpy as np
import onnx
import pytest

import jitlab as jl
from jitlab import cli
from jitlab.explore.html import read_state

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHAIN, MLP = ROOT / "examples/ir/chain.jir", ROOT / "examples/ir/mlp.jir"
ALEXNET = pathlib.Path(onnx.__file__).parent / "backend/test/data/light/light_bvlc_alexnet.onnx"


def test_opt_prints_and_writes_the_optimized_ir(capsys, tmp_path):
    assert cli.main(["opt", str(CHAIN), "--passes", "canonicalize,cse,dce"]) == 0
    printed = capsys.readouterr().out
    expected = str(jl.opt(jl.parse(CHAIN.read_text()), "canonicalize,cse,dce"))
    assert printed.strip() == expected.strip()
    out = tmp_path / "out.jir"
    assert cli.main(["opt", str(MLP), "--passes", "dce", "--print-ir-after-all", "-o", str(out)]) == 0
    assert str(jl.parse(out.read_text())) == str(jl.opt(jl.parse(MLP.read_text()), "dce"))
    assert "dce" in capsys.readouterr().out


def test_opt_reads_an_onnx_model(capsys):
    assert cli.main(["opt", str(ALEXNET), "--passes", "canonicalize"]) == 0
    assert "np.conv2d" in capsys.readouterr().out


@pytest.mark.parametrize("file, level, target", [(MLP, "O2", "cpu"), (CHAIN, "O1", "numexpr"), (CHAIN, "O0", "cpu")])
def test_run_checks_against_o0(capsys, file, level, target):
    if target == "numexpr":
        pytest.importorskip("jitlab_numexpr", reason="examples/jitlab-numexpr is not installed")
    assert cli.main(["run", str(file), "--level", level, "--target", target, "--check", "--profile"]) == 0
    out = capsys.readouterr().out
    assert "equal to O0" in out and "median" in out


def test_run_with_npz_inputs_prints_the_outputs(capsys, tmp_path):
    program = jl.parse(CHAIN.read_text())
    x, y = (np.full((64, 32), v, np.float32) for v in (1.0, 2.0))
    np.savez(tmp_path / "in.npz", x=x, y=y)
    assert cli.main(["run", str(CHAIN), "--inputs", str(tmp_path / "in.npz")]) == 0
    expected = jl.compile(program, level="O0")(x, y)[0]
    assert f"mean={float(expected.mean()):.6g}" in capsys.readouterr().out


def test_run_check_fails_on_a_mismatch(capsys, monkeypatch):
    real = jl.compile

    def wrong(program, level="O1", **kw):
        exe = real(program, level=level, **kw)
        return exe if level == "O0" else (lambda *a: tuple(o + 1 for o in exe(*a)))

    monkeypatch.setattr(jl, "compile", wrong)
    assert cli.main(["run", str(CHAIN), "--check"]) == 1
    assert "differs from O0" in capsys.readouterr().err


@pytest.mark.slow
def test_run_an_onnx_light_model(capsys):
    assert cli.main(["run", str(ALEXNET), "--level", "O1", "--check"]) == 0


def test_explore_writes_static_html(tmp_path, capsys):
    out = tmp_path / "report.html"
    assert cli.main(["explore", str(CHAIN), "-o", str(out)]) == 0
    html = out.read_text()
    assert "<html" in html.lower() and "numba_cpu" in json.dumps(read_state(html))


def test_cache_info_and_clear(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("JITLAB_CACHE_DIR", str(tmp_path))
    (tmp_path / "k1.py").write_text("x = 1\n")
    (tmp_path / "executables").mkdir(mode=0o700)
    (tmp_path / "executables" / "e1.pkl").write_bytes(b"entry")
    assert cli.main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert "kernels: 1" in out and "executables: 1 (5 bytes)" in out
    caller = out.split("native caller: ")[1].splitlines()[0]
    assert caller.endswith(".so") or "kernels are called through cffi" in caller
    assert cli.main(["cache", "clear"]) == 0
    assert not (tmp_path / "k1.py").exists() and not (tmp_path / "executables" / "e1.pkl").exists()


def test_bench_and_conformance_delegate(monkeypatch):
    from jitlab.bench import cli as bench_cli
    from jitlab.onnx import conformance

    seen = []
    monkeypatch.setattr(bench_cli, "main", lambda argv: seen.append(("bench", argv)) or 0)
    monkeypatch.setattr(conformance, "main", lambda argv: seen.append(("onnx", argv)) or 3)
    assert cli.main(["bench", "--quick", "--peers", "numpy"]) == 0
    assert cli.main(["onnx-conformance", "-k", "relu"]) == 3
    assert seen == [("bench", ["--quick", "--peers", "numpy"]), ("onnx", ["-k", "relu"])]


@pytest.mark.parametrize("argv, words", [
    (["run", "missing.jir"], "no such file"),
    (["opt", str(CHAIN), "--passes", "no-such-pass"], "unknown pass"),
    (["run", str(CHAIN), "--target", "nope"], "unknown target"),
    (["run", str(CHAIN), "--inputs", "missing.npz"], "missing.npz"),
])
def test_bad_input_is_one_line_and_exit_1(capsys, argv, words):
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1 and "Traceback" not in err


def test_debug_shows_the_traceback():
    with pytest.raises(jl.JitlabError):
        cli.main(["--debug", "run", "missing.jir"])


@pytest.mark.parametrize("name", ["opt", "run", "explore", "cache", "bench", "onnx-conformance"])
def test_help_on_every_command(name, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main([name, "--help"])
    assert info.value.code == 0
    assert "usage" in capsys.readouterr().out.lower()


def test_the_installed_script_runs():
    script = shutil.which("jitlab") or str(pathlib.Path(os.sys.executable).parent / "jitlab")
    if not os.path.exists(script):
        pytest.skip("the jitlab script is not installed (pip install -e .)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([script, "opt", str(CHAIN), "--passes", "dce"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert str(jl.parse(done.stdout)) == str(jl.parse(CHAIN.read_text()))
    bad = subprocess.run([script, "run", "missing.jir"], capture_output=True, text=True, env=env, timeout=120)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1


def test_fuzz_runs_programs_against_numpy_and_reports_each_failure(capsys, tmp_path, monkeypatch):
    report = tmp_path / "fuzz.report"
    args = ["fuzz", "--examples", "5", "--level", "O0", "--seed", "7", "--quiet", "--report", str(report)]
    assert cli.main(args) == 0
    assert "O0 seed 7: 5 tried: 5 pass, 0 refused, 0 mismatch, 0 crash" in capsys.readouterr().out
    assert report.read_text().startswith("O0 seed 7: 5 tried")
    monkeypatch.setattr("jitlab.fuzz.runner.differences", lambda got, want, rtols: ["output 0: planted"])
    assert cli.main(args) == 1
    assert "mismatch at seed 7: output 0: planted" in capsys.readouterr().out
    text = report.read_text()
    assert "5 mismatch" in text and "def program(a0" in text and "result = program(" in text

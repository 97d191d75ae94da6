"""The bench's ONNX workload in --quick mode (a small convnet of ResNet's op types):
structure and correctness against onnx's reference evaluator, never timings."""

import importlib.util
import json

import numpy as np
import pytest

from jitlab.bench import cli, onnx_models

pytestmark = pytest.mark.xdist_group("bench-onnx-models")     # its module fixture is made once, in one worker


@pytest.fixture(scope="module")
def quick_models(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench") / "out.json"
    code = cli.main(["--quick", "--only", "resnet50", "--peers", "numpy", "--json", str(path)])
    return code, json.loads(path.read_text())


# a cold and a warm process per level (a minute on CI): under -m slow; in the default run
# tests/backends/test_kernel_cache.py checks that a second process loads its kernels from disk
@pytest.mark.slow
def test_quick_model_runs_on_onnxruntime_and_both_levels(quick_models):
    code, data = quick_models
    assert code == 0 and data["benchmarks"] == []
    model, = data["onnx_models"]
    assert model["name"] == "tiny_convnet" and model["size"] == "1x3x16x16"
    assert set(model["results"]) == {"onnxruntime", "jitlab O1", "jitlab O2"}
    for runner, r in model["results"].items():
        assert r["status"] == "ok", (runner, r)
        assert r["ms"] > 0 and r["vs_onnxruntime"] > 0
    for level in ("O1", "O2"):
        r = model["results"][f"jitlab {level}"]
        assert r["compile_cold_s"] > 0 and r["compile_warm_s"] > 0 and r["peak_bytes"] > 0
        cold, warm = r["cold_breakdown"], r["warm_breakdown"]
        # warm: nothing compiled, the code read from disk (native libraries, or numba's cache)
        assert cold["llvm"] > 0 and warm["llvm"] == 0 and warm["kernel_cache"] + warm["numba_cache_read"] > 0
        assert cold["trace"] + cold["setup"] + cold["passes"] + cold["kernels"] <= cold["total"] <= r["compile_cold_s"]


@pytest.mark.slow
def test_the_report_has_a_row_per_model_and_runner(quick_models):
    text = cli.format_report(quick_models[1])
    rows = [line for line in text.splitlines() if line.startswith("| tiny_convnet |")]
    assert [row.split(" | ")[2] for row in rows] == ["onnxruntime", "jitlab O1", "jitlab O2"]
    lines = [line for line in text.splitlines() if line.startswith("tiny_convnet / jitlab")]
    assert [line.split(":")[0] for line in lines] == [f"tiny_convnet / jitlab {lv} {kind}" for lv in ("O1", "O2")
                                                      for kind in ("cold", "warm")]


def test_without_onnxruntime_its_column_says_so(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime" else real(name, *a))
    result = onnx_models.run_model("resnet50", [], repeats=1, quick=True)
    assert result["results"] == {"onnxruntime": {"status": "not installed"}}


def test_a_wrong_output_is_a_mismatch_not_a_time(tmp_path):
    path = onnx_models.tiny_convnet(str(tmp_path / "tiny.onnx"))
    feed = onnx_models.dummy_feed(path)
    expected = onnx_models._reference(path, feed)
    assert onnx_models._check(lambda: expected + 1e-2, expected)["status"] == "mismatch"
    assert onnx_models._check(lambda: np.array(expected), expected)["status"] == "ok"


def test_the_tiny_convnet_is_what_onnxruntime_computes(tmp_path):
    path = onnx_models.tiny_convnet(str(tmp_path / "tiny.onnx"))
    feed = onnx_models.dummy_feed(path)
    ort = onnx_models._onnxruntime(path, feed)()
    np.testing.assert_allclose(onnx_models._reference(path, feed), ort, rtol=1e-4, atol=1e-6)

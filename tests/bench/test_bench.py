"""The benchmark suite in --quick mode: structure and correctness, never timings."""

import json

import numpy as np
import pytest

from jitlab.bench import cli, suite
from jitlab.bench.peers import PEERS, Prepared, Runner

# The default run's quick suite: an elementwise chain and a contraction (the loop program on its peers:
# test_imperative_benchmarks_run_on_numba_and_are_na_on_functional_peers); every benchmark, the ONNX
# models, the recompute rows and the loaded rows run under -m slow.
QUICK_ONLY = ("chain", "mlp")
pytestmark = pytest.mark.xdist_group("bench-quick-run")     # the module's fixture runs once, in one worker


def quick(folder, *only: str):
    path = folder / "out.json"
    code = cli.main(["--quick", "--peers", "numpy,numexpr", "--json", str(path),
                     *(["--only", ",".join(only)] if only else [])])
    return code, json.loads(path.read_text())


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    return quick(tmp_path_factory.mktemp("bench"), *QUICK_ONLY)


def test_quick_suite_runs_its_benchmarks_correctly(quick_run):
    assert [b["name"] for b in quick_run[1]["benchmarks"]] == list(QUICK_ONLY)
    assert_every_row_ok(*quick_run)


@pytest.mark.slow
def test_the_whole_quick_suite_runs_every_benchmark_correctly(tmp_path):
    code, data = quick(tmp_path)
    assert [b["name"] for b in data["benchmarks"]] == [b.name for b in suite.SUITE]
    assert_every_row_ok(code, data)
    assert data["onnx_models"] and data["loaded"]["rows"]


def assert_every_row_ok(code, data):
    assert code == 0
    for b in data["benchmarks"]:
        for level in ("O1", "O2"):
            result = b["results"][f"jitlab {level}"]
            assert result["status"] == "ok", (b["name"], level, result)
            assert result["ms"] > 0 and result["speedup"] > 0
            assert result["compile_cold_s"] > 0 and result["compile_warm_s"] > 0
        assert b["results"]["numpy"]["speedup"] == pytest.approx(1.0)


def test_quick_suite_reports_bounds_bandwidth_and_overhead(quick_run):
    _, data = quick_run
    assert set(data["bandwidth_bytes_per_s"]) == {"1 thread", "2 threads"}
    assert all(v > 0 for v in data["bandwidth_bytes_per_s"].values())
    by_name = {b["name"]: b for b in data["benchmarks"]}
    chain = by_name["chain"]
    assert chain["bytes_moved"] == 3 * 4 * (1 << 16)
    assert chain["lower_bound_ms"] == pytest.approx(chain["bytes_moved"] / max(data["bandwidth_bytes_per_s"].values()) * 1e3)
    assert by_name["mlp"]["lower_bound_ms"] is None
    assert set(data["call_overhead_us"]) == {"O1", "O2"}
    assert data["machine"]["blas"], "threadpoolctl found no BLAS"


def test_report_table_names_every_benchmark_and_runner(quick_run):
    _, data = quick_run
    text = cli.format_report(data)
    for name in QUICK_ONLY:
        assert f"| {name} |" in text
    for runner in ("numpy", "numexpr", "jitlab O1", "jitlab O2"):
        assert runner in text


def test_memory_table_gives_each_plan_against_its_bound_and_each_order(quick_run):
    _, data = quick_run
    text = cli.format_report(data)
    for b in data["benchmarks"]:
        memory = b["results"]["jitlab O2"]["memory"]
        assert memory["mode"] == "static" and set(memory["order_peaks"]) >= {"bfs", "dfs", "memory"}
        assert memory["lower_bound_bytes"] == memory["order_peaks"][memory["order"]]
        assert f"| {b['name']} | jitlab O2 | static |" in text


@pytest.mark.slow        # a training step compiled four times (O1 and O2, with and without recomputation)
def test_recompute_table_trades_memory_under_its_limit(tmp_path):
    code, data = quick(tmp_path, "recompute")
    assert code == 0
    rows = data["recompute"]["rows"]
    assert [r["level"] for r in rows] == ["O1", "O2"]
    for r in rows:
        assert r["same_result"], r
        assert r["limit_bytes"] == int(0.6 * r["plain_peak_bytes"])
        assert r["recompute_peak_bytes"] <= r["limit_bytes"] and r["ops_added"] > 0
    assert "| O2 |" in cli.format_report(data).split("recompute: SGD step")[1]


def test_wrong_result_is_reported_not_timed():
    bench = suite.by_name(["chain"])[0]
    inputs = bench.inputs(quick=True)
    wrong = Runner("wrong", None, lambda b, a: Prepared(lambda: b.fn(*a) + 1, np.asarray))
    result = cli._prepare(wrong, bench, inputs, bench.fn(*inputs))
    assert result["status"] == "mismatch" and "call" not in result


def test_missing_peer_says_not_installed():
    bench = suite.by_name(["chain"])[0]
    absent = Runner("absent", "no_such_module_for_jitlab_tests", lambda b, a: None)
    assert cli._prepare(absent, bench, bench.inputs(quick=True), None) == {"status": "not installed"}


def test_suite_functions_match_their_definitions():
    x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(suite.softmax(x), e / e.sum(axis=1, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(suite.chain(x, x), np.maximum((x * x + x - 0.5 * x) ** 2, 0))
    ln = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(suite.layernorm(x, np.ones(4, np.float32), np.zeros(4, np.float32)), ln, rtol=1e-5)


def test_bad_arguments_are_rejected():
    with pytest.raises(SystemExit):
        cli.parse_args(["--peers", "nosuchpeer"])
    with pytest.raises(ValueError, match="unknown benchmark"):
        suite.by_name(["nosuchbench"])


def test_mlp_train_step_is_sgd_on_the_autodiff_gradient():
    import jitlab as jl

    bench = suite.by_name(["mlp_train"])[0]
    x, target, *weights = (a.astype(np.float64) for a in bench.inputs(quick=True))

    def loss(w1, b1, w2, b2):
        return np.mean((suite.mlp(x, w1, b1, w2, b2) - target) ** 2)

    grads = jl.grad(loss, argnums=(0, 1, 2, 3))(*weights)
    for new, w, g in zip(suite.mlp_train(x, target, *weights), weights, grads):
        np.testing.assert_allclose(new, w - 0.01 * g, rtol=1e-9, atol=1e-12)


def test_device_targets_bound_by_the_device_peak_not_the_host(monkeypatch):
    class Device:
        device = "cuda"

        def __init__(self, peak):
            self.peak = peak

        def peak_bandwidth(self):
            return self.peak

    host = {"1 thread": 2e10, "2 threads": 3e10}
    assert cli._bound_bandwidth("cpu", host) == (3e10, "host")
    monkeypatch.setattr("jitlab.backends.base.backend_for_target", lambda target: Device(3e12))
    assert cli._bound_bandwidth("cuda", host) == (3e12, "device")
    monkeypatch.setattr("jitlab.backends.base.backend_for_target", lambda target: Device(None))
    assert cli._bound_bandwidth("cuda", host) == (None, "device")
    bench = suite.by_name(["chain"])[0]
    result = cli.run_benchmark(bench, [PEERS["numpy"]], type("Args", (), {"quick": True, "repeats": 1, "starts": False})(), None)
    assert result["lower_bound_ms"] is None


def test_imperative_benchmarks_run_on_numba_and_are_na_on_functional_peers():
    heat, chain = suite.by_name(["heat", "chain"])
    inputs = heat.inputs(quick=True)
    result = cli._prepare(PEERS["numba"], heat, inputs, heat.fn(*inputs))
    assert result["status"] == "ok", result
    assert cli._prepare(PEERS["numba"], chain, chain.inputs(quick=True), None)["status"] == "n/a"
    for peer in ("torch.compile", "jax.jit"):
        assert cli._prepare(PEERS[peer], heat, inputs, None)["status"] in ("n/a", "not installed")


def test_imperative_benchmarks_match_their_loop_free_forms():
    u = np.random.default_rng(0).standard_normal((6, 7)).astype(np.float32)
    expected = u.copy()
    for _ in range(suite.HEAT_STEPS):
        expected[1:-1, 1:-1] = expected[1:-1, 1:-1] + suite.HEAT_K * (
            np.roll(expected, 1, 0) + np.roll(expected, -1, 0) + np.roll(expected, 1, 1) + np.roll(expected, -1, 1)
            - 4 * expected)[1:-1, 1:-1]
    np.testing.assert_allclose(suite.heat(u), expected, rtol=1e-5, atol=1e-6)
    x, w = suite.by_name(["conv_loop"])[0].inputs(quick=True)
    windows = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(1, 2))   # c, i, j, kh, kw
    np.testing.assert_allclose(suite.conv_loop(x, w), np.einsum("cijab,ocab->oij", windows, w), rtol=1e-4, atol=1e-4)


@pytest.mark.slow       # two new processes compiling cold: tests/backends/test_warm.py checks the cache they share
def test_starts_in_new_processes_warm_from_the_cold_starts_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("JITLAB_EXECUTABLE_CACHE", "1")
    path = tmp_path / "out.json"
    assert cli.main(["--quick", "--only", "tiny_500", "--peers", "numpy", "--level", "O1", "--starts", "on",
                     "--json", str(path)]) == 0
    (bench,) = json.loads(path.read_text())["benchmarks"]
    result = bench["results"]["jitlab O1"]
    assert result["cold_start"]["hit"] is False and result["warm_start"]["hit"] is True
    for start in (result["cold_start"], result["warm_start"]):
        assert 0 < start["compile_s"] <= start["start_s"] and start["import_s"] > 0
    assert "| tiny_500 | jitlab O1 |" in cli.format_starts([bench])[-1]
    cold, warm = result["cold_start"]["breakdown"], result["warm_start"]["breakdown"]
    assert cold["llvm"] > 0 and warm["llvm"] == 0 and warm["passes"] < cold["passes"]
    assert cli.format_breakdowns([bench])[-1].startswith("tiny_500 / jitlab O1: ")


def test_memory_bound_rows_give_each_runner_against_the_bound(quick_run):
    _, data = quick_run
    text = cli.format_report(data).split("time / streaming lower bound")[1].split("\n\n")[0]
    for b in data["benchmarks"]:
        ok = {n: r for n, r in b["results"].items() if r["status"] == "ok"}
        if b["lower_bound_ms"] is None:
            assert all("vs_bound" not in r for r in ok.values()) and f"| {b['name']} |" not in text
            continue
        for r in ok.values():
            assert r["vs_bound"] == pytest.approx(r["ms"] / b["lower_bound_ms"])
        row = next(line for line in text.splitlines() if line.startswith(f"| {b['name']} | {b['lower_bound_ms']:.3f} |"))
        assert f" {ok['jitlab O1']['vs_bound']:.2f}x |" in row and f" {ok['numpy']['vs_bound']:.2f}x |" in row


def test_transformer_block_is_the_zoo_block_on_the_same_weights():
    from jitlab.bench import models

    bench = suite.by_name(["transformer"])[0]
    x, g1, b1_, wqkv, bqkv, wo, bo, g2, b2_, w1, b1, w2, b2 = bench.inputs(quick=True)
    s, d = x.shape
    h = suite.TRANSFORMER_HEADS
    qkv = models.layer_norm(x, g1, b1_) @ wqkv + bqkv
    q, k, v = (qkv[:, i * d:(i + 1) * d].reshape(s, h, d // h).transpose(1, 0, 2) for i in range(3))
    attn = models.softmax_rows(q @ k.transpose(0, 2, 1) / np.sqrt(d // h)) @ v
    y = x + attn.transpose(1, 0, 2).reshape(s, d) @ wo + bo
    y = y + models.gelu_tanh(models.layer_norm(y, g2, b2_) @ w1 + b1) @ w2 + b2
    np.testing.assert_allclose(bench.fn(x, g1, b1_, wqkv, bqkv, wo, bo, g2, b2_, w1, b1, w2, b2), y,
                               rtol=1e-4, atol=1e-4)


@pytest.mark.slow      # it keeps a core busy beside the other tests
def test_loaded_rows_time_the_product_programs_quiet_and_beside_a_busy_process(tmp_path):
    from jitlab.bench import loaded

    _, data = quick(tmp_path, "loaded")
    rows = data["loaded"]["rows"]
    assert [r["name"] for r in rows] == list(loaded.PROGRAMS)
    for row in rows:
        for name in ("numpy", "jitlab O1", "jitlab O2"):      # checked against numpy before timing
            result = row["results"][name]
            assert result["status"] == "ok" and result["quiet"] > 0 and result["loaded"] > 0, (row["name"], name)
    text = "\n".join(loaded.format_loaded(data["loaded"]))
    assert "| mlp |" in text and "| mlp_train |" in text and "beside a CPU-bound process" in text


def test_busy_core_spins_while_inside_and_stops_after():
    import os

    from jitlab.bench.loaded import busy_core

    with busy_core() as pid:
        with open(f"/proc/{pid}/stat") as f:
            ticks = sum(int(v) for v in f.read().rsplit(")", 1)[1].split()[11:13])     # utime + stime
        assert ticks > 0
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)

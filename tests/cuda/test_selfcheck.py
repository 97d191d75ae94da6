"""The device self-check's machinery, without a device: a hanging test module is killed with SIGKILL and
the test it was running is named; the summary reads what the runs left; the PTX barrier comparison."""

import json
import os
import textwrap
import time
from pathlib import Path

import pytest

from jitlab.backends.numba_cuda.device import simulator_enabled
from jitlab.bench import cuda_ptx, cuda_selfcheck, guarded, selfcheck_summary

ROOT = Path(__file__).parent.parent.parent

HANGING = """
import signal
import time


def test_passes():
    pass


def test_fails():
    assert 1 == 2


def test_sleeps_forever():
    signal.signal(signal.SIGINT, signal.SIG_IGN)        # as a process waiting on a hung kernel does
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        time.sleep(1)


def test_never_reached():
    pass
"""

FINE = """
import pytest


def test_one():
    pass


@pytest.mark.skip(reason="shown as skipped")
def test_two():
    pass
"""


@pytest.fixture
def fake_tests(tmp_path):
    (tmp_path / "test_hangs.py").write_text(HANGING)
    (tmp_path / "test_fine.py").write_text(FINE)
    return tmp_path


def test_a_hanging_module_is_killed_and_its_test_named(fake_tests):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.monotonic()
    # the fake modules import only pytest: 12 s is ample for their two quick tests on a loaded machine
    limit = 12
    runs = guarded.run_modules([fake_tests / "test_hangs.py", fake_tests / "test_fine.py"], limit=limit,
                               deadline=start + 120, out_dir=fake_tests / "logs", env=env, cwd=fake_tests, jobs=2)
    hangs, fine = (r.as_dict() for r in runs)
    assert hangs["finished"]["killed"] and hangs["finished"]["returncode"] == -9        # SIGKILL
    assert not hangs["out_of_time"]                 # its own limit, well before the deadline
    assert hangs["hung"] == "test_hangs.py::test_sleeps_forever"
    assert hangs["outcomes"] == {"test_hangs.py::test_passes": "passed", "test_hangs.py::test_fails": "failed"}
    assert not fine["finished"]["killed"] and fine["finished"]["returncode"] == 0 and fine["hung"] is None
    assert (fine["passed"], fine["skipped"]) == (1, 1)
    assert time.monotonic() - start < limit + guarded.REAP_SECONDS + 60
    data = {"seconds": 1.0, "logs": "logs", "tests": [hangs, fine], "rows": [], "measured": {"status": "not run"}}
    text = selfcheck_summary.summary_markdown(data)
    assert "2 passed, 1 failed, 1 hung, 1 skipped" in text
    assert "KILLED at its limit while running `test_hangs.py::test_sleeps_forever`" in text
    assert "- `test_hangs.py::test_fails`: failed" in text
    assert selfcheck_summary.verdict(data) == 1


def test_a_module_past_the_deadline_is_killed_before_its_first_test(fake_tests):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    [run] = guarded.run_modules([fake_tests / "test_fine.py"], limit=60, deadline=time.monotonic() - 1,
                                out_dir=fake_tests / "logs", env=env, cwd=fake_tests)
    assert run.finished.killed and run.out_of_time and run.hung is None and run.outcomes == {}
    data = {"seconds": 1.0, "logs": "logs", "tests": [run.as_dict()], "rows": [], "measured": {"status": "not run"}}
    text = selfcheck_summary.summary_markdown(data)
    assert "0 hung, 0 skipped, 1 module(s) unfinished" in text and "stopped at the end of the tests' time" in text


def test_progress_file_survives_a_half_written_line(tmp_path):
    path = tmp_path / "p"
    path.write_text('{"start": "a"}\n{"end": "a", "outcome": "passed", "seconds": 0.1}\n{"start": "b"}\n'
                    '{"end": "b", "outcome": "passed"}\n{"end": "b", "outcome": "error"}\n{"start": "c"}\n{"end": "c", "ou')
    assert guarded.read_progress(path) == ({"a": "passed", "b": "error"}, "c")


def _row(tmp_path, jax_ms, o2_ms, code=0):
    bench = {"name": "softmax", "bytes_moved": 32 << 20, "lower_bound_ms": 0.007,
             "results": {"jax.jit": {"status": "ok", "ms": jax_ms}, "jitlab O2": {"status": "ok", "ms": o2_ms},
                         "jitlab O1": {"status": "mismatch", "error": "differs from numpy (max abs diff 1)"}}}
    path = tmp_path / "row.json"
    path.write_text(json.dumps({"benchmarks": [bench], "call_overhead_us": {"O2": 200.0}}))
    return cuda_selfcheck.read_row("softmax", path, guarded.Finished(code, False, 3.0))


def test_summary_gives_each_row_its_ratio_to_jax_and_to_the_bound(tmp_path):
    row = _row(tmp_path, 0.132, 0.264, code=1)
    measured = {"status": "ok", "device": "GPU", "sm_count": 132, "peak_bytes_per_s": 4.8e12,
                "copy_bytes_per_s": 4.0e12, "cached_call_us": {"jitlab O2": {"numpy arrays": 245.0,
                                                                             "device arrays": 125.0}}}
    data = {"seconds": 9.0, "logs": "logs", "tests": [], "rows": [row], "measured": measured}
    text = selfcheck_summary.summary_markdown(data)
    bound_ms = (32 << 20) / 4.0e12 * 1e3
    line = next(x for x in text.splitlines() if x.startswith("| softmax"))
    assert f"| 2.00 | {bound_ms:.4f} | {0.264 / bound_ms:.1f} | a jitlab result was wrong |" in line
    assert "| jitlab O2 | 245.0 | 125.0 |" in text and "4,000 GB/s" in text
    assert "softmax / jitlab O1: mismatch: differs from numpy" in text
    assert json.loads(text.split("```json")[1].split("```")[0]) == json.loads(json.dumps(data))
    assert selfcheck_summary.verdict(data) == 1
    data["rows"] = [_row(tmp_path, 0.132, 0.1)]
    assert selfcheck_summary.verdict(data) == 0


def test_a_killed_bench_row_says_so(tmp_path):
    row = cuda_selfcheck.read_row("mlp", tmp_path / "none.json", guarded.Finished(-9, True, 75.0))
    assert row == {"name": "mlp", "status": "killed after 75 s"}


def test_the_device_environment_drops_the_simulator_and_pins_jax_precision(monkeypatch):
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")
    monkeypatch.setenv("PYTHONPATH", "/carried/wheels")
    env = cuda_selfcheck.device_env()
    assert "NUMBA_ENABLE_CUDASIM" not in env and env["JITLAB_TEST_GPU"] == "1"
    assert env["JAX_DEFAULT_MATMUL_PRECISION"] == "highest"
    assert env["PYTHONPATH"].split(os.pathsep) == [str(cuda_selfcheck.ROOT), "/carried/wheels"]
    modules = [p.name for p in cuda_selfcheck.cuda_test_modules(None)]
    assert "test_kernels.py" in modules and "test_simulator_suite.py" not in modules


@pytest.mark.skipif(not simulator_enabled(), reason="on a GPU main() would run the whole selfcheck, this module too")
def test_the_selfcheck_refuses_the_simulator(capsys):
    assert cuda_selfcheck.main(["--budget", "1"]) == 2
    assert "needs a real GPU" in capsys.readouterr().out


PTX_ROWS = textwrap.dedent("""
    {
    \tbar.sync \t0;
    \t@%p1 bra \t$L__BB0_2;
    \tbar.sync \t0;
    \tbar.red.or.pred \t%p2, 0, %p1;
    }
""")


def test_ptx_barrier_counts_catch_a_duplicated_barrier():
    assert cuda_ptx.barriers_match(PTX_ROWS, 3, 0) == (True, 3)
    assert cuda_ptx.barriers_match(PTX_ROWS, 2, 0) == (False, 3)        # one more than the source: duplicated
    assert cuda_ptx.barriers_match(PTX_ROWS, 1, 1) == (True, 3)         # an inner loop unrolled twice
    assert cuda_ptx.barriers_match(PTX_ROWS, 0, 2) == (False, 3)        # no whole number of copies


def test_source_barrier_counts_follow_the_device_functions():
    from jitlab.backends.numba_cuda import barriers

    source = ("from numba import cuda\n\n@cuda.jit\ndef k0(a, n):\n"
              "    for i in range(cuda.blockIdx.x, n, cuda.gridDim.x):\n        v = _block_sum(a[i], a, 0)\n"
              "        for k in range(n):\n            cuda.syncthreads()\n            v = _block_any(v, a, 0)\n")
    assert barriers.block_barriers(barriers.kernels(source)[0]) == (3, 4)


def test_a_row_reads_what_the_bench_cli_writes(tmp_path):
    # the CLI's own JSON (a quick cpu run of one row) is what read_row reads on the GPU
    import subprocess
    import sys

    path = tmp_path / "chain.json"
    command = [sys.executable, "-m", "jitlab.bench", "--target", "cpu", "--peers", "numpy", "--only", "chain",
               "--quick", "--repeats", "1", "--level", "O1", "--starts", "off", "--json", str(path)]
    # the caller's path after the checkout: a GPU machine's carried packages live there
    path_var = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    done = subprocess.run(command, cwd=ROOT, env={**os.environ, "PYTHONPATH": path_var}, capture_output=True,
                          text=True, timeout=600)
    row = cuda_selfcheck.read_row("chain", path, guarded.Finished(done.returncode, False, 1.0))
    assert row["status"] == "ok", done.stdout[-3000:] + done.stderr[-3000:]
    assert row["memory_bound"] and row["bytes_moved"] > 0
    assert row["results"]["jitlab O1"]["status"] == "ok" and row["results"]["jitlab O1"]["ms"] > 0
    assert set(row["results"]) == {"numpy", "jitlab O1"}


def test_the_device_measurements_run():
    from jitlab.bench.cuda_measure import measure

    data = measure(repeats=2, copy_bytes=1 << 12, loop_points=8, loop_steps=3)
    assert set(data["cached_call_us"]) >= {"jitlab O1", "jitlab O2"}
    assert set(data["cached_call_us"]["jitlab O2"]) == {"numpy arrays", "device arrays", "device arrays, synchronized"}
    assert all(us > 0 for calls in data["cached_call_us"].values() for us in calls.values())
    loops = data["loops"]
    assert loops["matches"] and set(loops["jitlab O2"]) == {"fori_loop heat", "while_loop"}
    assert all(us > 0 for level in ("jitlab O1", "jitlab O2") for us in loops[level].values())
    text = selfcheck_summary.summary_markdown({"seconds": 1.0, "logs": "logs", "tests": [], "rows": [],
                                               "measured": {**data, "status": "ok"}})
    assert "## Loops run from the host (8 float32 values, 3 iterations" in text and "| jitlab O1 |" in text
    profiles = data["host_profiles"]
    assert set(profiles) == {"x + 1, device arrays", "heat fori_loop, 3 iterations"}
    assert all(rows and rows[0]["own_us"] >= rows[-1]["own_us"] > 0 for rows in profiles.values())
    assert "## Host time of one call: x + 1, device arrays" in text

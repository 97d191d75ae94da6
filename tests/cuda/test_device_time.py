"""The bench's device figures: the executor's event timing (plumbing only under the simulator, whose
events measure nothing), device time beside wall time in `jitlab bench` rows and its table, the
measured copy bandwidth as the streaming bound, and jax.jit compared at full matmul precision."""

import importlib.util
from types import SimpleNamespace

import numpy as np
import pytest

import jitlab as jl
from jitlab.backends.numba_cuda import device
from jitlab.bench import cli, suite
from jitlab.bench.peers import PEERS, Prepared, Runner


def test_device_times_gives_one_figure_per_call_and_stops_timing_after():
    exe = jl.compile(jl.trace(lambda x: np.tanh(x) * 2, np.ones(8, np.float32)), level="O2", target="cuda",
                     progress=False, device_outputs=True)
    x = device.cuda().to_device(np.ones(8, np.float32))
    calls = []
    times = exe._runner.device_times(lambda: calls.append(exe(x)), 3)
    assert len(times) == 3 == len(calls) and exe._runner.clock is None
    np.testing.assert_allclose(calls[-1][0].copy_to_host(), np.tanh(np.ones(8, np.float32)) * 2, rtol=1e-6)


@pytest.mark.simulator
def test_the_simulator_has_no_copy_bandwidth_to_bound_with():
    assert jl.backends.base.backend_for_target("cuda").copy_bandwidth() is None
    host = {"1 thread": 2e10}
    assert cli._bound_bandwidth("cuda", host) == (None, "device")      # the simulator's peak is 0: no bounds


def test_a_measured_device_copy_bandwidth_is_the_bound(monkeypatch):
    backend = SimpleNamespace(device="cuda", copy_bandwidth=lambda: 4.2e12, peak_bandwidth=lambda: 4.8e12)
    monkeypatch.setattr("jitlab.backends.base.backend_for_target", lambda target: backend)
    assert cli._bound_bandwidth("cuda", {"1 thread": 2e10}) == (4.2e12, "device copy")
    data = {"bound_bandwidth_bytes_per_s": 4.2e12, "bound_source": "device copy",
            "device_peak_bandwidth_bytes_per_s": 4.8e12}
    assert cli._device_bound(data) == "the device's measured copy bandwidth, 4200 GB/s (peak 4800 GB/s)"


def test_rows_carry_device_time_beside_wall_time():
    bench = suite.by_name(["chain"])[0]
    device_runner = Runner("device", None, lambda b, inputs: Prepared(lambda: b.fn(*inputs), np.asarray, {},
                                                                     lambda n: [0.5, 0.25, 1.0][:n]))
    args = SimpleNamespace(quick=True, repeats=3, starts=False)
    row = cli.run_benchmark(bench, [PEERS["numpy"], device_runner], args, 1e12)
    result = row["results"]["device"]
    assert result["device_ms"] == 0.5 and result["device_vs_bound"] == 0.5 / row["lower_bound_ms"]
    assert "device_ms" not in row["results"]["numpy"] and "device_times" not in result
    table = "\n".join(cli.format_device_times([row]))
    assert f"| chain | device | {result['ms']:.3f} | 0.500 | {result['ms'] - 0.5:.3f} | " in table


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is not installed")
def test_jax_is_compared_at_full_matmul_precision():
    import jax

    bench = suite.by_name(["mlp"])[0]
    prepared = PEERS["jax.jit"].prepare(bench, bench.inputs(quick=True))
    assert prepared.info["matmul_precision"] == "highest"
    assert jax.config.jax_default_matmul_precision == "highest"

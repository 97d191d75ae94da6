"""The bench programs end to end on cuda at small sizes, equal to O0; the bench entry point runs."""

import pytest

from jitlab.backends.numba_cuda import device
from jitlab.bench import cuda as bench
from tests.cuda.helpers import check

# Without -m slow: a training step and a row-wise program at O2; the rest with it (their kernels' kinds
# are in tests/cuda/test_kernels.py and test_random.py; O1's kernels are O2's, launched one by one). The
# main run runs this module under -m slow only (tests/cuda/test_simulator_suite.py).
DEFAULT = ("mlp_train", "softmax")
CASES = [(p, "O2") if p.name in DEFAULT else pytest.param(p, "O2", marks=pytest.mark.slow)
         for p in bench.suite("small")] + [
    pytest.param(p, "O1", marks=pytest.mark.slow) for p in bench.suite("small") if p.name in ("chain", "mlp")]


@pytest.mark.parametrize("program,level", CASES, ids=lambda c: getattr(c, "name", c))
def test_bench_program_matches_o0(program, level):
    # a small grid: the simulator runs every thread of every block as a Python thread
    exe = check(program.fn, *program.args, level=level, rtol=1e-4, atol=1e-4, threads_per_block=32, max_blocks=2)
    assert exe.report.stats["device_host_ops"] == 0


def test_bench_cuda_reports_what_it_measured():
    [chain, mlp] = bench.bench_cuda([p for p in bench.suite("small") if p.name in ("chain", "mlp")],
                                    repeats=1, peers=False)
    assert chain.matches_o0 and chain.memory_bound and chain.bytes_moved == 3 * 96 * 4
    assert mlp.matches_o0 and not mlp.memory_bound
    if device.info().simulator:
        assert chain.gb_per_s is None        # the simulator has no bandwidth to speak of
    else:
        assert chain.gb_per_s > 0 and 0 < chain.fraction_of_peak < 1
    assert "= O0" in bench.report([chain, mlp])


@pytest.mark.slow        # compiles tiny_500 again: test_bench_cuda_reports_what_it_measured runs what main calls
def test_bench_main_runs_the_chosen_programs(capsys):
    assert bench.main(["--scale", "small", "--repeats", "1", "--no-peers", "--only", "tiny_500"]) == 0
    out = capsys.readouterr().out
    assert "tiny_500" in out and "memory-bound" in out and "mlp" not in out

"""Runs the CUDA test modules under numba's simulator, a few modules to each pytest process of its own
(a process costs seconds to start; four spread the modules over xdist's workers)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cuda.conftest import MAIN_RUN_ONLY

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
# test_gpu.py is all real-hardware tests: under the simulator it would only skip.
MODULES = sorted(p.name for p in HERE.glob("test_*.py") if p.name not in MAIN_RUN_ONLY + ["test_gpu.py"])
# The default run: the generated kernels, the runtime, random programs against O0, control flow, CUDA
# graphs and the barrier check, in two processes. Under -m slow: contractions, streams, complex
# numbers, the library calls, device timing, the bench programs and training steps, and the
# self-check's own tests (its tools, which a GPU session runs; a hang test waits out its 12 s limit).
DEFAULT_MODULES = ["test_kernels.py", "test_runtime.py", "test_random.py", "test_control_flow.py", "test_graph.py",
                   "test_barriers.py"]
# the heaviest modules first, so that dealing the modules out in turn gives each process one of them
HEAVY = ["test_kernels.py", "test_contractions.py", "test_bench.py", "test_control_flow.py"]


def chunks(modules: list[str], n: int) -> list[list[str]]:
    order = [m for m in HEAVY if m in modules] + [m for m in modules if m not in HEAVY]
    return [order[k::n] for k in range(n)]


def chunk_id(modules: list[str]) -> str:
    return "+".join(m[5:-3] for m in modules)


@pytest.mark.parametrize("modules", chunks(DEFAULT_MODULES, 2), ids=chunk_id)
def test_modules_under_the_simulator(modules, tmp_path):
    run_under_the_simulator(modules, tmp_path, "not slow")


@pytest.mark.slow
@pytest.mark.parametrize("modules", chunks([m for m in MODULES if m not in DEFAULT_MODULES], 2), ids=chunk_id)
def test_the_other_modules_under_the_simulator(modules, tmp_path):
    run_under_the_simulator(modules, tmp_path, "not slow")


@pytest.mark.slow
@pytest.mark.parametrize("modules", chunks(MODULES, 4), ids=chunk_id)
def test_slow_tests_of_the_modules_under_the_simulator(modules, tmp_path):
    run_under_the_simulator(modules, tmp_path, "slow")


def run_under_the_simulator(modules: list[str], tmp_path, marks: str) -> None:
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "PYTHONPATH": str(ROOT), "JITLAB_CACHE_DIR": str(tmp_path)}
    env.pop("JITLAB_TEST_GPU", None)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore::RuntimeWarning",
               "-m", marks, *(str(HERE / m) for m in modules)]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    # pytest's exit 5 is "no test selected": a chunk may have no slow test
    if done.returncode not in ((0, 5) if marks == "slow" else (0,)):
        pytest.fail(f"{', '.join(modules)} under the simulator (exit {done.returncode}):\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}",
                    pytrace=False)

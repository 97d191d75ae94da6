"""Runs each CUDA test module in its own pytest process under numba's simulator."""

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


@pytest.mark.parametrize("module", MODULES)
def test_module_under_the_simulator(module, tmp_path):
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "PYTHONPATH": str(ROOT), "JITLAB_CACHE_DIR": str(tmp_path)}
    env.pop("JITLAB_TEST_GPU", None)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore::RuntimeWarning",
               str(HERE / module)]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        pytest.fail(f"{module} under the simulator (exit {done.returncode}):\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}",
                    pytrace=False)

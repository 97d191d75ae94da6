"""The CUDA tests run under numba's simulator (NUMBA_ENABLE_CUDASIM=1) or on a real GPU (JITLAB_TEST_GPU=1).

numba.cuda reads the simulator switch once, when it is first imported, and target="auto"
follows it; so these tests run in pytest processes of their own. The main run collects
only the two modules written for it: test_without_gpu.py, and test_simulator_suite.py,
which starts one simulator process per test module.
"""

import os
from pathlib import Path

import pytest

SIMULATOR = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")
REAL_GPU = os.environ.get("JITLAB_TEST_GPU") == "1"
MAIN_RUN_ONLY = ["test_simulator_suite.py", "test_without_gpu.py"]
if SIMULATOR or REAL_GPU:
    collect_ignore = MAIN_RUN_ONLY
else:
    collect_ignore = [p.name for p in Path(__file__).parent.glob("test_*.py") if p.name not in MAIN_RUN_ONLY]


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("JITLAB_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "kernels"))


def pytest_collection_modifyitems(config, items):
    if REAL_GPU and not SIMULATOR:
        return
    skip = pytest.mark.skip(reason="needs a real NVIDIA GPU (run with JITLAB_TEST_GPU=1 on one)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)

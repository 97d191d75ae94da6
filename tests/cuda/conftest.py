"""The CUDA tests run under numba's simulator (NUMBA_ENABLE_CUDASIM=1) or on a real GPU (JITLAB_TEST_GPU=1).

numba.cuda reads the simulator switch once, when it is first imported, and target="auto"
follows it; so these tests run in a pytest process of their own (tests/test_cuda_suite.py
starts one per module) and the main run does not collect them.
"""

import os

import pytest

SIMULATOR = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")
REAL_GPU = os.environ.get("JITLAB_TEST_GPU") == "1"
collect_ignore_glob = [] if SIMULATOR or REAL_GPU else ["test_*.py"]


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

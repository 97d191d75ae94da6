"""The CUDA tests run under numba's simulator (NUMBA_ENABLE_CUDASIM=1) or on a real GPU (JITLAB_TEST_GPU=1).

numba.cuda reads the simulator switch once, when it is first imported, and target="auto"
follows it; so these tests run in pytest processes of their own. The main run collects
only the two modules written for it: test_without_gpu.py, and test_simulator_suite.py,
which starts one simulator process per test module. A run that names only CUDA test
modules (`pytest tests/cuda/test_kernels.py`) on a machine without an NVIDIA driver
switches the simulator on itself, before numba.cuda is imported.
"""

import os
import sys
from pathlib import Path

import pytest

from jitlab.backends.numba_cuda.device import DRIVER_FILES, SIMULATOR_VAR, simulator_enabled

HERE = Path(__file__).parent
SIMULATOR = simulator_enabled()
REAL_GPU = os.environ.get("JITLAB_TEST_GPU") == "1"
MAIN_RUN_ONLY = ["test_simulator_suite.py", "test_without_gpu.py"]


def _ignored() -> list[str]:
    if SIMULATOR or REAL_GPU:
        return MAIN_RUN_ONLY
    return [p.name for p in HERE.glob("test_*.py") if p.name not in MAIN_RUN_ONLY]


collect_ignore = _ignored()


def _only_simulator_modules(args: list[str], root: Path) -> bool:
    """Whether every command-line path is a CUDA test module written for the simulator."""
    paths = [(root / a.split("::")[0]).resolve() for a in args]
    return bool(paths) and all(p.parent == HERE and p.name.startswith("test_") and p.name not in MAIN_RUN_ONLY
                               for p in paths)


def pytest_configure(config):
    global SIMULATOR, collect_ignore
    if SIMULATOR or REAL_GPU or any(os.path.exists(p) for p in DRIVER_FILES) or "numba.cuda" in sys.modules:
        return
    if not _only_simulator_modules(config.args, Path(config.invocation_params.dir)):
        return
    from numba.core import config as numba_config

    os.environ[SIMULATOR_VAR] = "1"
    numba_config.reload_config()
    SIMULATOR = True
    collect_ignore = _ignored()


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("JITLAB_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "kernels"))


def pytest_collection_modifyitems(config, items):
    if REAL_GPU and not SIMULATOR:
        on_gpu = pytest.mark.skip(reason="checks the simulator's behaviour; a real GPU behaves otherwise")
        for item in items:
            if "simulator" in item.keywords:
                item.add_marker(on_gpu)
        return
    skip = pytest.mark.skip(reason="needs a real NVIDIA GPU (run with JITLAB_TEST_GPU=1 on one)")
    # Named beside other tests, a simulator module cannot switch the simulator on for the whole run.
    no_device = not SIMULATOR and not any(os.path.exists(p) for p in DRIVER_FILES)
    unsimulated = pytest.mark.skip(reason=f"runs under numba's CUDA simulator: {SIMULATOR_VAR}=1 python -m pytest "
                                          "tests/cuda/<module> (the main run does it in test_simulator_suite.py)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
        elif no_device and item.path.parent == HERE and item.path.name not in MAIN_RUN_ONLY:
            item.add_marker(unsimulated)


@pytest.fixture
def generated_contractions(monkeypatch):
    """Contractions run as jitlab's generated kernels even where cuBLAS is there (a GPU with CuPy):
    for the tests of those kernels."""
    from jitlab.backends.numba_cuda import library

    monkeypatch.setattr(library, "probe", lambda: library.Libraries(cublas="the test asks for generated kernels"))

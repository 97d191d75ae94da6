"""The tutorial notebooks run top to bottom without errors."""

import json
import pathlib

import pytest

NOTEBOOKS = sorted((pathlib.Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))
# Under -m slow: the notebooks that take 10-35 s each quiet and up to five times that on a loaded
# machine (a notebook's kernel is a process of its own, started cold). What they show is tested by
# faster tests: marking, fusion and the explorer's data (tests/passes, tests/explore), schedules and
# memory plans (tests/memory), the cuda backend under the simulator (tests/cuda), ONNX models
# (tests/onnx) and training (tests/autodiff). The quickstart, the IR tour, the backend plugin and
# imperative numpy run by default; the quickstart runs in JupyterLab by default
# (tests/browser/test_explorer_browser.py, which fails on a cell's traceback) and here under -m slow.
SLOW = {"01_quickstart.ipynb", "03_marking_and_fusion.ipynb", "04_schedules_and_memory.ipynb", "05_gpu.ipynb", "06_onnx_models.ipynb",
        "08_training.ipynb"}


@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.slow) if p.name in SLOW else p for p in NOTEBOOKS],
                         ids=lambda p: p.name)
def test_notebook_runs(path):
    # imported here, not at collection: nbformat imports jsonschema, whose import builds a URI
    # grammar (3 s) that every xdist worker would pay before its first test
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    # Generous limits: CI runs these beside other tests on a loaded 2-core machine, where a kernel's
    # start and a cell's first compile take several times what they take on a quiet one.
    NotebookClient(nb, timeout=900, startup_timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebooks_are_committed_without_outputs(path):
    cells = json.loads(path.read_text())["cells"]
    assert all(not c.get("outputs") for c in cells if c["cell_type"] == "code"), "commit notebooks without outputs"

"""The explorer on a cuda run (issue 30, item 5), under numba's simulator: a profiled program on two
streams shows its measured kernels per stream in the Schedule view and each step's device time and
achieved bandwidth on the roofline in the Kernels view."""

import os
import subprocess
import sys

import pytest

from jitlab.explore.html import read_state

# under -m slow (tests/browser/conftest.py says what the default run keeps)
pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = """
import sys
import numpy as np, jitlab as jl
from tests.cuda.test_streams import two_branches
rng = np.random.default_rng(0)
args = [rng.standard_normal(s).astype(np.float32) for s in [(4, 5), (5, 3), (3, 6)]]
# a small grid: the simulator runs every thread of a block as a Python thread
exe = jl.compile(jl.trace(two_branches, *args), level="O1", target="cuda", streams=2, progress=False,
                 threads_per_block=32, max_blocks=2)
assert exe.report.streams.streams == 2
np.testing.assert_allclose(exe(*args)[0], two_branches(*args), rtol=1e-4, atol=1e-5)
jl.profile(exe, *args, repeats=2)
jl.explore(exe).save(sys.argv[1])
"""


@pytest.fixture(scope="module")
def gpu_page(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gpu")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", JITLAB_CACHE_DIR=str(folder / "cache"),
               PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    page = folder / "gpu.html"
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(page)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return page


def test_a_cuda_run_shows_its_timeline_per_stream_and_each_kernel_s_device_time_and_bandwidth(page, gpu_page, artifacts):
    data = read_state(gpu_page.read_text())["data"]
    steps = data["profile"]["steps"]
    assert data["profile"]["mode"] == "events" and all(s["median"] > 0 for s in steps)
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(gpu_page.as_uri())
    root = page.locator(".jl-explorer")
    root.locator("[data-tab=schedule]").click()
    lanes = root.locator(".jl-pane-schedule svg.jl-kerneltime")
    lanes.wait_for()
    assert lanes.locator("rect.jl-kstep").count() == len(steps)
    streams = {s["stream"] for s in steps}
    assert streams == {0, 1}              # the two branches ran on two streams (O1: an O2 arena plan runs on one), each timed on its own
    assert lanes.locator("text.jl-axis").all_text_contents()[:len(streams)] == [f"s{k}" for k in range(max(streams) + 1)]
    root.locator(".jl-pane-schedule").screenshot(path=str(artifacts / "gpu_schedule.png"))
    root.locator("[data-tab=kernels]").click()
    table = root.locator(".jl-pane-kernels .jl-rf-table")
    table.wait_for()
    rf = data["roofline"]
    assert "simulator" in rf["bounds"]["device"] and rf["target"] == "cuda"
    worst = max(rf["steps"], key=lambda s: s["seconds"] - s["bound_seconds"])
    row = table.locator("tbody tr").first
    assert row.get_attribute("data-step") == str(worst["index"])
    assert "B/s" in row.locator("td").nth(6).inner_text()
    root.locator(".jl-pane-kernels .jl-roofline").screenshot(path=str(artifacts / "gpu_roofline.png"))
    assert page.errors == [] and page.console_errors == []

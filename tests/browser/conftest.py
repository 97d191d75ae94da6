"""A headless JupyterLab on 127.0.0.1 and Debian's Chromium driven by Playwright.

The default run keeps one browser check of each kind of page: the quickstart in JupyterLab, a saved
page offline and the compare page (test_explorer_browser.py), ResNet-50's and a transformer's views
(test_resnet_browser.py), graphs, memory, linking, compile times and newer data fields. Under -m slow:
the same views checked figure by figure (truth, schema, insight), a deep transformer, a cuda run.
"""

import json
import os
import pathlib
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts" / "browser"
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]


def pytest_collection_modifyitems(config, items):
    """Every browser test runs in one xdist worker (pyproject's `--dist loadgroup`), so the session's
    JupyterLab, Chromium and compiled ResNet-50 and transformer pages are made once, not once per worker."""
    here = pathlib.Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.xdist_group("browser"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_up(url: str, proc: subprocess.Popen, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"jupyter lab exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.25)
    raise TimeoutError(f"jupyter lab did not answer at {url} in {seconds} s")


def write_settings(folder: pathlib.Path) -> None:
    """Every cell kept in the page (no windowing) and no news pop-up over the notebook."""
    for name, values in {"notebook-extension/tracker": {"windowingMode": "none"},
                         "apputils-extension/notification": {"fetchNews": "false"}}.items():
        package, plugin = name.split("/")
        path = folder / "@jupyterlab" / package / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))


@pytest.fixture(scope="session")
def artifacts() -> pathlib.Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    """(base url, token, folder) of a JupyterLab serving a copy of the notebooks."""
    folder = tmp_path_factory.mktemp("lab")
    for nb in (ROOT / "notebooks").glob("*.ipynb"):
        shutil.copy(nb, folder / nb.name)
    port, token = free_port(), secrets.token_hex(16)
    settings = folder / ".settings"
    write_settings(settings)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
               JUPYTER_RUNTIME_DIR=str(folder / ".runtime"), JUPYTERLAB_WORKSPACES_DIR=str(folder / ".workspaces"),
               JUPYTERLAB_SETTINGS_DIR=str(settings))
    cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--ServerApp.token={token}",
           f"--ServerApp.port={port}", "--ServerApp.port_retries=0", "--ServerApp.ip=127.0.0.1",
           f"--ServerApp.root_dir={folder}", "--LabApp.news_url=", "--LabApp.collaborative=False",
           "--LabApp.extension_manager=readonly", "--allow-root"]
    log = (folder / "lab.log").open("w")
    proc = subprocess.Popen(cmd, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until_up(f"{base}/api/status?token={token}", proc)
        yield base, token, folder
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()


# CI runs on a loaded 2-core machine: a view can take seconds to draw there, so waits (locators'
# and expect's) allow for it rather than failing at Playwright's 5 s default.
WAIT_MS = 60_000


@pytest.fixture
def page(browser):
    from playwright.sync_api import expect

    expect.set_options(timeout=WAIT_MS)
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.errors = errors
    page.console_errors = []
    page.on("console", lambda m: page.console_errors.append(m.text) if m.type == "error" else None)
    yield page
    context.close()


@pytest.fixture(scope="session")
def resnet_pages(tmp_path_factory):
    """(explorer page, compare page, the O1 Executable) saved once per session for onnx's light ResNet-50 at O1,
    profiled (O0 beside it on the compare page)."""
    import numpy as np

    import jitlab as jl
    from jitlab.bench.onnx_models import light_model_path
    from jitlab.explore import explore

    folder = tmp_path_factory.mktemp("resnet")
    program = jl.onnx.load(light_model_path("resnet50"))
    exe = jl.compile(program, level="O1")
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    exe(x)
    jl.profile(exe, x, repeats=2)       # the time overlay, the call's time and per-group times
    page = explore(exe).save(folder / "resnet50.html")
    compare = explore.compare(exe, jl.compile(program, level="O0"), labels=["O1", "O0"]).save(folder / "compare.html")
    return page, compare, exe


@pytest.fixture(scope="session")
def transformer_page(tmp_path_factory):
    """The explorer page of a traced 12-layer transformer encoder at O1, profiled, saved once per session."""
    import jitlab as jl
    from jitlab.explore import explore
    from tests.browser.transformer import example

    fn, x = example()
    f = jl.jit(fn, level="O1")
    f(x)
    jl.profile(f, x, repeats=2)
    return explore(f).save(tmp_path_factory.mktemp("transformer") / "transformer.html")

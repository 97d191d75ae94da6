"""The README as written: its python blocks run, the IR it shows is what they print, its
set-up commands parse and name what is there, and JupyterLab starts as the first one says."""

import importlib.util
import os
import pathlib
import re
import shlex
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

import jitlab as jl
from jitlab import cli

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
TEST_COMMAND = "./scripts/bootstrap && .venv/bin/python -m pytest -n 2"


def blocks(lang: str) -> list[str]:
    return [body for tag, body in FENCE.findall(README) if tag == lang]


def test_python_blocks_run_as_written_and_print_the_ir_shown(capsys):
    """All python blocks, in order, in one namespace (as pasted into one notebook)."""
    namespace = {"__name__": "__readme__"}
    assert blocks("python")
    for k, body in enumerate(blocks("python"), 1):
        exec(compile(body, f"README.md, python block {k}", "exec"), namespace)
    printed = capsys.readouterr().out
    shown = [b for b in blocks("") if b.startswith("func @")]
    assert shown
    for ir in shown:
        assert str(jl.parse(ir)) == ir and ir in printed


def test_two_setup_commands_that_parse_and_name_what_is_there():
    commands = [b.strip() for b in blocks("sh")]
    assert len(commands) == 2 and commands[1] == TEST_COMMAND
    assert TEST_COMMAND in (ROOT / ".ci/run").read_text()
    for command in commands:
        assert subprocess.run(["sh", "-n", "-c", command]).returncode == 0, command
        for word in shlex.split(command):
            if word.startswith(".venv/bin/"):       # installed by the bootstrap, as in this environment
                assert (pathlib.Path(sys.prefix) / "bin" / word.removeprefix(".venv/bin/")).exists(), word
            elif "/" in word:
                assert (ROOT / word).exists(), word
    assert os.access(ROOT / "scripts/bootstrap", os.X_OK)


def test_paths_and_modules_the_prose_names_exist():
    paths = set(re.findall(r"(?<![\w./])((?:docs|examples|notebooks|scripts|jitlab|widgets|tests)/[\w./-]*\w)", README))
    assert paths and [p for p in paths if not (ROOT / p).exists()] == []
    modules = set(re.findall(r"python -m ([\w.]+)", README)) - {"pytest"}
    assert modules and [m for m in modules if importlib.util.find_spec(m) is None] == []


def test_the_cli_example_runs(capsys):
    command = re.search(r"`\.venv/bin/jitlab (run [^`]+)`", README).group(1)
    assert cli.main(shlex.split(command)) == 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serves(url: str, proc: subprocess.Popen, seconds: float = 180) -> bool:   # a loaded machine starts it slowly
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            urllib.request.urlopen(url, timeout=2)
            return True
        except urllib.error.HTTPError:       # 403 without the token: it is serving
            return True
        except OSError:
            time.sleep(0.25)
    return False


@pytest.mark.skipif(importlib.util.find_spec("jupyterlab") is None, reason="needs JupyterLab")
def test_the_lab_command_serves_as_root_and_headless(tmp_path):
    """The first command's JupyterLab, with the settings the bootstrap puts in .venv, on a free port."""
    config = tmp_path / "config"
    config.mkdir()
    (config / "jupyter_server_config.py").write_text((ROOT / "scripts/jupyter_server_config.py").read_text())
    assert "cp scripts/jupyter_server_config.py .venv/etc/jupyter/" in (ROOT / "scripts/bootstrap").read_text()
    lab = blocks("sh")[0].split("&&", 1)[1].strip()
    argv = [sys.executable, "-m", "jupyter"] + shlex.split(lab)[1:]
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.update(JUPYTER_CONFIG_DIR=str(config), JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"))
    log = tmp_path / "lab.log"
    with log.open("w") as out:
        proc = subprocess.Popen(argv + [f"--ServerApp.port={port}", "--ServerApp.port_retries=0"], cwd=ROOT,
                                env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            up = serves(f"http://127.0.0.1:{port}/api/status", proc)
        finally:
            proc.terminate()
            proc.wait(30)
    text = log.read_text()
    assert up, text
    assert "Running as root" not in text and "web browser" not in text

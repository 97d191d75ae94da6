"""Commands that may hang a GPU, run so that they cannot hang the caller.

Each command runs in a session of its own and is killed with SIGKILL, with every process it
started, when it outlives its limit: a process waiting in a device synchronisation ignores
SIGINT (a kernel that hung an H200 was not stopped by `timeout -s INT`). A pytest run writes
each test's start and end to a file as it goes (pytest_progress.py), so a killed run still
says which test was running.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

REAP_SECONDS = 30       # after SIGKILL: a process stuck in the driver may take a moment to go


@dataclass
class Finished:
    """How a guarded command ended."""

    returncode: int | None         # None: killed and still not reaped after REAP_SECONDS
    killed: bool                   # it outlived its limit
    seconds: float


def run_killable(command: Sequence[str], limit: float, log: Path, cwd: Path | None = None,
                 env: dict[str, str] | None = None) -> Finished:
    """Runs `command` with stdout and stderr into `log`; SIGKILLs its whole session after `limit` s."""
    start = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(list(command), cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            return Finished(proc.wait(timeout=max(limit, 0.1)), False, time.monotonic() - start)
        except subprocess.TimeoutExpired:
            _kill_session(proc.pid)
        try:
            code = proc.wait(timeout=REAP_SECONDS)
        except subprocess.TimeoutExpired:
            code = None
        return Finished(code, True, time.monotonic() - start)


def _kill_session(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:      # it ended between the timeout and the kill
        pass


@dataclass
class ModuleRun:
    """One test module's run: each test's outcome, and the test that was running if it was killed."""

    module: str
    finished: Finished
    outcomes: dict[str, str] = field(default_factory=dict)      # node id -> passed/failed/skipped/error
    hung: str | None = None            # the test running when it was killed
    out_of_time: bool = False          # killed at the run's deadline, not at its own limit: not a hang
    log_tail: str = ""

    def count(self, outcome: str) -> int:
        return sum(1 for o in self.outcomes.values() if o == outcome)

    def as_dict(self) -> dict:
        return {**asdict(self), **{k: self.count(k) for k in ("passed", "failed", "skipped", "error")}}


def read_progress(path: Path) -> tuple[dict[str, str], str | None]:
    """(outcome per test, the last test started and never ended) from a progress file."""
    outcomes: dict[str, str] = {}
    running = None
    if not path.exists():
        return outcomes, None
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:     # the half-written last line of a killed run
            continue
        if "start" in record:
            running = record["start"]
        elif "end" in record:
            if outcomes.get(record["end"]) not in ("failed", "error"):     # a teardown error after a pass
                outcomes[record["end"]] = record["outcome"]
            running = None if running == record["end"] else running
    return outcomes, running


def run_module(module: Path, limit: float, out_dir: Path, env: dict[str, str], cwd: Path,
               pytest_args: Sequence[str] = ()) -> ModuleRun:
    """One test module in its own pytest process, killed after `limit` seconds."""
    stem = module.stem
    progress, log = out_dir / f"{stem}.progress", out_dir / f"{stem}.log"
    progress.unlink(missing_ok=True)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "jitlab.bench.pytest_progress",
               "--progress-file", str(progress), "-W", "ignore::RuntimeWarning", *pytest_args, str(module)]
    finished = run_killable(command, limit, log, cwd, env)
    outcomes, running = read_progress(progress)
    tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
    return ModuleRun(str(module.relative_to(cwd)) if module.is_relative_to(cwd) else str(module), finished,
                     outcomes, running if finished.killed else None, tail)


def run_modules(modules: Sequence[Path], limit: float, deadline: float, out_dir: Path, env: dict[str, str],
                cwd: Path, jobs: int = 4, pytest_args: Sequence[str] = ()) -> list[ModuleRun]:
    """Every module under `run_module`, `jobs` at a time; none runs past `deadline` (time.monotonic())."""
    out_dir.mkdir(parents=True, exist_ok=True)

    def one(module: Path) -> ModuleRun:
        left = deadline - time.monotonic()
        run = run_module(module, min(limit, left), out_dir, env, cwd, pytest_args)
        run.out_of_time = run.finished.killed and left < limit
        return run

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, modules))

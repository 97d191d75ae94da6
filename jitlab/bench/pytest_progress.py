"""A pytest plugin that writes each test's start and outcome to a file as it happens.

`python -m pytest -p jitlab.bench.pytest_progress --progress-file PATH ...`: one JSON line
`{"start": nodeid}` before a test runs and `{"end": nodeid, "outcome": ...}` after it, each
flushed to the file at once. A process killed in a hang (SIGKILL leaves pytest no chance to
write a summary) leaves the name of the test it was running as the last start without an end.
`--no-shrink` loads a hypothesis profile without the shrink phase: on a GPU every shrinking
step compiles new kernels cold.
"""

from __future__ import annotations

import json
import os


def pytest_addoption(parser) -> None:
    group = parser.getgroup("progress")
    group.addoption("--progress-file", help="write each test's start and outcome here, one JSON line each")
    group.addoption("--no-shrink", action="store_true", help="hypothesis without the shrink phase")


def pytest_configure(config) -> None:
    path = config.getoption("progress_file")
    if path:
        config.pluginmanager.register(Progress(path), "jitlab-progress")
    if config.getoption("no_shrink"):
        from hypothesis import Phase, settings

        settings.register_profile("no-shrink", deadline=None,
                                  phases=(Phase.explicit, Phase.reuse, Phase.generate))
        settings.load_profile("no-shrink")


class Progress:
    """Writes the records to one file, each on disk before the test goes on."""

    def __init__(self, path: str):
        self.out = open(path, "a", buffering=1)     # noqa: SIM115 (closed at unconfigure)

    def write(self, record: dict) -> None:
        self.out.write(json.dumps(record) + "\n")
        self.out.flush()
        os.fsync(self.out.fileno())

    def pytest_runtest_logstart(self, nodeid, location) -> None:
        self.write({"start": nodeid})

    def pytest_runtest_logreport(self, report) -> None:
        """The outcome: the call's passed/failed/skipped, or a setup or teardown that did not pass."""
        if report.when == "call" or (report.when != "call" and not report.passed):
            outcome = "error" if report.when != "call" and report.failed else report.outcome
            self.write({"end": report.nodeid, "outcome": outcome, "seconds": round(report.duration, 3)})

    def pytest_unconfigure(self, config) -> None:
        self.out.close()

"""The loaded-machine rows (issue 33 item 9): the suite's matrix-product programs timed quiet and
again beside a CPU-bound process that holds one core, as a notebook user's machine runs them.
A BLAS that splits a product statically between its threads waits for the one on the busy core;
the rows show each runner's time in both conditions and against jax.jit's."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Callable

from ..timing import interleaved_medians
from .suite import Benchmark, by_name, flat

NAME = "loaded"
PROGRAMS = ("mlp", "mlp_train")
PEER = "jax.jit"
# A second of spinning before timing: the busy process is on its core and the gauge
# (backends/numba_cpu/cores.py) has seen it.
SETTLE_S = 1.0
SPIN = "while True: pass"


@contextlib.contextmanager
def busy_core():
    """One CPU-bound process beside this one while inside."""
    proc = subprocess.Popen([sys.executable, "-c", SPIN], stdin=subprocess.DEVNULL)
    try:
        time.sleep(SETTLE_S)
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def time_both(calls: dict[str, Callable[[], object]], repeats: int) -> dict[str, dict[str, float]]:
    """Median ms of each call quiet and beside a busy process: {name: {"quiet": ms, "loaded": ms}}."""
    quiet = interleaved_medians(calls, repeats)
    with busy_core():
        loaded = interleaved_medians(calls, repeats)
    return {name: {"quiet": quiet[name] * 1e3, "loaded": loaded[name] * 1e3} for name in calls}


def run_loaded(runners: list, prepare: Callable, repeats: int, quick: bool) -> dict:
    """Per program: each runner's status and its quiet and loaded medians (`prepare` is cli._prepare)."""
    return {"name": NAME, "rows": [_row(bench, runners, prepare, repeats, quick) for bench in by_name(list(PROGRAMS))]}


def _row(bench: Benchmark, runners: list, prepare: Callable, repeats: int, quick: bool) -> dict:
    """One program's row; each runner's result checked against numpy first (by `prepare`)."""
    inputs = bench.inputs(quick)
    expected = flat(bench.fn(*inputs))
    results = {r.name: prepare(r, bench, inputs, expected) for r in runners}
    ready = {name: r.pop("call") for name, r in results.items() if r["status"] == "ok"}
    for name, ms in time_both(ready, repeats).items():
        results[name] = {"status": "ok", **ms}
    kept = ("status", "error", "quiet", "loaded")
    return {"name": bench.name, "size": bench.size(quick),
            "results": {name: {k: v for k, v in r.items() if k in kept} for name, r in results.items()}}


def format_loaded(data: dict) -> list[str]:
    """The table: each runner's ms quiet and beside a busy process, and its ratio to jax.jit's."""
    names = list(data["rows"][0]["results"]) if data["rows"] else []
    lines = ["", "beside a CPU-bound process (one core busy): median ms quiet / loaded, (time / jax.jit's)",
             "| benchmark | size | " + " | ".join(names) + " |", "|" + " --- |" * (len(names) + 2)]
    for row in data["rows"]:
        peer = row["results"].get(PEER, {})
        lines.append(f"| {row['name']} | {row['size']} | "
                     + " | ".join(_cell(row["results"][n], peer) for n in names) + " |")
    return lines


def _cell(result: dict, peer: dict) -> str:
    if result["status"] != "ok":
        return result["status"]
    parts = []
    for when in ("quiet", "loaded"):
        ratio = f" ({result[when] / peer[when]:.2f}x)" if peer.get("status") == "ok" else ""
        parts.append(f"{result[when]:.1f}{ratio}")
    return " / ".join(parts)

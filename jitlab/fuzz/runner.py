"""Runs generated programs through jitlab at one level and sorts each outcome.

pass: the outputs equal numpy's (compare.py). refused: jitlab raised a JitlabError (allowed,
counted, grouped by message). mismatch: jitlab returned something numpy does not. crash: any
other exception, from tracing, compiling or calling. The report lists the repro script of
every mismatch and crash, and of the first program behind each kind of refusal.
"""

from __future__ import annotations

import collections
import pathlib
import re
import time
import traceback
from dataclasses import dataclass, field

from ..errors import JitlabError
from ..progress import progress
from .compare import differences
from .generate import Case, generate

KINDS = ("pass", "refused", "mismatch", "crash")


@dataclass
class Outcome:
    """What one program gave: its kind and, unless it passed, why."""
    kind: str
    case: Case
    detail: str = ""


@dataclass
class Summary:
    """The counts of a run and its failures, in the order they came."""
    level: str
    seed: int
    counts: collections.Counter = field(default_factory=collections.Counter)
    failures: list[Outcome] = field(default_factory=list)
    refusals: dict[str, list[Outcome]] = field(default_factory=dict)
    seconds: float = 0.0

    def add(self, outcome: Outcome) -> None:
        self.counts[outcome.kind] += 1
        if outcome.kind in ("mismatch", "crash"):
            self.failures.append(outcome)
        elif outcome.kind == "refused":
            self.refusals.setdefault(_refusal_key(outcome.detail), []).append(outcome)

    def line(self) -> str:
        """The counts on one line."""
        tried = sum(self.counts.values())
        counts = ", ".join(f"{self.counts[k]} {k}" for k in KINDS)
        return f"{self.level} seed {self.seed}: {tried} tried: {counts} ({self.seconds:.0f} s)"

    def text(self) -> str:
        """The whole report: counts, refusals by kind, and the repro of every failure."""
        parts = [self.line(), ""]
        for key, outcomes in sorted(self.refusals.items(), key=lambda kv: -len(kv[1])):
            parts.append(f"refused {len(outcomes)}x: {key}")
        for key, outcomes in self.refusals.items():
            parts += ["", f"=== first refusal: {key}", _describe(outcomes[0])]
        for outcome in self.failures:
            parts += ["", f"=== {outcome.kind} ({outcome.case.label})", _describe(outcome)]
        return "\n".join(parts) + "\n"


def _describe(outcome: Outcome) -> str:
    return f"{outcome.detail}\n--- repro ({outcome.case.label}):\n{outcome.case.repro()}"


def _refusal_key(detail: str) -> str:
    """A refusal's kind: its first line with numbers and value names blanked, so alike ones group."""
    first = detail.splitlines()[0] if detail else ""
    return re.sub(r"%\w+|\d+", "#", first)[:160]


def run_case(case: Case, level: str, target: str = "cpu") -> Outcome:
    """Traces, compiles and runs `case` at `level`, and compares with numpy."""
    from ..compiler import compile as jl_compile
    from ..frontend.jit import trace

    want = case.expected()
    try:
        program = trace(case.function(), *case.inputs)
        got = jl_compile(program, level=level, target=target, progress=False)(*case.inputs)
    except JitlabError as error:
        return Outcome("refused", case, f"{type(error).__name__}: {error}")
    except Exception:       # anything but a JitlabError is a crash: that is what the fuzzer looks for
        return Outcome("crash", case, traceback.format_exc(limit=-8))
    problems = differences(got, want, case.rtols)
    return Outcome("mismatch", case, "\n".join(problems)) if problems else Outcome("pass", case)


def run(examples: int, level: str, seed: int = 0, target: str = "cpu", report: str | None = None,
        show_progress: bool = True) -> Summary:
    """Runs programs `seed`, `seed + 1`, ... at `level`; writes the report (also as it goes) if asked."""
    summary = Summary(level, seed)
    start = time.perf_counter()
    with progress(examples, f"fuzz {level}", min_total=1, disable=not show_progress, unit="program") as bar:
        for i in range(examples):
            bar.step(f"seed {seed + i}: {summary.counts['mismatch']} mismatch, {summary.counts['crash']} crash")
            outcome = run_case(generate(seed + i), level, target)
            summary.add(outcome)
            summary.seconds = time.perf_counter() - start
            if report and (outcome.kind != "pass" or i % 50 == 0 or i == examples - 1):
                pathlib.Path(report).write_text(summary.text())
    return summary

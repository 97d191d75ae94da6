"""The Compare view: several compilations' figures and graphs side by side."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import JitlabError
from ..runtime.profile import profile
from .compare import figures, pass_pairs, regrouped, scope_figures
from .session import Session, from_object


def default_labels(sessions: list[Session]) -> list[str]:
    labels = [f"{s.report.level or 'program'} {s.report.target}".strip() for s in sessions]
    if len(set(labels)) < len(labels):
        labels = [f"{chr(ord('A') + i)}: {label}" for i, label in enumerate(labels)]
    return labels


def compare_session(xs: Sequence[Any], args: Sequence[Any] | None, labels: Sequence[str] | None,
                    repeats: int = 5) -> tuple[Session, dict[str, Any]]:
    """A session for the first compilation and the Compare view's data for all of them; with `args`
    each side is profiled on them first (jl.profile: its time, its kernels' and its scopes')."""
    if len(xs) < 2:
        raise JitlabError(f"jl.explore.compare takes two or more compilations, got {len(xs)}")
    if args is not None:
        for x in xs:
            if _runs(x):
                profile(x, *args, repeats=repeats)
    sessions = [from_object(x) for x in xs]
    labels = list(labels) if labels is not None else default_labels(sessions)
    if len(labels) != len(sessions):
        raise JitlabError(f"{len(sessions)} compilations but {len(labels)} labels")
    columns, views = [], []
    for x, s in zip(xs, sessions):
        columns.append(figures(s.report))
        columns[-1]["time_note"] = None if columns[-1]["run_seconds"] is not None else untimed(x)
        data = s.build()
        columns[-1]["scopes"] = scope_figures(data["scopes"])
        # What the browser needs to lay each side's graph out itself, as the Graph view does.
        views.append({k: data[k] for k in ("ops", "groups", "colors", "kernels", "memory", "graph", "roofline")})
    first = sessions[0]
    data = dict(first.data)
    data["title"] = " vs ".join(labels)
    # Each other compilation against the first: ops grouped differently, per scope, and the pipelines pass by pass.
    diffs = [{"regrouped": regrouped(first.report, s.report), "passes": pass_pairs(first.report, s.report)}
             for s in sessions[1:]]
    data["compare"] = {"labels": labels, "columns": columns, "views": views, "diffs": diffs}
    return first, data


def _runs(x: Any) -> bool:
    from ..frontend.jit import JitFunction
    from ..runtime.executable import Executable

    return isinstance(x, (JitFunction, Executable))


def untimed(x: Any) -> str:
    """Why a side has no time, and how to get one: the page says it where the time would be."""
    if not _runs(x):
        return f"not timed: a {type(x).__name__} does not run; compare compiled executables or jitted functions"
    return ("not timed: pass the inputs, jl.explore.compare(a, b, args=(x, ...)), to profile each side, "
            "or run jl.profile(exe, *inputs) on it first")

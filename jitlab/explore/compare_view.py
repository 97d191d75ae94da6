"""The Compare view: several compilations' figures and graphs side by side."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import JitlabError
from .compare import figures, pass_pairs, regrouped, scope_figures, time_call
from .session import Session, from_object


def default_labels(sessions: list[Session]) -> list[str]:
    labels = [f"{s.report.level or 'program'} {s.report.target}".strip() for s in sessions]
    if len(set(labels)) < len(labels):
        labels = [f"{chr(ord('A') + i)}: {label}" for i, label in enumerate(labels)]
    return labels


def compare_session(xs: Sequence[Any], args: Sequence[Any] | None, labels: Sequence[str] | None
                    ) -> tuple[Session, dict[str, Any]]:
    """A session for the first compilation and the Compare view's data for all of them."""
    if len(xs) < 2:
        raise JitlabError(f"jl.explore.compare takes two or more compilations, got {len(xs)}")
    sessions = [from_object(x) for x in xs]
    labels = list(labels) if labels is not None else default_labels(sessions)
    if len(labels) != len(sessions):
        raise JitlabError(f"{len(sessions)} compilations but {len(labels)} labels")
    columns, views = [], []
    for s in sessions:
        seconds = time_call(s.exe, args) if args is not None and s.exe is not None else None
        columns.append(figures(s.report, seconds))
        data = s.build()
        columns[-1]["scopes"] = scope_figures(data["scopes"])
        # What the browser needs to lay each side's graph out itself, as the Graph view does.
        views.append({k: data[k] for k in ("ops", "groups", "colors", "kernels", "memory", "graph")})
    first = sessions[0]
    data = dict(first.data)
    data["title"] = " vs ".join(labels)
    # Each other compilation against the first: ops grouped differently, per scope, and the pipelines pass by pass.
    diffs = [{"regrouped": regrouped(first.report, s.report), "passes": pass_pairs(first.report, s.report)}
             for s in sessions[1:]]
    data["compare"] = {"labels": labels, "columns": columns, "views": views, "diffs": diffs}
    return first, data

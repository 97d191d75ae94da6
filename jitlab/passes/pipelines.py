"""The pass pipelines behind each level. Later stages append their passes here."""

from __future__ import annotations

from ..errors import JitlabError

LEVELS: dict[str, list[str]] = {
    "O0": ["verify", "infer-shapes", "dce"],
    "O1": ["verify", "infer-shapes", "dce"],
    "O2": ["verify", "infer-shapes", "dce"],
}
# Scheduling and memory planning run last, on the final graph (issue 5).
LEVELS["O1"] += ["schedule", "plan-memory{mode=dynamic}"]
LEVELS["O2"] += ["schedule", "plan-memory{mode=static}"]


def pipeline_for(level: str) -> str:
    if level not in LEVELS:
        raise JitlabError(f"unknown level {level!r}; levels are {', '.join(LEVELS)}")
    return ",".join(LEVELS[level])

"""The pass pipelines behind each level. Later stages append their passes here."""

from __future__ import annotations

from ..errors import JitlabError

# fold-weights runs once composites are decomposed (batch norm's arithmetic is then visible);
# licm last, on bodies already simplified, so that what it hoists out of a loop fuses with its neighbours
SIMPLIFY = ["canonicalize", "decompose", "canonicalize", "cse", "fold-weights", "dce", "licm"]
FUSE = ["mark-subgraphs", "fuse", "alias-views", "dce"]

LEVELS: dict[str, list[str]] = {
    "O0": ["verify", "infer-shapes", "dce"],
    "O1": ["verify", "infer-shapes", "dce", *SIMPLIFY, *FUSE, "schedule", "plan-memory{mode=dynamic}"],
    "O2": ["verify", "infer-shapes", "dce", *SIMPLIFY, *FUSE, "schedule", "plan-memory{mode=static}"],
}


def pipeline_for(level: str) -> str:
    if level not in LEVELS:
        raise JitlabError(f"unknown level {level!r}; levels are {', '.join(LEVELS)}")
    return ",".join(LEVELS[level])

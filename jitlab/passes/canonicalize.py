"""The `canonicalize` pass: the canonicalization rules (canon_algebra, canon_shape)
applied to a fixpoint, each rewrite and each miss recorded in the report."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from . import canon_algebra, canon_shape  # noqa: F401  (register the rules)
from .canon_algebra import FOLD_LIMIT, FoldConstants
from .manager import register_pass
from .rewriter import Pattern
from .rules import CANONICALIZE, RewritePass, RuleSet


@register_pass
@dataclass
class Canonicalize(RewritePass):
    name = "canonicalize"
    summary = ("Folds constants and applies identities exact in IEEE arithmetic, redundant-cast and "
               "shape-op simplifications, until nothing changes.")
    rules: ClassVar[RuleSet] = CANONICALIZE
    fold_limit: int = FOLD_LIMIT

    def patterns(self) -> list[Pattern]:
        return [FoldConstants(self.fold_limit) if isinstance(p, FoldConstants) else p
                for p in super().patterns()]

"""Passes: the pass manager, pattern rewriting, and one module per pass family."""

from . import (  # noqa: F401
           alias_views,
           basic,
           canonicalize,
           decompose,
           fold_weights,
           fusion,
           licm,
           memory,
           recompute,
           schedule,
           streams,
)
from .manager import PASSES, Pass, PassContext, PassManager, function_pass, parse_pipeline, register_pass
from .pipelines import LEVELS, pipeline_for
from .provenance import history, produced_by, why_not
from .rewriter import GreedyDriver, Pattern, Rewriter, apply_patterns
from .rules import CANONICALIZE, DECOMPOSE, RULES, RuleSet, rule_pass

__all__ = ["CANONICALIZE", "DECOMPOSE", "LEVELS", "PASSES", "RULES", "GreedyDriver", "Pass", "PassContext",
           "PassManager", "Pattern", "Rewriter", "RuleSet", "apply_patterns", "function_pass", "parse_pipeline",
           "history", "pipeline_for", "produced_by", "register_pass", "rule_pass", "why_not"]

"""Passes: the pass manager, pattern rewriting, and one module per pass family."""

from . import alias_views, basic, fusion, streams  # noqa: F401  (register the passes)
from .manager import PASSES, Pass, PassContext, PassManager, function_pass, parse_pipeline, register_pass
from .pipelines import LEVELS, pipeline_for
from .rewriter import GreedyDriver, Pattern, Rewriter, apply_patterns

__all__ = ["LEVELS", "PASSES", "GreedyDriver", "Pass", "PassContext", "PassManager", "Pattern", "Rewriter",
           "apply_patterns", "function_pass", "parse_pipeline", "pipeline_for", "register_pass"]

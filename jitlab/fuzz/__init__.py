"""Differential fuzzing of jitlab against plain numpy: random programs, numpy's answers as the oracle."""

from .compare import RTOL, differences
from .generate import Case, SeededChoices, build, generate
from .runner import Outcome, Summary, run, run_case

__all__ = ["Case", "Outcome", "SeededChoices", "Summary", "build", "differences", "generate", "run", "run_case", "RTOL"]

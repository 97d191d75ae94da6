"""The O0 reference interpreter lives in jitlab/dialects/reference.py (below the passes and
backends that use it); this path keeps `from jitlab.runtime.reference import Interpreter`
(notebook 07) working."""

from ..dialects.reference import HANDLERS, Interpreter, concrete_attrs, handles, run_reference, weight_data

__all__ = ["HANDLERS", "Interpreter", "concrete_attrs", "handles", "run_reference", "weight_data"]

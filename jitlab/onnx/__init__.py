"""ONNX import: `jl.onnx.load(model)` gives a Program of `np` ops; `jitlab.onnx.backend` lets
onnx's backend test runner drive jitlab; `run_conformance` runs onnx's node test cases.

Loaded on first use (`jl.onnx`), so `import jitlab` does not import onnx.
"""

from .backend import JitlabBackend, JitlabRep
from .importer import load
from .node import StaticInputNeeded

__all__ = ["ConformanceTable", "JitlabBackend", "JitlabRep", "StaticInputNeeded", "load", "run_conformance"]


def __getattr__(name: str):
    # The conformance runner is only needed by the CLI and tests; it loads on first use.
    if name in ("run_conformance", "ConformanceTable"):
        from . import conformance

        return getattr(conformance, name)
    raise AttributeError(f"module 'jitlab.onnx' has no attribute {name!r}")

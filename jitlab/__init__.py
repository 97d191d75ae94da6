"""jitlab: a deep-learning graph compiler for numpy code, built to be looked into."""

from . import dialects, passes  # noqa: F401  (registers ops and passes)
from .compiler import compile, opt
from .errors import (
                     CompileError,
                     DTypeError,
                     InputError,
                     JitlabError,
                     ModelError,
                     OutOfMemoryError,
                     ParseError,
                     PassError,
                     PluginError,
                     ShapeError,
                     TraceError,
                     UnknownOpError,
                     UnsupportedError,
                     UnsupportedOp,
                     VerifyError,
)
from .frontend.jit import JitFunction, Spec, jit, spec, trace
from .ir import Program, Sym, TensorType, parse, sym, verify
from .report import CompileReport, MemoryPlan
from .runtime.executable import Executable

__version__ = "0.1.0"

__all__ = ["CompileError", "CompileReport", "DTypeError", "Executable", "InputError", "JitFunction",
           "JitlabError", "MemoryPlan", "ModelError", "OutOfMemoryError", "ParseError", "PassError", "PluginError",
           "Program", "ShapeError", "Spec", "Sym", "TensorType", "TraceError", "UnknownOpError",
           "UnsupportedError", "UnsupportedOp", "VerifyError", "compile", "jit", "opt", "parse", "spec",
           "sym", "trace", "verify"]


def __getattr__(name: str):
    # jl.onnx imports the onnx package, so it loads on first use rather than with jitlab.
    if name == "onnx":
        import importlib

        return importlib.import_module(".onnx", __name__)
    raise AttributeError(f"module 'jitlab' has no attribute {name!r}")

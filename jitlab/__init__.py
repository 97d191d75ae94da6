"""jitlab: a deep-learning graph compiler for numpy code, built to be looked into."""

from . import dialects, passes  # noqa: F401  (registers ops and passes)
from .compiler import compile, opt
from .errors import (
                     CompileError,
                     DTypeError,
                     InputError,
                     JitlabError,
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
from .runtime.dryrun import dry_run
from .runtime.executable import Executable

__version__ = "0.1.0"

__all__ = ["CompileError", "CompileReport", "DTypeError", "Executable", "InputError", "JitFunction",
           "JitlabError", "MemoryPlan", "OutOfMemoryError", "ParseError", "PassError", "PluginError",
           "Program", "ShapeError", "Spec", "Sym", "TensorType", "TraceError", "UnknownOpError",
           "UnsupportedError", "UnsupportedOp", "VerifyError", "compile", "dry_run", "jit", "opt", "parse", "spec",
           "sym", "trace", "verify"]

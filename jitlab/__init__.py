"""jitlab: a deep-learning graph compiler for numpy code, built to be looked into."""

from . import dialects, passes  # noqa: F401  (registers ops and passes)
from .autodiff import grad, value_and_grad
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
from .explore import explore
from .frontend.jit import JitFunction, Spec, jit, spec, trace
from .ir import Program, Sym, TensorType, parse, sym, verify
from .report import CompileReport, MemoryPlan
from .runtime.dryrun import dry_run
from .runtime.executable import Executable

__version__ = "0.1.0"


def load_ipython_extension(ipython) -> None:
    """`%load_ext jitlab`: registers the `%%jit` cell magic."""
    from .magic import load_ipython_extension as load

    load(ipython)


__all__ = ["CompileError", "CompileReport", "DTypeError", "Executable", "InputError", "JitFunction",
           "JitlabError", "MemoryPlan", "OutOfMemoryError", "ParseError", "PassError", "PluginError",
           "Program", "ShapeError", "Spec", "Sym", "TensorType", "TraceError", "UnknownOpError",
           "UnsupportedError", "UnsupportedOp", "VerifyError", "compile", "dry_run", "explore", "jit", "opt",
           "parse", "spec", "sym", "trace", "verify"]
__all__ += ["grad", "value_and_grad"]

"""jitlab: a deep-learning graph compiler for numpy code, built to be looked into."""

from . import dialects, optim, passes  # noqa: F401  (registers ops and passes; jl.optim)
from .autodiff import grad, value_and_grad
from .compiler import compile, opt
from .errors import (
                     CacheWarning,
                     CompileError,
                     DTypeError,
                     InputError,
                     JitlabError,
                     LongTraceWarning,
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
from .explore import explore
from .frontend.capture import capture_loops
from .frontend.control_flow import cond, fori_loop, scan, while_loop
from .frontend.jit import JitFunction, Spec, jit, spec, trace
from .ir import Program, Sym, TensorType, parse, sym, verify
from .report import CompileReport, MemoryPlan
from .runtime.dryrun import dry_run
from .runtime.executable import Executable
from .runtime.profile import profile
from .version import __version__ as __version__  # re-exported: jl.__version__


def load_ipython_extension(ipython) -> None:
    """`%load_ext jitlab`: registers the `%%jit` cell magic."""
    from .magic import load_ipython_extension as load

    load(ipython)


__all__ = ["CacheWarning", "CompileError", "CompileReport", "DTypeError", "Executable", "InputError", "JitFunction",
           "JitlabError", "LongTraceWarning", "MemoryPlan", "ModelError", "OutOfMemoryError", "ParseError", "PassError",
           "PluginError", "Program", "ShapeError", "Spec", "Sym", "TensorType", "TraceError", "UnknownOpError",
           "UnsupportedError", "UnsupportedOp", "VerifyError", "compile", "dry_run", "explore", "jit", "opt",
           "parse", "profile", "spec", "sym", "trace", "verify"]
__all__ += ["grad", "value_and_grad"]
__all__ += ["capture_loops", "cond", "fori_loop", "scan", "while_loop"]


def __getattr__(name: str):
    # jl.onnx imports the onnx package, so it loads on first use rather than with jitlab.
    if name == "onnx":
        import importlib

        return importlib.import_module(".onnx", __name__)
    raise AttributeError(f"module 'jitlab' has no attribute {name!r}")

"""Errors escaping a function while it is traced, pointed at the user's line.

Whatever fails inside the traced function (numpy's own ValueError when a tracer is
written into a numpy array made outside the trace, a tracer's `__bool__`, an AttributeError, a jitlab
error from an op) reaches the caller as a JitlabError that names the innermost frame
of the user's code, its source line, and what to write instead."""

from __future__ import annotations

import ast
import functools
import inspect
import linecache
import os
import sysconfig
import traceback

import numpy as np

from ..errors import JitlabError, TraceError

# with a trailing separator, so that a user's jitlab_examples/ is not jitlab/
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_NUMPY_DIR = os.path.dirname(os.path.abspath(np.__file__)) + os.sep
_STDLIB_DIR = os.path.abspath(sysconfig.get_paths()["stdlib"]) + os.sep
_MAX_STATEMENT_LINES = 20
_NUMPY_SETITEM = "setting an array element with a sequence"   # numpy's words for a tracer written into an array

SETITEM_ADVICE = ("writes into traced arrays are recorded, but this array is a numpy array made outside the "
                  "traced function (a global, or made by a helper in another module): create it inside the "
                  "function (np.zeros, np.empty...) or pass it as an argument; or build the result from its "
                  "parts with np.stack, np.concatenate or np.where")
SCATTER_ADVICE = ("writes are recorded at indices known while tracing; to write or add at traced indices "
                  "keep them an integer array (i = x.astype(np.int64)) and write h[i] = v, np.add.at(h, i, v), "
                  "or np.bincount(i, minlength=n) for counts")
_CONVERSIONS = frozenset({"int", "float", "round", "floor", "ceil", "trunc"})
_NO_VALUE = ("has no value while tracing", "is not known while tracing")   # a tracer turned into a number
GENERIC_ADVICE = ("traced arrays have a shape and a dtype but no values: keep values in numpy functions "
                  "(np.where for choices, np.stack to build arrays), or pass values that decide shapes or "
                  "control flow with static_argnums")


@functools.lru_cache(maxsize=4096)
def is_user_file(path: str) -> bool:
    """Whether code in `path` is the user's: not jitlab's, numpy's or the standard library's (asked
    for every frame of every traced op: remembered per path)."""
    path = os.path.abspath(path)
    if path.startswith((_PACKAGE_DIR, _NUMPY_DIR)):
        return False
    return not path.startswith(_STDLIB_DIR) or "site-packages" in path


def user_frame(tb) -> traceback.FrameSummary | None:
    """The innermost frame of the traceback that runs the user's code (not jitlab, numpy or the stdlib)."""
    frames = [f for f in traceback.extract_tb(tb) if is_user_file(f.filename)]
    return frames[-1] if frames else None


def _statement(frame: traceback.FrameSummary) -> ast.stmt | None:
    """The statement starting at the frame's line, parsed; None where it does not parse alone."""
    lines = []
    for i in range(frame.lineno, frame.lineno + _MAX_STATEMENT_LINES):
        line = linecache.getline(frame.filename, i)
        if not line:
            return None
        lines.append(line.strip() if not lines else line)
        try:
            body = ast.parse("".join(lines)).body
        except SyntaxError:
            continue
        return body[0] if body else None
    return None


def element_targets(frame: traceback.FrameSummary) -> list[ast.Subscript]:
    """The `a[...]` targets of the frame's statement when it is `a[...] = v` or `a[...] += v`."""
    stmt = _statement(frame)
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        targets = [stmt.target]
    else:
        return []
    return [t for t in targets if isinstance(t, ast.Subscript)]


def _converts_in_index(targets: list[ast.Subscript]) -> bool:
    """Whether an index of these targets turns something into a Python number (`h[int(v * 7)]`)."""
    def name(fn: ast.expr) -> str:
        return fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else ""

    return any(isinstance(node, ast.Call) and name(node.func) in _CONVERSIONS
               for t in targets for node in ast.walk(t.slice))


def _where(frame: traceback.FrameSummary | None, fn_name: str) -> str:
    return f"in {fn_name}" + (f" at {frame.filename}:{frame.lineno}" if frame else "")


def _source(frame: traceback.FrameSummary | None) -> str:
    return f"\n    {frame.line}" if frame is not None and frame.line else ""


def _generic_advice(e: Exception) -> str:
    from .tracer import Tracer

    if isinstance(e, AttributeError) and getattr(e, "obj", None) is not None and isinstance(e.obj, Tracer):
        methods = sorted(n for n in dir(Tracer) if not n.startswith("_") and n not in ("value", "ctx"))
        return (f"traced arrays have no values, so methods that read them (item, tolist) cannot work; "
                f"a traced array has: {', '.join(methods)}, and numpy's functions take it")
    return GENERIC_ADVICE


def defined_at(fn) -> str:
    """' (defined at file:line)' for a Python function (through wrappers), else ''."""
    code = getattr(inspect.unwrap(fn), "__code__", None)
    return f" (defined at {code.co_filename}:{code.co_firstlineno})" if code is not None else ""


def located(e: Exception, fn) -> Exception:
    """`e`, raised while tracing `fn`, as a JitlabError naming the user's line (else fn's definition)."""
    if getattr(e, "_jitlab_located", False):
        return e           # already pointed at its line by a trace nested inside this one
    fn_name = getattr(fn, "__name__", "main")
    frame = user_frame(e.__traceback__)
    if frame is None:
        fn_name += defined_at(fn)
    targets = element_targets(frame) if frame is not None else []
    no_value = isinstance(e, TraceError) and any(words in str(e) for words in _NO_VALUE)
    if no_value and _converts_in_index(targets):
        out = TraceError(f"the index of this write is a traced value, not known while tracing "
                         f"({_where(frame, fn_name)}):{_source(frame)}\n{SCATTER_ADVICE}")
    elif _NUMPY_SETITEM in str(e) or targets and no_value and \
            "the truth value" not in str(e):         # `a[i] = max(p, q)`: the max, not the write, needs a value
        out = TraceError(f"a traced value cannot be written into a numpy array "
                         f"({_where(frame, fn_name)}):{_source(frame)}\n{SETITEM_ADVICE}")
    elif isinstance(e, JitlabError):
        known = frame is not None and f"{frame.filename}:{frame.lineno}" in str(e)
        where = "" if known else f" ({_where(frame, fn_name)})"
        e.args = (f"{e}{where}{_source(frame)}",)
        out = e
    else:
        out = TraceError(f"tracing {fn_name} failed ({_where(frame, fn_name)}): {type(e).__name__}: {e}"
                         f"{_source(frame)}\n{_generic_advice(e)}")
    out._jitlab_located = True
    return out

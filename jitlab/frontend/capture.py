"""`jl.capture_loops`: Python `for i in range(...)` loops of a function traced as one scf.for each.

The mechanism is AutoGraph's (source conversion), not tracer-level capture: tracing runs the
user's Python, and a `for` statement runs its body once per iteration before the tracer sees
anything, with no way to stop after one iteration and rebind the function's locals to the loop's
results (CPython offers no supported write to a running frame's locals). Converting the source
instead puts each loop's body into a function of (index, carried values), which
`jl.fori_loop`'s machinery traces once with a traced index, and leaves the original loop beside it
to run, unrolled as before, whenever capture fails. Capture fails, with the reason recorded per
loop and line, when the body's Python depends on the index's value (`if i == 0`, `range(i)`, a
slice of traced extent: the traced index has no value), when a carried value changes shape or
dtype (a shape that grows with the index), when a carried value is not an array or number, or when
the loop is written so that it cannot be a function (`break`, `continue`, `return`, a list's
`append`). The body then traces the same ops every iteration by construction: one trace of it is
every iteration.

Carried values are the names the body reads before writing them, the arrays it writes into
(`a[i] = ...`, `x += ...`), and the names it writes that the function reads after the loop.
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap
import types
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import JitlabError
from .tracer import ACTIVE, Tracer

_MUTATORS = {"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "add", "discard"}
_PREFIX = "_jl_loop"


@dataclass(frozen=True)
class LoopNote:
    """What became of one Python loop while tracing: captured as an scf.for, or unrolled and why."""

    file: str
    line: int
    captured: bool
    reason: str = ""

    def __str__(self) -> str:
        where = f"the loop at {self.file}:{self.line}"
        return f"{where} was captured as one scf.for" if self.captured else f"{where} was unrolled: {self.reason}"


def capture_loops(fn: Callable) -> Callable:
    """`fn` with each `for name in range(...)` loop traced as one scf.for where its body allows
    (called outside a trace, it runs as `fn`). Loops that cannot be captured are unrolled as before;
    the program's `loops` (and the compile report's warnings) say why, per loop and line."""
    try:
        converted = _convert(fn)
    except (OSError, TypeError, SyntaxError):     # no source (a builtin, a lambda in a REPL): as it is
        return fn
    return functools.wraps(fn)(converted) if converted is not None else fn


# -- the source conversion ------------------------------------------------------------------------
def _convert(fn: Callable) -> Callable | None:
    source = textwrap.dedent(inspect.getsource(fn))
    tree = ast.parse(source)
    func = tree.body[0]
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) or isinstance(func, ast.AsyncFunctionDef):
        return None
    _, first_line = inspect.getsourcelines(fn)
    ast.increment_lineno(tree, first_line - 1)
    func.decorator_list = []
    file = inspect.getsourcefile(fn) or "<unknown>"
    rewriter = _LoopRewriter(file, func)
    func.body = rewriter.block(func.body)
    if not rewriter.count:
        return None
    return _compile(fn, func, file)


def _compile(fn: Callable, func: ast.FunctionDef, file: str) -> Callable:
    """The converted function with fn's globals, defaults and closure (plus the capture helper)."""
    free = list(fn.__code__.co_freevars)
    factory = ast.FunctionDef(name="_jl_factory", args=ast.arguments(
        posonlyargs=[], args=[ast.arg(a) for a in [*free, "_jl_capture"]], kwonlyargs=[], kw_defaults=[],
        defaults=[]), body=[func, ast.Return(ast.Name(func.name, ast.Load()))], decorator_list=[], returns=None)
    module = ast.fix_missing_locations(ast.Module([factory], type_ignores=[]))
    code = compile(module, file, "exec")
    factory_code = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    inner = next(c for c in factory_code.co_consts if isinstance(c, types.CodeType) and c.co_name == func.name)
    cells = dict(zip(free, fn.__closure__ or ()))
    cells["_jl_capture"] = types.CellType(run_for)
    closure = tuple(cells[name] for name in inner.co_freevars)
    out = types.FunctionType(inner, fn.__globals__, fn.__name__, fn.__defaults__, closure)
    out.__kwdefaults__ = fn.__kwdefaults__
    return out


class _LoopRewriter:
    """Rewrites the `for ... in range(...)` statements of one function body (not of nested functions)."""

    def __init__(self, file: str, func: ast.FunctionDef):
        self.file, self.func, self.count = file, func, 0

    def block(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for stmt in stmts:
            for name in ("body", "orelse", "finalbody"):
                if isinstance(stmt, (ast.If, ast.For, ast.While, ast.With, ast.Try)) and hasattr(stmt, name):
                    setattr(stmt, name, self.block(getattr(stmt, name)))
            out.extend(self.loop(stmt) if _is_range_loop(stmt) else [stmt])
        return out

    def loop(self, loop: ast.For) -> list[ast.stmt]:
        self.count += 1
        reason = _refusal(loop) or _index_read_after(loop, self.func)
        if reason is not None:
            return [_note_call(self.file, loop.lineno, reason), loop]
        k, target = self.count, loop.target.id
        carried = _carried(loop, self.func)
        body_name, out_name = f"{_PREFIX}_body{k}", f"{_PREFIX}_out{k}"
        names = ", ".join(carried)
        pack = f"({names},)" if carried else "()"
        template = textwrap.dedent(f"""
            def {body_name}({target}, _jl_carry):
                {pack} = _jl_carry
                return {pack}
            {out_name} = _jl_capture(({", ".join("_" for _ in loop.iter.args)},), {body_name},
                                     lambda: {pack}, {tuple(carried)!r}, {self.file!r}, {loop.lineno})
            if {out_name} is not None:
                {pack} = {out_name}
            """)
        stmts = ast.parse(template).body
        for node in stmts:        # the generated code stands on the loop's line
            for child in ast.walk(node):
                if hasattr(child, "lineno"):
                    child.lineno = child.end_lineno = loop.lineno
                    child.col_offset = child.end_col_offset = loop.col_offset
        body_fn, call, branch = stmts
        body_fn.body[1:1] = loop.body
        call.value.args[0] = ast.Tuple(list(loop.iter.args), ast.Load(), lineno=loop.lineno,
                                       col_offset=loop.col_offset)
        branch.orelse = [loop]
        return stmts


def _is_range_loop(stmt: ast.stmt) -> bool:
    return (isinstance(stmt, ast.For) and isinstance(stmt.iter, ast.Call) and isinstance(stmt.iter.func, ast.Name)
            and stmt.iter.func.id == "range" and 1 <= len(stmt.iter.args) <= 3 and not stmt.iter.keywords)


def _refusal(loop: ast.For) -> str | None:
    """Why a loop cannot become a function of (index, carried values), or None."""
    if not isinstance(loop.target, ast.Name):
        return "its target is not one name"
    if loop.orelse:
        return "it has an else clause"
    for node in _walk_body(loop.body):
        if isinstance(node, (ast.Break, ast.Continue, ast.Return, ast.Yield, ast.YieldFrom, ast.Await)):
            return f"it uses {type(node).__name__.lower()} (line {node.lineno})"
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            return f"it declares {type(node).__name__.lower()} names (line {node.lineno})"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _MUTATORS:
            return f"it calls .{node.func.attr}() (line {node.lineno}), a Python side effect the IR cannot carry"
    return None


def _index_read_after(loop: ast.For, func: ast.FunctionDef) -> str | None:
    end = _end_line(loop)
    if any(isinstance(n, ast.Name) and n.id == loop.target.id and n.lineno > end for n in ast.walk(func)):
        return f"its index {loop.target.id} is read after the loop"
    return None


def _end_line(loop: ast.For) -> int:
    return max(getattr(n, "end_lineno", None) or loop.lineno for n in ast.walk(loop))


def _walk_body(stmts: list[ast.stmt]):
    """The nodes of a loop body, not descending into functions or classes defined in it."""
    stack = list(stmts)
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


def _carried(loop: ast.For, func: ast.FunctionDef) -> list[str]:
    """The names the loop carries: read before written in the body, written into (`a[i] = ...`,
    `x += ...`), or written in the body and read after the loop."""
    written: set[str] = set()
    carried: list[str] = []
    for kind, name in (e for stmt in loop.body for e in _events(stmt)):
        if kind == "store":
            written.add(name)
        elif (kind == "update" or name not in written) and name != loop.target.id and name not in carried:
            carried.append(name)
    stored = written | {name for stmt in loop.body for kind, name in _events(stmt) if kind == "update"}
    end = _end_line(loop)
    after = {n.id for n in ast.walk(func) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
             and n.lineno > end}
    return [n for n in carried if n in stored] + sorted((stored & after) - set(carried) - {loop.target.id})


def _events(node: ast.AST):
    """("load" | "store" | "update", name) in the order Python evaluates a statement; functions, classes
    and lambdas defined inside count as the name they bind."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield "store", node.name
    elif isinstance(node, ast.Name):
        yield ("load" if isinstance(node.ctx, ast.Load) else "store"), node.id
    elif isinstance(node, ast.Assign):
        yield from _events(node.value)
        for target in node.targets:
            yield from _events(target)
    elif isinstance(node, ast.AugAssign):
        yield from _events(node.value)
        base = _base_name(node.target)
        if base is not None:
            yield "update", base
    elif isinstance(node, (ast.Subscript, ast.Attribute)) and isinstance(node.ctx, ast.Store):
        base = _base_name(node)
        if base is not None:
            yield "update", base
        for child in ast.iter_child_nodes(node):
            if child is not node.value:
                yield from _events(child)
    elif isinstance(node, (ast.For, ast.comprehension)):
        for child in (node.iter, node.target, *getattr(node, "ifs", ()), *getattr(node, "body", ()),
                      *getattr(node, "orelse", ())):
            yield from _events(child)
    elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
        for child in (*node.generators, *(getattr(node, k) for k in ("key", "value", "elt") if hasattr(node, k))):
            yield from _events(child)
    elif not isinstance(node, ast.Lambda):
        for child in ast.iter_child_nodes(node):
            yield from _events(child)


def _base_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _note_call(file: str, line: int, reason: str) -> ast.stmt:
    stmt = ast.parse(f"_jl_capture.note({file!r}, {line}, {reason!r})").body[0]
    return ast.copy_location(stmt, ast.Pass(lineno=line, col_offset=0))


# -- at trace time ---------------------------------------------------------------------------------
def run_for(bounds: tuple, body: Callable, carried: Callable, names: tuple[str, ...], file: str, line: int):
    """The carried values after the loop traced as one scf.for, or None to run the loop in Python
    (outside a trace, or when capture fails: the note says why)."""
    if not ACTIVE:
        return None
    ctx = ACTIVE[-1]
    try:
        init = carried()
    except NameError as e:
        return _unrolled(file, line, f"{e.name or 'a name'} is first written inside the loop and read after it")
    bad = [n for n, v in zip(names, init) if not isinstance(v, (Tracer, np.ndarray, np.generic, int, float, bool))]
    if bad:
        return _unrolled(file, line, f"{bad[0]} is not an array or a number")
    lo, hi, step = _bounds(bounds)
    traced = any(isinstance(b, Tracer) for b in (lo, hi))
    if step != 1 or not traced and len(range(lo, hi)) < 2:
        return _unrolled(file, line, "a step other than 1" if step != 1 else "fewer than two iterations")
    weak = [n for n, v in zip(names, init) if isinstance(v, (bool, int, float, complex))]
    if weak and traced:
        return _unrolled(file, line, f"{weak[0]} starts as a Python number, whose dtype numpy decides at its first "
                         "use, and the trip count is traced")
    from .control_flow import fori_loop

    try:
        with _noting(ctx):
            if weak:        # the first iteration unrolled: numpy's weak scalars give the carried dtypes
                init, lo = body(lo, tuple(_fresh(v) for v in init)), lo + 1
            out = fori_loop(lo, hi, lambda i, c: body(i, tuple(c)), tuple(_fresh(v) for v in init))
    except JitlabError as e:
        return _unrolled(file, line, str(e).split("\n")[0])
    _record(LoopNote(file, line, True))
    return out


def _fresh(v):
    """A carried tracer as a new object: writes into it (a[i] = ...) must not reach the caller's."""
    return Tracer(v.value, v.ctx) if isinstance(v, Tracer) else v


def _bounds(bounds: tuple) -> tuple:
    if len(bounds) == 1:
        return 0, bounds[0], 1
    return (*bounds, 1)[:3]


class _noting:
    """Keeps the loop notes of a capture that failed halfway out of the program's list."""

    def __init__(self, ctx):
        self.ctx = ctx

    def __enter__(self):
        self.count = len(_notes(self.ctx))

    def __exit__(self, kind, error, tb):
        if error is not None:
            del _notes(self.ctx)[self.count:]
        return False


def _notes(ctx) -> list:
    return ctx.program.loops


def _record(note: LoopNote) -> None:
    if ACTIVE:
        _notes(ACTIVE[-1]).append(note)


def _unrolled(file: str, line: int, reason: str) -> None:
    _record(LoopNote(file, line, False, reason))
    return None


def note(file: str, line: int, reason: str) -> None:
    """Records that the loop at `line` is unrolled because of how it is written."""
    _record(LoopNote(file, line, False, reason))


run_for.note = note

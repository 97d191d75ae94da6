"""Loops and branches of plain Python traced as scf ops: the source conversion behind every trace.

The mechanism is AutoGraph's (source conversion), not tracer-level capture: tracing runs the
user's Python, and a `for` statement runs its body once per iteration before the tracer sees
anything, with no way to stop after one iteration and rebind the function's locals to the loop's
results (CPython offers no supported write to a running frame's locals). Converting the source
instead puts each loop's body, and each branch of an `if`, into a function of the values it
carries, which `jl.fori_loop`, `jl.while_loop` and `jl.cond`'s machinery trace once; the original
statement stays beside it and runs as written when the values are Python ones (outside a trace, a
branch on a static value) or, for a `for` loop, unrolled when capture fails. Capture of a `for`
loop fails, with the reason recorded per loop and line, when the body's Python depends on the
index's value (`range(i)`, a slice of traced extent: the traced index has no value), when a carried
value changes shape or dtype, when a carried value is not an array or number, or when the loop is
written so that it cannot be a function (`break`, `continue`, `return`, a list's `append`). The
body then traces the same ops every iteration by construction: one trace of it is every iteration.
An `if` or `while` whose condition is traced and that cannot be captured is a TraceError naming
the line: it has no unrolled form.

As AutoGraph converts the functions a converted function calls, a call by bare name (`step(u)`)
becomes `_jl_capture.call(step, u)`, which converts `step` first when it is a plain function of the
user's (not one of the standard library's, an installed package's or jitlab's), so the loops of
helper functions are captured too. Builtins are called as written: `super()` and `locals()` read
the frame they are called from.
"""

from __future__ import annotations

import ast
import builtins
import copy
import functools
import inspect
import os
import sysconfig
import textwrap
import types
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import capture_run
from .capture_names import flow, live_after, parents
from .capture_run import LoopNote

__all__ = ["LoopNote", "capture_loops", "converted", "with_source"]

_MUTATORS = {"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "add", "discard"}
_JUMPS = (ast.Break, ast.Continue, ast.Return, ast.Yield, ast.YieldFrom, ast.Await)
_INDENT = "@@"             # in generated code: the indentation of the line before
_SKIP = object()          # a function that is not converted (no source, nothing to convert)
_converted: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_sources: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_BUILTINS = frozenset(dir(builtins))
# where functions that are not the user's live: called as they are, never converted
_LIBRARIES = tuple(sorted({os.path.join(Path(p).resolve(), "") for p in
                           [*(sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")),
                            Path(__file__).parents[1]]}))


def capture_loops(fn: Callable) -> Callable:
    """`fn` with its loops and branches on traced values traced as scf ops where their bodies allow (as
    every traced function is unless traced with `capture_loops=False`); outside a trace it runs as `fn`."""
    out = converted(fn)
    return functools.wraps(fn)(out) if out is not fn else fn


def converted(fn: Callable) -> Callable:
    """`fn` converted (cached per function), or `fn` itself when there is nothing to convert or no source."""
    if isinstance(fn, types.MethodType):
        inner = converted(fn.__func__)
        return fn if inner is fn.__func__ else types.MethodType(inner, fn.__self__)
    if type(fn) is not types.FunctionType or "_jl_capture" in fn.__code__.co_freevars or \
            fn.__code__.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE):
        return fn           # not a plain function, converted already, or a generator
    known = _converted.get(fn)
    if known is None or known[0] is not fn.__code__:
        try:
            out = _convert(fn)
        except (OSError, TypeError, SyntaxError, IndexError):   # no source (a REPL lambda, exec'd code): as it is
            out = None
        known = _converted[fn] = (fn.__code__, _SKIP if out is None else out)
    return fn if known[1] is _SKIP else known[1]


def converted_call(fn: Callable) -> Callable:
    """What a bare-name call in converted code calls: a plain function of the user's converted, else `fn`."""
    if type(fn) is types.FunctionType and not fn.__code__.co_filename.startswith(_LIBRARIES):
        return converted(fn)
    return fn


# -- the source conversion ------------------------------------------------------------------------
def with_source(fn: types.FunctionType, func: ast.FunctionDef) -> None:
    """Gives `fn`, compiled from text that `inspect` cannot find (a notebook cell), its syntax tree."""
    _sources[fn] = copy.deepcopy(func)


def _convert(fn: types.FunctionType) -> Callable | None:
    func = _sources.get(fn)
    if func is None:
        lines, first_line = inspect.getsourcelines(fn.__code__)
        tree = ast.parse(textwrap.dedent("".join(lines)))
        func = tree.body[0]
        if not isinstance(func, ast.FunctionDef) or func.name != fn.__code__.co_name:
            return None
        ast.increment_lineno(tree, first_line - 1)
    else:
        func = copy.deepcopy(func)
    func.decorator_list = []
    file = fn.__code__.co_filename
    rewriter = _Rewriter(file, func)
    func.body = rewriter.block(func.body)
    calls = _Calls()
    func.body = [calls.visit(stmt) for stmt in func.body]
    if not rewriter.count and not calls.count:
        return None
    return _compile(fn, func, file)


class _Calls(ast.NodeTransformer):
    """Rewrites bare-name calls of the body (and of the functions the conversion wrote: loop bodies,
    branches) as `_jl_capture.call(f, ...)`; the user's own nested functions are converted when called."""

    def __init__(self):
        self.count = 0

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        return self.generic_visit(node) if node.name.startswith("_jl_") else node

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> ast.AST:
        return node

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        func = node.func
        if not isinstance(func, ast.Name) or func.id in _BUILTINS or func.id.startswith("_jl_"):
            return node
        self.count += 1
        call = ast.Attribute(ast.Name("_jl_capture", ast.Load()), "call", ast.Load())
        return ast.copy_location(ast.Call(call, [func, *node.args], node.keywords), node)


def _compile(fn: types.FunctionType, func: ast.FunctionDef, file: str) -> Callable:
    """The converted function with fn's globals, defaults and closure (plus the capture helpers)."""
    free = list(fn.__code__.co_freevars)
    factory = ast.FunctionDef(name="_jl_factory", args=ast.arguments(
        posonlyargs=[], args=[ast.arg(a) for a in [*free, "_jl_capture"]], kwonlyargs=[], kw_defaults=[],
        defaults=[]), body=[func, ast.Return(ast.Name(func.name, ast.Load()))], decorator_list=[], returns=None)
    module = ast.fix_missing_locations(ast.Module([factory], type_ignores=[]))
    code = compile(module, file, "exec")
    factory_code = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    inner = next(c for c in factory_code.co_consts if isinstance(c, types.CodeType) and c.co_name == func.name)
    cells = dict(zip(free, fn.__closure__ or ()))
    cells["_jl_capture"] = types.CellType(capture_run)
    closure = tuple(cells[name] for name in inner.co_freevars)
    out = types.FunctionType(inner, fn.__globals__, fn.__name__, fn.__defaults__, closure)
    out.__kwdefaults__ = fn.__kwdefaults__
    out.__qualname__, out.__module__, out.__doc__ = fn.__qualname__, fn.__module__, fn.__doc__
    return out


@dataclass
class _Plan:
    """What one statement carries, found on the function as written, before any conversion."""

    names: list[str]
    written: list[str]
    live: list[str]
    both: list[str]
    refusal: str | None


class _Rewriter:
    """Rewrites the `for ... in range(...)`, `while` and `if` statements of one function body (not of
    nested functions); each statement is analysed on the source as written."""

    def __init__(self, file: str, func: ast.FunctionDef):
        self.file, self.func, self.count = file, func, 0
        where = parents(func)
        self.plans = {id(s): _plan(s, func, where) for s in _statements(func) if _kind(s)}

    def block(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for stmt in stmts:
            kind = _kind(stmt)
            plan = self.plans.get(id(stmt))
            if isinstance(stmt, (ast.If, ast.For, ast.While, ast.With, ast.Try)):
                for name in ("body", "orelse", "finalbody"):
                    if hasattr(stmt, name):
                        setattr(stmt, name, self.block(getattr(stmt, name)))
            if kind is None or plan is None:
                out.append(stmt)
                continue
            self.count += 1
            out.extend(getattr(self, kind)(stmt, plan))
        return out

    def _site(self, stmt: ast.stmt, plan: _Plan) -> str:
        return f"_jl_capture.Site({self.file!r}, {stmt.lineno}, {tuple(plan.names)!r}, {tuple(plan.written)!r})"

    def loop(self, loop: ast.For, plan: _Plan) -> list[ast.stmt]:
        if plan.refusal is not None:
            return [_at(ast.parse(f"_jl_capture.note({self.file!r}, {loop.lineno}, {plan.refusal!r})").body[0],
                        loop), loop]
        k, target, names = self.count, loop.target.id, plan.names
        stmts = _template(f"""
            def _jl_body{k}({target}, _jl_in):
                {_unpack(names, "_jl_in")}
                return {_values(names)}
            _jl_out{k} = _jl_capture.run_for(({", ".join("_" for _ in loop.iter.args)},), _jl_body{k},
                                             {_values(names)}, {self._site(loop, plan)})
            if _jl_out{k} is not None:
                {_unpack(names, f"_jl_out{k}")}
            """, loop)
        body_fn, call, branch = stmts
        body_fn.body[-1:-1] = loop.body
        call.value.args[0] = ast.Tuple(list(loop.iter.args), ast.Load(), lineno=loop.lineno, col_offset=0)
        branch.orelse = [loop]
        return stmts

    def branch(self, stmt: ast.If, plan: _Plan) -> list[ast.stmt]:
        k, names = self.count, plan.names
        if plan.refusal is not None:
            stmt.test = _call_test(stmt.test, self._site(stmt, plan), "if", plan.refusal)
            return [stmt]
        stmts = _template(f"""
            _jl_p{k} = None
            if _jl_capture.traced(_jl_p{k}):
                def _jl_then{k}(_jl_in):
                    {_unpack(names, "_jl_in")}
                    return {_values(names)}
                def _jl_else{k}(_jl_in):
                    {_unpack(names, "_jl_in")}
                    return {_values(names)}
                _jl_r{k} = _jl_capture.run_if(_jl_p{k}, _jl_then{k}, _jl_else{k}, {_values(names)},
                                              {self._site(stmt, plan)}, {tuple(plan.live)!r}, {tuple(plan.both)!r})
                {_unpack(names, f"_jl_r{k}")}
            """, stmt)
        assign, branch = stmts
        assign.value = _conditions(stmt.test)
        then_fn, else_fn = branch.body[:2]
        then_fn.body[-1:-1] = stmt.body
        else_fn.body[-1:-1] = stmt.orelse
        stmt.test = ast.Name(f"_jl_p{k}", ast.Load())
        branch.orelse = [stmt]
        return stmts

    def repeat(self, loop: ast.While, plan: _Plan) -> list[ast.stmt]:
        k, names = self.count, plan.names
        if plan.refusal is not None:
            loop.test = _call_test(loop.test, self._site(loop, plan), "while loop", plan.refusal)
            return [loop]
        stmts = _template(f"""
            def _jl_cond{k}(_jl_in):
                {_unpack(names, "_jl_in")}
                return None
            def _jl_body{k}(_jl_in):
                {_unpack(names, "_jl_in")}
                return {_values(names)}
            _jl_out{k} = _jl_capture.run_while(_jl_cond{k}, _jl_body{k}, {_values(names)}, {self._site(loop, plan)})
            if _jl_out{k} is not None:
                {_unpack(names, f"_jl_out{k}")}
            """, loop)
        cond_fn, body_fn, _, branch = stmts
        cond_fn.body[-1].value = _conditions(loop.test)
        body_fn.body[-1:-1] = loop.body
        branch.orelse = [loop]
        return stmts


def _statements(func: ast.FunctionDef):
    """The statements of `func`, nested ones included (not those of functions defined in it)."""
    stack = list(func.body)
    while stack:
        stmt = stack.pop()
        yield stmt
        if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for name in ("body", "orelse", "finalbody", "handlers"):
                stack.extend(getattr(stmt, name, None) or ())


def _kind(stmt: ast.stmt) -> str | None:
    if isinstance(stmt, ast.If):
        return "branch"
    if isinstance(stmt, ast.While):
        return "repeat"
    if (isinstance(stmt, ast.For) and isinstance(stmt.iter, ast.Call) and isinstance(stmt.iter.func, ast.Name)
            and stmt.iter.func.id == "range" and 1 <= len(stmt.iter.args) <= 3 and not stmt.iter.keywords
            and not any(isinstance(a, ast.Starred) for a in stmt.iter.args)):
        return "loop"
    return None


def _plan(stmt: ast.stmt, func: ast.FunctionDef, where: dict) -> _Plan:
    live = live_after(stmt, func, where)
    if isinstance(stmt, ast.If):
        (_, s1, u1, m1), (_, s2, u2, m2) = flow(stmt.body), flow(stmt.orelse)
        names = sorted(s1 | s2 | u1 | u2 | m1 | m2)
        written = (u1 | u2)
        refusal = _refusal(stmt, "branch") or _rebound(written & (s1 | s2 | m1 | m2), "a branch")
        return _Plan(names, sorted(written), sorted(live & set(names)), sorted(s1 & s2), refusal)
    loads, stores, updates, maybes = flow(stmt.body)
    if isinstance(stmt, ast.While):
        loads |= {n.id for n in ast.walk(stmt.test) if isinstance(n, ast.Name)}
    else:
        stores.add(stmt.target.id) if isinstance(stmt.target, ast.Name) else None
    assigned = stores | updates | maybes
    carried = (loads & assigned) | (assigned & live)
    if isinstance(stmt, ast.For) and isinstance(stmt.target, ast.Name):
        carried.discard(stmt.target.id)
    refusal = _refusal(stmt, "loop") or _rebound(updates & (stores | maybes), "the body")
    if refusal is None and isinstance(stmt, ast.For) and stmt.target.id in live:
        refusal = f"its index {stmt.target.id} is read after the loop"
    return _Plan(sorted(carried), sorted(updates & carried), sorted(live), [], refusal)


def _rebound(names: set[str], where: str) -> str | None:
    """A name whose array on entry is written into and that is also rebound: the caller's array sees
    the writes made before the rebinding only, which one carried value cannot say."""
    if not names:
        return None
    return f"{where} writes into {min(names)} and also binds {min(names)} to another array"


def _refusal(stmt: ast.stmt, what: str) -> str | None:
    """Why a statement cannot become functions of the values it carries, or None."""
    if isinstance(stmt, ast.For) and not isinstance(stmt.target, ast.Name):
        return "its target is not one name"
    if isinstance(stmt, (ast.For, ast.While)) and stmt.orelse:
        return "it has an else clause"
    body = stmt.body + (stmt.orelse if isinstance(stmt, ast.If) else [])
    for node in _walk_body(body):
        if isinstance(node, _JUMPS):
            word = type(node).__name__.lower()
            return f"it uses {word} (line {node.lineno})" if what == "loop" else \
                f"a branch uses {word} (line {node.lineno}), which a traced condition cannot steer"
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            return f"it declares {type(node).__name__.lower()} names (line {node.lineno})"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _MUTATORS:
            return f"it calls .{node.func.attr}() (line {node.lineno}), a Python side effect the IR cannot carry"
    return None


def _walk_body(stmts: list[ast.stmt]):
    """The nodes of a body, not descending into functions or classes defined in it."""
    stack = list(stmts)
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


# -- generated code -----------------------------------------------------------------------------------
def _unpack(names: list[str], source: str) -> str:
    """Binds `names` from a tuple, leaving the ones it holds as unbound unbound."""
    if not names:
        return "pass"
    checks = "".join(f"\n{_INDENT}if {n} is _jl_capture.UNDEF: del {n}" for n in names)
    return f"({', '.join(names)},) = {source}{checks}"


def _values(names: list[str]) -> str:
    return "(" + "".join(f"_jl_capture.value(lambda: {n}), " for n in names) + ")"


def _template(source: str, stmt: ast.stmt) -> list[ast.stmt]:
    """Parses generated code; every node of it stands on `stmt`'s line."""
    lines, indent = [], ""
    for line in source.splitlines():
        if line.startswith(_INDENT):
            line = indent + line[len(_INDENT):]
        else:
            indent = line[:len(line) - len(line.lstrip())]
        lines.append(line)
    stmts = ast.parse(textwrap.dedent("\n".join(lines))).body
    for node in stmts:
        _at(node, stmt)
    return stmts


def _at(node: ast.AST, stmt: ast.AST, inner: bool = True) -> ast.AST:
    """Puts generated code on `stmt`'s line (with inner=False, only the nodes that have no line yet)."""
    for child in ast.walk(node):
        if child._attributes and (inner or not hasattr(child, "lineno")):
            child.lineno = child.end_lineno = stmt.lineno
            child.col_offset = child.end_col_offset = 0
    return node


def _conditions(test: ast.expr) -> ast.expr:
    """A condition with `and`, `or` and `not` that keep a traced operand traced (np.logical_and...)."""
    if isinstance(test, ast.BoolOp):
        fn = "and_" if isinstance(test.op, ast.And) else "or_"
        parts = [ast.Lambda(_no_args(), _conditions(v)) for v in test.values]
        return _at(ast.Call(_helper(fn), parts, []), test, inner=False)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _at(ast.Call(_helper("not_"), [_conditions(test.operand)], []), test, inner=False)
    return test


def _call_test(test: ast.expr, site: str, what: str, reason: str) -> ast.expr:
    call = _at(ast.parse(f"_jl_capture.test(None, {site}, {what!r}, {reason!r})", mode="eval").body, test)
    call.args[0] = _conditions(test)
    return call


def _helper(name: str) -> ast.expr:
    return ast.Attribute(ast.Name("_jl_capture", ast.Load()), name, ast.Load())


def _no_args() -> ast.arguments:
    return ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[])


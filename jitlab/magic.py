"""`%load_ext jitlab` and the `%%jit` cell magic: a notebook cell compiled as a function.

Names the cell reads before assigning them become the function's parameters (arrays
are traced, Python scalars are static); names it assigns are returned and written back
to the notebook, and arrays it writes into (`out[i] = ...`, `x += 1`) are updated in
place, as plain numpy would. The same body with the same shapes hits the compile cache.
"""

from __future__ import annotations

import ast
import linecache
import statistics
import textwrap
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import JitlabError

STATIC_TYPES = (int, float, bool, complex, str, bytes, type(None))
LAST = "_jl_last_"


class CellError(JitlabError):
    """A %%jit cell failed; the message points at the cell line."""


@dataclass
class CellPlan:
    """What a cell reads before assigning, what it assigns, and whether it ends in an expression."""

    reads: list[str]
    writes: list[str]
    last_expr: bool


class _Names(ast.NodeVisitor):
    """Walks a cell in execution order, noting first reads and assignments at cell level."""

    def __init__(self):
        self.assigned: set[str] = set()
        self.reads: list[str] = []
        self.writes: list[str] = []

    def load(self, name: str) -> None:
        if name not in self.assigned and name not in self.reads:
            self.reads.append(name)

    def store(self, name: str) -> None:
        self.assigned.add(name)
        if name not in self.writes:
            self.writes.append(name)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self.load(node.id)
        elif isinstance(node.ctx, ast.Store):
            self.store(node.id)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for target in node.targets:
            self.visit(target)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Name):
            self.load(node.target.id)
        self.visit(node.value)
        self.visit(node.target)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
        self.visit(node.target)

    def visit_For(self, node: ast.For) -> None:
        self.visit(node.iter)
        self.visit(node.target)
        for stmt in node.body + node.orelse:
            self.visit(stmt)

    def _scoped(self, node, parts) -> None:
        # Comprehension variables and function locals do not leak into the cell's names.
        assigned, writes = set(self.assigned), list(self.writes)
        for part in parts:
            self.visit(part)
        self.assigned, self.writes = assigned, writes

    def _comprehension(self, node) -> None:
        parts = []
        for gen in node.generators:
            parts += [gen.iter, gen.target, *gen.ifs]
        elements = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        self._scoped(node, parts + elements)

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension

    def _function(self, node) -> None:
        self.assigned |= {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
        self._scoped(node, node.body if isinstance(node.body, list) else [node.body])

    def visit_Lambda(self, node: ast.Lambda) -> None:
        assigned = set(self.assigned)
        self._function(node)
        self.assigned = assigned

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        assigned = set(self.assigned)
        self._function(node)
        self.assigned = assigned
        self.store(node.name)

    def visit_Import(self, node) -> None:
        for alias in node.names:
            self.store((alias.asname or alias.name).split(".")[0])

    visit_ImportFrom = visit_Import


def analyze(cell: str) -> CellPlan:
    """The names a cell reads first and assigns (raises SyntaxError on bad Python)."""
    tree = ast.parse(cell)
    names = _Names()
    for stmt in tree.body:
        names.visit(stmt)
    last = bool(tree.body) and isinstance(tree.body[-1], ast.Expr)
    return CellPlan(names.reads, names.writes, last)


def function_source(name: str, cell: str, params: list[str], writes: list[str], last_expr: bool) -> ast.Module:
    """The cell as `def name(params): body; return split({assigned names})`, with the cell's line numbers."""
    keep = tuple(writes) + ((LAST,) if last_expr else ())
    header = f"def {name}({''.join(p + ', ' for p in params)}*, _jl_split_=None):\n"
    body = textwrap.indent(cell.rstrip() or "pass", "    ", lambda line: True) + "\n"
    ret = f"    return _jl_split_({{k: v for k, v in locals().items() if k in {keep!r}}})\n"
    module = ast.parse(header + body + ret)
    fn = module.body[0]
    if last_expr:
        expr = fn.body[-2]
        fn.body[-2] = ast.fix_missing_locations(
            ast.copy_location(ast.Assign([ast.Name(LAST, ast.Store())], expr.value), expr))
    for stmt in fn.body:
        ast.increment_lineno(ast.fix_missing_locations(stmt), -1)
    return module


@dataclass
class CellFunction:
    """One compiled cell body: its jitted function and what tracing found about its outputs."""

    name: str
    plan: CellPlan
    filename: str
    jitted: Any = None
    static_outputs: dict[tuple, dict[str, Any]] = field(default_factory=dict)
    traces: int = 0
    key: tuple = ()

    def split(self, values: dict[str, Any]) -> dict[str, Any]:
        """Runs at trace time: traced values are returned, the rest remembered per signature."""
        from .frontend.pytree import flatten
        from .frontend.tracer import Tracer

        def traced(v) -> bool:
            return any(isinstance(leaf, Tracer) for leaf in flatten(v, is_leaf=lambda x: isinstance(x, Tracer))[0])

        self.traces += 1
        self.static_outputs[self.key] = {k: v for k, v in values.items() if not traced(v)}
        return {k: v for k, v in values.items() if traced(v)}


def _signature(args: list[Any]) -> tuple:
    return tuple((a.shape, a.dtype.str) if isinstance(a, np.ndarray) else (type(a), a) for a in args)


def classify(plan: CellPlan, namespace: dict[str, Any]) -> list[str]:
    """The reads that become parameters: arrays (traced) and Python scalars (static)."""
    params = []
    for name in plan.reads:
        value = namespace.get(name, None) if name in namespace else None
        if name in namespace and (isinstance(value, (np.ndarray, np.generic)) or isinstance(value, STATIC_TYPES)):
            params.append(name)
    return params


def build(cell: str, name: str, level: str, target: str, namespace: dict[str, Any], params: list[str],
          plan: CellPlan) -> CellFunction:
    """Compiles the cell into a jitted function whose globals are the notebook's namespace."""
    from .frontend.capture import with_source
    from .frontend.jit import jit

    filename = f"<%%jit {name}>"
    lines = cell.splitlines(keepends=True)
    linecache.cache[filename] = (len(cell), None, lines, filename)
    module = function_source(name, cell, params, plan.writes, plan.last_expr)
    scope: dict[str, Any] = {}
    exec(compile(module, filename, "exec"), namespace, scope)
    fn = scope[name]
    with_source(fn, module.body[0])         # inspect finds the cell's text, not the function made of it
    cf = CellFunction(name, plan, filename)
    fn.__kwdefaults__ = {"_jl_split_": cf.split}
    cf.jitted = jit(fn, level=level, target=target)
    return cf


def cell_line(error: BaseException, filename: str) -> int | None:
    """The last cell line in the traceback of `error` or of the errors that caused it."""
    line = None
    while error is not None and line is None:
        tb = error.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == filename:
                line = tb.tb_lineno
            tb = tb.tb_next
        error = error.__cause__ or error.__context__
    return line


def cell_error(error: BaseException, cell: str, filename: str) -> CellError:
    """One clear message naming the cell line that failed."""
    line = error.lineno if isinstance(error, SyntaxError) else cell_line(error, filename)
    message = error.msg if isinstance(error, SyntaxError) else str(error)
    kind = type(error).__name__
    if line is None:
        return CellError(f"%%jit: {kind}: {message}")
    lines = cell.splitlines()
    text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
    return CellError(f"%%jit cell line {line}: {text}\n  {kind}: {message}")


def time_median(fn, repeat: int = 5) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _format_seconds(x: float) -> str:
    return f"{x * 1e3:.3f} ms" if x < 1 else f"{x:.2f} s"


def _show_cell_error(shell, etype, value, tb, tb_offset=None):
    """Shows a CellError as its message alone: the cell line and what went wrong."""
    shell._showtraceback(etype, value, [f"\x1b[31m{etype.__name__}\x1b[0m: {value}"])


def _make_magics():
    from IPython.core.magic import Magics, cell_magic, magics_class
    from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

    @magics_class
    class JitMagics(Magics):
        """The `%%jit` cell magic; keeps one compiled function per cell body and options."""

        def __init__(self, shell):
            super().__init__(shell)
            self.cells: dict[tuple, CellFunction] = {}
            self.last: CellFunction | None = None

        @magic_arguments()
        @argument("--level", default="O1", help="O0, O1 or O2")
        @argument("--target", default="auto", help="cpu, cuda or auto")
        @argument("--explore", action="store_true", help="show jl.explore of the compiled cell")
        @argument("--bench", action="store_true", help="time the compiled cell against plain Python")
        @argument("--name", default="cell", help="the function's name in the IR and the report")
        @cell_magic
        def jit(self, line, cell):
            """Compiles the cell with jitlab; reads arrays from and writes results to the notebook."""
            options = parse_argstring(self.jit, line)
            if not options.name.isidentifier():
                raise CellError(f"%%jit --name {options.name!r}: the name must be a Python identifier")
            return self.run(options, cell)

        def run(self, options, cell: str):
            namespace = self.shell.user_ns
            try:
                plan = analyze(cell)
            except SyntaxError as e:
                raise cell_error(e, cell, "") from None
            params = classify(plan, namespace)
            key = (cell, options.level, options.target, options.name, tuple(params))
            try:
                if key not in self.cells:
                    self.cells[key] = build(cell, options.name, options.level, options.target, namespace, params, plan)
            except JitlabError as e:
                raise CellError(f"%%jit: {e}") from None
            cf = self.last = self.cells[key]
            values = [namespace[p] for p in params]
            cf.key = _signature(values)
            try:
                out = cf.jitted(*values)
            except Exception as e:  # the user's code failed: report it at its cell line, keep the kernel alive
                raise cell_error(e, cell, cf.filename) from None
            results = {**cf.static_outputs.get(cf.key, {}), **out}
            namespace.update({k: v for k, v in results.items() if k != LAST})
            if options.bench:
                self.bench(cf, cell, params, values)
            if options.explore:
                from IPython.display import display

                from .explore import explore

                display(explore(cf.jitted.last))
            return results.get(LAST)

        def bench(self, cf: CellFunction, cell: str, params: list[str], values: list[Any]) -> None:
            compiled = time_median(lambda: cf.jitted(*values))
            code = compile(cell, cf.filename, "exec")

            def plain():
                scope = dict(self.shell.user_ns)
                scope.update({p: v.copy() if isinstance(v, np.ndarray) else v for p, v in zip(params, values)})
                exec(code, scope)

            python = time_median(plain)
            print(f"%%jit {cf.name} ({cf.jitted.level}): {_format_seconds(compiled)} per run, plain Python "
                  f"{_format_seconds(python)}: {python / compiled:.2f}x")

    return JitMagics


def load_ipython_extension(ipython) -> None:
    """`%load_ext jitlab`: registers `%%jit`."""
    ipython.register_magics(_make_magics())
    ipython.set_custom_exc((CellError,), _show_cell_error)

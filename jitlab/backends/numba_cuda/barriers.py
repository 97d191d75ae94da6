"""A check over generated CUDA kernel source: every barrier is reached by every thread of the block.

A block barrier (`cuda.syncthreads*`, a warp shuffle, or a device function of devicefns.py that
holds one, e.g. `_block_sum`) waits for the whole block (or warp); a thread that takes another
path waits at another barrier or none, and the block hangs. So each barrier must sit where every
enclosing `if`/`while` condition and every enclosing loop's bounds are block-uniform, with no
thread-dependent `return`, `break` or `continue` before it in its loop or kernel.

Block-uniform values: constants, `cuda.blockIdx`/`blockDim`/`gridDim`, `cuda.gridsize`, the
kernel's parameters themselves (every thread is passed the same; an array's *elements* are
not uniform, its `.shape` is), module globals, and local variables every assignment of which
is uniform and made at a uniform point. Everything else (threadIdx, `cuda.grid`, array
elements, the result of a reduction) counts as thread-dependent: the check may refuse a
correct kernel, never pass a wrong one. Which device functions hold barriers is read from
devicefns.py's own source, so a new reducer is covered without being listed.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import CompileError

DIRECT = {"syncthreads", "syncthreads_or", "syncthreads_and", "syncthreads_count", "syncwarp"}
WARP_SYNC = {"shfl_sync", "shfl_up_sync", "shfl_down_sync", "shfl_xor_sync", "all_sync", "any_sync",
             "eq_sync", "ballot_sync", "match_any_sync", "match_all_sync"}
BLOCK_BARRIERS = {"syncthreads", "syncthreads_or", "syncthreads_and", "syncthreads_count"}
UNIFORM_CUDA = {"blockIdx", "blockDim", "gridDim", "warpsize"}
UNIFORM_CUDA_CALLS = {"gridsize"}
ARRAY_FACTS = {"shape", "size", "ndim", "dtype"}


@dataclass(frozen=True)
class Violation:
    """A barrier some threads of a block may not reach, and why."""

    function: str
    line: int
    barrier: str
    reason: str

    def text(self) -> str:
        return f"{self.function}, line {self.line}: {self.barrier} {self.reason}"


@dataclass
class Barriers:
    """What devicefns.py's functions hold: names of those with a barrier, and their block-barrier counts
    on a GPU (the simulator's shuffles are emulated with barriers of their own)."""

    holders: set[str] = field(default_factory=set)
    block_counts: dict[str, int] = field(default_factory=dict)


def _cuda_attr(node: ast.AST) -> str | None:
    """`x` for `cuda.x` (and `cuda.x.y`), else None."""
    while isinstance(node, ast.Attribute):
        if isinstance(node.value, ast.Name) and node.value.id == "cuda":
            return node.attr
        node = node.value
    return None


def _callee(node: ast.Call) -> str | None:
    if isinstance(node.func, ast.Name):
        return node.func.id
    return _cuda_attr(node.func) if isinstance(node.func, ast.Attribute) else None


@functools.lru_cache(maxsize=2)
def device_barriers(simulator: bool = False) -> Barriers:
    """The barrier-holding functions of devicefns.py, read from its source (the branch of
    `if SIMULATOR:` that applies is followed for the counts; every branch for the holders)."""
    tree = ast.parse((Path(__file__).parent / "devicefns.py").read_text())
    defs: dict[str, list[ast.AST]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            defs.setdefault(node.name, []).append(node)
    result = Barriers()
    changed = True
    while changed:          # to a fixed point: a function holding a call to a holder is one
        changed = False
        for name, nodes in defs.items():
            if name not in result.holders and any(_holds(n, result.holders) for n in nodes):
                result.holders.add(name)
                changed = True
        for target, factory in _factory_products(tree):
            if factory in result.holders and target not in result.holders:
                result.holders.add(target)
                changed = True
    result.block_counts = _block_counts(tree, result.holders, simulator)
    return result


def _holds(fn: ast.AST, holders: set[str]) -> bool:
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            name = _callee(node)
            if name in holders or (_cuda_attr(node.func) and name in DIRECT | WARP_SYNC):
                return True
    return False


def _factory_products(tree: ast.Module) -> list[tuple[str, str]]:
    """(name, factory) for module-level `name = factory(...)`."""
    pairs = []
    for node in tree.body:
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Name)):
            pairs += [(t.id, node.value.func.id) for t in node.targets if isinstance(t, ast.Name)]
    return pairs


def _block_counts(tree: ast.Module, holders: set[str], simulator: bool) -> dict[str, int]:
    """Static block-barrier instructions each holder inlines into a kernel (loops not unrolled)."""
    live = _live_statements(tree.body, simulator)
    defs = {n.name: n for stmt in live for n in ast.walk(stmt) if isinstance(n, ast.FunctionDef)}
    counts: dict[str, int] = {}

    def count(fn: ast.AST, seen: tuple = ()) -> int:
        total = 0
        for node in ast.walk(fn):
            if not isinstance(node, ast.Call):
                continue
            name = _callee(node)
            if _cuda_attr(node.func) and name in BLOCK_BARRIERS:
                total += 1
            elif isinstance(node.func, ast.Name) and name in holders and name not in seen:
                total += counts.get(name, 0) if name in counts else count(_target(name), (*seen, name))
        return total

    def _target(name: str) -> ast.AST:
        if name in defs:
            return defs[name]
        factory = defs[dict(_factory_products(tree))[name]]
        returned = next(s.value.id for s in factory.body if isinstance(s, ast.Return))
        return defs[returned]        # the nested function the factory returns

    for name in holders:
        if name in defs or name in dict(_factory_products(tree)):
            counts[name] = count(_target(name), (name,))
    return counts


def _live_statements(body: list[ast.stmt], simulator: bool) -> list[ast.stmt]:
    out = []
    for stmt in body:
        if isinstance(stmt, ast.If) and isinstance(stmt.test, ast.Name) and stmt.test.id == "SIMULATOR":
            out += _live_statements(stmt.body if simulator else stmt.orelse, simulator)
        else:
            out.append(stmt)
    return out


class _Walk:
    """The uniformity walk over one function: thread-dependent locals to a fixed point, then the
    barriers found at thread-dependent points."""

    def __init__(self, fn: ast.FunctionDef, holders: set[str], params_uniform: bool):
        self.fn, self.holders, self.params_uniform = fn, holders, params_uniform
        self.params = {a.arg for a in fn.args.args}
        self.assigned = {n.id for n in _own_nodes(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        self.varying: set[str] = set()
        self.found: list[Violation] = []
        self.sites: list[tuple[int, int, str]] = []     # (line, enclosing loops, callee) of every barrier call

    def run(self) -> list[Violation]:
        while True:
            before = set(self.varying)
            self.found, self.sites = [], []
            self._block(self.fn.body, None, 0)
            if self.varying == before:
                return self.found

    # -- statements: each returns the exits it may take, as (kind, line, thread-dependent) ----------
    def _block(self, stmts: list[ast.stmt], why: str | None, loops: int) -> list[tuple[str, int, bool]]:
        exits: list[tuple[str, int, bool]] = []
        for stmt in stmts:
            early = next((e for e in exits if e[2]), None)
            here = why or (early and f"after the thread-dependent `{early[0]}` at line {early[1]}: some threads "
                                     "have left")
            exits += self._stmt(stmt, here, loops)
        return exits

    def _stmt(self, stmt: ast.stmt, why: str | None, loops: int) -> list[tuple[str, int, bool]]:
        if isinstance(stmt, ast.If):
            self._expr(stmt.test, why, loops)
            inner = why or self._branch(stmt.test, f"under `if {ast.unparse(stmt.test)}` (line {stmt.lineno})",
                                        "a thread-dependent condition")
            return self._block(stmt.body, inner, loops) + self._block(stmt.orelse, inner, loops)
        if isinstance(stmt, ast.For | ast.While):
            return self._loop(stmt, why, loops)
        if isinstance(stmt, ast.Return | ast.Raise | ast.Break | ast.Continue):
            return self._exit(stmt, why, loops)
        if isinstance(stmt, ast.Assign | ast.AugAssign | ast.AnnAssign):
            self._assign(stmt, why, loops)
            return []
        if isinstance(stmt, ast.Expr):
            self._expr(stmt.value, why, loops)
            return []
        if isinstance(stmt, ast.With):
            for item in stmt.items:
                self._expr(item.context_expr, why, loops)
            return self._block(stmt.body, why, loops)
        self._unfollowed(stmt, loops)       # try, match, nested functions: no generator writes them
        return []

    def _exit(self, stmt: ast.stmt, why: str | None, loops: int) -> list[tuple[str, int, bool]]:
        for child in ast.iter_child_nodes(stmt):
            self._expr(child, why, loops)
        kind = type(stmt).__name__.lower()
        return [("return" if kind == "raise" else kind, stmt.lineno, why is not None)]

    def _assign(self, stmt: ast.Assign | ast.AugAssign | ast.AnnAssign, why: str | None, loops: int) -> None:
        if stmt.value is not None:
            self._expr(stmt.value, why, loops)
        uniform = why is None and (stmt.value is None or self._uniform(stmt.value))
        if isinstance(stmt, ast.AugAssign):
            uniform = uniform and self._uniform(stmt.target)
        self._taint(stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target], uniform)

    def _loop(self, stmt: ast.For | ast.While, why: str | None, loops: int) -> list[tuple[str, int, bool]]:
        head = stmt.iter if isinstance(stmt, ast.For) else stmt.test
        self._expr(head, why, loops + isinstance(stmt, ast.While))
        text = (f"for {ast.unparse(stmt.target)} in {ast.unparse(stmt.iter)}" if isinstance(stmt, ast.For)
                else f"while {ast.unparse(stmt.test)}")
        inner = why or self._branch(head, f"in `{text}` (line {stmt.lineno})", "a loop with thread-dependent bounds")
        if isinstance(stmt, ast.For):
            self._taint([stmt.target], inner is None)
        mark = (len(self.found), len(self.sites))
        exits = self._block(stmt.body, inner, loops + 1)
        leaving = next((e for e in exits if e[2]), None)
        if leaving is not None and inner is None:      # some threads leave or skip ahead: walk it again
            del self.found[mark[0]:], self.sites[mark[1]:]
            inner = (f"in the loop at line {stmt.lineno}, which the thread-dependent `{leaving[0]}` at line "
                     f"{leaving[1]} leaves or skips for some threads only")
            exits = self._block(stmt.body, inner, loops + 1)
        exits = [e for e in exits if e[0] == "return"]
        return exits + self._block(stmt.orelse, why, loops)

    def _branch(self, test: ast.expr, where: str, what: str) -> str | None:
        """None where `test` is block-uniform, else why a barrier at `where` may be skipped."""
        return None if self._uniform(test) else f"{where}, {what}"

    def _taint(self, targets: list[ast.expr], uniform: bool) -> None:
        if uniform:
            return
        for target in targets:
            self.varying |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}

    # -- expressions ----------------------------------------------------------------------------------
    def _expr(self, node: ast.AST, why: str | None, loops: int) -> None:
        """Records every barrier call in `node`, with the reason it may be skipped (or None)."""
        if isinstance(node, ast.IfExp):
            self._expr(node.test, why, loops)
            inner = why or self._branch(node.test, f"in a branch of `{ast.unparse(node)}` (line {node.lineno})",
                                        "a thread-dependent choice")
            self._expr(node.body, inner, loops)
            self._expr(node.orelse, inner, loops)
            return
        if isinstance(node, ast.BoolOp):
            inner = why
            for value in node.values:
                self._expr(value, inner, loops)
                where = f"after the short-circuit `{ast.unparse(value)}` (line {node.lineno})"
                inner = inner or self._branch(value, where, "a thread-dependent operand")
            return
        if isinstance(node, ast.Lambda | ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
            self._unfollowed(node, loops)
            return
        if isinstance(node, ast.Call) and self._is_barrier(node):
            self.sites.append((node.lineno, loops, ast.unparse(node.func)))
            if why is not None:
                self.found.append(Violation(self.fn.name, node.lineno, f"{ast.unparse(node.func)}()", why))
        for child in ast.iter_child_nodes(node):
            self._expr(child, why, loops)

    def _unfollowed(self, node: ast.AST, loops: int) -> None:
        for call in (n for n in ast.walk(node) if isinstance(n, ast.Call) and self._is_barrier(n)):
            self.sites.append((call.lineno, loops, ast.unparse(call.func)))
            self.found.append(Violation(self.fn.name, call.lineno, f"{ast.unparse(call.func)}()",
                                        f"in a {type(node).__name__} (line {node.lineno}), a construct the "
                                        "check does not follow"))

    def _is_barrier(self, call: ast.Call) -> bool:
        name = _callee(call)
        if _cuda_attr(call.func) is not None:
            return name in DIRECT | WARP_SYNC
        return isinstance(call.func, ast.Name) and name in self.holders

    def _uniform(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Constant):
            return True
        if isinstance(node, ast.Name):
            if node.id in self.varying:
                return False
            return self.params_uniform or node.id not in self.params
        if isinstance(node, ast.Attribute):
            root = _cuda_attr(node)
            if root is not None:
                return root in UNIFORM_CUDA
            return node.attr in ARRAY_FACTS or self._uniform(node.value)
        if isinstance(node, ast.Subscript):      # memory is not uniform; an array's shape is
            return (isinstance(node.value, ast.Attribute) and node.value.attr in ARRAY_FACTS
                    and self._uniform(node.slice))
        if isinstance(node, ast.Call):
            return self._uniform_call(node)
        if isinstance(node, ast.BinOp | ast.UnaryOp | ast.Compare | ast.BoolOp | ast.IfExp | ast.Tuple | ast.List
                      | ast.Slice):
            return all(self._uniform(c) for c in ast.iter_child_nodes(node)
                       if not isinstance(c, ast.operator | ast.unaryop | ast.cmpop | ast.boolop | ast.expr_context))
        return False

    def _uniform_call(self, call: ast.Call) -> bool:
        args = [*call.args, *(k.value for k in call.keywords)]
        if self._is_barrier(call):
            return False            # a reduction's result: uniform in fact, but nothing here relies on it
        if _cuda_attr(call.func) is not None:
            return _callee(call) in UNIFORM_CUDA_CALLS and all(self._uniform(a) for a in args)
        return self._uniform(call.func) and all(self._uniform(a) for a in args)


def _own_nodes(fn: ast.FunctionDef):
    """The nodes of `fn`'s body, not those of functions nested in it."""
    stack = list(fn.body)
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            stack.extend(ast.iter_child_nodes(node))


def _is_kernel(fn: ast.FunctionDef) -> bool:
    """Decorated `@cuda.jit` (any options but device=True)."""
    for dec in fn.decorator_list:
        call = dec if isinstance(dec, ast.Call) else None
        target = call.func if call else dec
        if isinstance(target, ast.Attribute) and target.attr == "jit" and _cuda_attr(target) == "jit":
            device = call and any(k.arg == "device" and isinstance(k.value, ast.Constant) and k.value.value
                                  for k in call.keywords)
            return not device
    return False


def kernels(source: str) -> list[ast.FunctionDef]:
    """The kernel functions (`@cuda.jit`, not device functions) of a module's source."""
    return [n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and _is_kernel(n)]


def violations(source: str, holders: set[str] | None = None) -> list[Violation]:
    """Every barrier of the module's kernels that some threads of a block may not reach."""
    holders = device_barriers().holders if holders is None else holders
    return [v for fn in kernels(source) for v in _Walk(fn, holders, params_uniform=True).run()]


def function_violations(fn: ast.FunctionDef, holders: set[str]) -> list[Violation]:
    """The same for a device function, whose parameters may differ between threads."""
    return _Walk(fn, holders, params_uniform=False).run()


def barrier_sites(fn: ast.FunctionDef, holders: set[str] | None = None) -> list[tuple[int, int, str]]:
    """(line, enclosing loops, callee) of every barrier call in a kernel."""
    walk = _Walk(fn, device_barriers().holders if holders is None else holders, params_uniform=True)
    walk.run()
    return walk.sites


def block_barriers(fn: ast.FunctionDef) -> tuple[int, int]:
    """The block-barrier instructions a GPU build of kernel `fn` holds once its device functions are
    inlined: (those outside loops nested in its outermost loop, those inside, which unrolling may copy)."""
    counts = device_barriers(simulator=False).block_counts
    outside = inside = 0
    for _, loops, callee in barrier_sites(fn):
        n = 1 if callee.startswith("cuda.") and callee.rsplit(".", 1)[-1] in BLOCK_BARRIERS else counts.get(callee, 0)
        outside, inside = (outside + n, inside) if loops <= 1 else (outside, inside + n)
    return outside, inside


def check(source: str, what: str) -> None:
    """Raises a CompileError naming each kernel and line of `source` where a barrier may be skipped."""
    found = violations(source)
    if found:
        lines = "\n  ".join(v.text() for v in found)
        raise CompileError(f"{what}: a barrier that not every thread of the block reaches would hang the GPU "
                           f"(line numbers are the kernel module's):\n  {lines}")

"""An scf.for whose body compiles, as one numba function: the loop runs natively.

The body's fused groups are called as numba functions from a generated numba loop (the generated
kernels of codegen.py, their threads splitting the body's parallel loops, never the carried
dimension), and the few leftovers that numba can write inline (a concatenation, a dynamic slice or
update) are written in the loop itself. Every buffer is allocated once before the loop: a body
temporary's buffer is reused by later values of the same shape once it is dead (one iteration's live
set, `LoopPlan`), and each carried value is double-buffered (the yielded buffer and the carried one
trade places at the end of an iteration). A dynamic index out of range ends the loop with the
iteration's number; the runner then runs the loop from the host, which raises numpy's error naming
that iteration (`scf.run_for`), since the native loop never writes into its operands.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ...dialects.reference import weight_data
from ...dialects.scf import RUNNERS, run_for
from ...ir.core import Operation, OpResult, Value
from ...ir.opdef import Trait
from ...ir.program import Program
from ..base import KernelParam, ParamRole
from ..kernel_cache import default_cache
from ..loopnest import PARALLEL_THRESHOLD
from .backend import NUMBA_DTYPES, contraction_of, contraction_operands, epilogue_target, has_epilogue
from .codegen import generate
from .kernels import key_parts_for, module_header, numba_type
from .numpy_blas import addresses as blas_addresses
from .timing import timed_compile
from .whole_graph import GEMM_IMPORT, dot_call, kernel_functions

INLINE = frozenset({"np.concatenate", "np.dynamic_slice", "np.dynamic_update_slice"})
# linear algebra numba runs through LAPACK, on one matrix (not a batch) of floats; a singular one
# raises numba's LinAlgError, and the host then runs the loop to raise numpy's, naming the iteration
LINALG = {"np.solve": "np.linalg.solve", "np.inv": "np.linalg.inv"}
_SKIPPED = frozenset({"mem.alloc", "mem.free", "mem.reuse", "func.return"})

_HELPERS = '''

@njit(cache=True)
def _index_start(s, n):
    """numpy's integer index s into an axis of n: the start, or -1 when out of range."""
    if s < -n or s >= n:
        return -1
    return s + n if s < 0 else s


@njit(cache=True)
def _slice_start(s, k, n):
    """The start of numpy's slice s:s+k of an axis of n, or -1 when it holds other than k elements."""
    lo = min(max(s + n if s < 0 else s, 0), n)
    e = s + k
    hi = min(max(e + n if e < 0 else e, 0), n)
    if max(hi - lo, 0) != k:
        return -1
    return lo if k else 0
'''


@dataclass
class LoopPlan:
    """The memory of one native loop: buffers allocated once, reused every iteration."""

    buffers: list[tuple[list[str], int]] = field(default_factory=list)   # (the values it holds, bytes)
    carried_bytes: int = 0            # the carried values, each twice (double-buffered)

    @property
    def iteration_bytes(self) -> int:
        """One iteration's live set: the body's temporaries."""
        return sum(nbytes for _, nbytes in self.buffers)


def why_not_native(body: Program, nested: dict[int, NativeLoop]) -> str | None:
    """None when every op of the compiled body can run inside a native loop, else why not. `nested`:
    the native loops of the body's own loops, by op uid (they run inside this one)."""
    for v in body.inputs:
        if not v.type.is_static or v.type.dtype not in NUMBA_DTYPES:
            return f"the body's argument %{v.name} is {v.type}: the native loop takes static numba types"
    for op in body.body.ops:
        reason = _why_not_op(op, nested)
        if reason is not None:
            return reason
    return None


def _why_not_op(op: Operation, nested: dict[int, NativeLoop]) -> str | None:
    if op.name in _SKIPPED or op.has(Trait.CONSTANT) or op.name == "np.weight" or op.uid in nested:
        return None
    where = f"{op.name} (%{op.results[0].name})" if op.results else op.name
    odd = next((v.type for v in (*op.operands, *op.results) if not v.type.is_static
                or v.type.dtype not in NUMBA_DTYPES), None)
    if odd is not None:
        return f"{where} is on {odd}: the native loop takes static shapes of numba's dtypes"
    if op.name == "jit.group":
        con = contraction_of(op)
        if con is not None and (con.name != "np.matmul" or con.result.type.dtype.name not in ("float32", "float64")
                                or (con.operands[0].type.rank > 2 and con.operands[1].type.rank > 2)):
            return f"{where} holds a {con.name} that numba's BLAS calls do not run inside a loop"
        return None
    if op.has(Trait.VIEW) or op.name in INLINE:
        return None
    if op.name in LINALG:
        a = op.operands[0].type
        if a.rank != 2 or op.operands[-1].type.rank > 2 or a.dtype.name not in ("float32", "float64"):
            return f"{where} on {', '.join(str(v.type) for v in op.operands)}: inside a loop numba solves one " \
                   "float matrix, not a batch"
        return None
    return f"{where} runs on the host (no numba code for it inside a loop)"


class _Source:
    """The source of one native loop function over a compiled body."""

    def __init__(self, n_carried: int, n_captures: int, nested: dict[int, NativeLoop], prefix: str = ""):
        self.n, self.n_captures = n_carried, n_captures
        self.nested, self.prefix = nested, prefix   # a loop inside another names its functions apart
        self.setup: list[str] = []         # allocations before the loop
        self.lines: list[str] = []         # one iteration
        self.names: dict[Value, str] = {}
        self.kernels: dict[str, str] = {}  # kernel source -> its function name prefix
        self.sources: list[str] = []
        self.constants: list[np.ndarray] = []   # body constants and weights, passed in
        self.blas = False
        self.plan = LoopPlan()
        self._free: dict[tuple, list[str]] = {}    # (shape, dtype) -> dead buffers
        self._buffer_of: dict[str, int] = {}       # buffer variable -> its index in plan.buffers
        self.owned: set[str] = set()               # buffer variables allocated here
        self._last: dict[Value, int] = {}
        self._copied = False
        self._k = 0                                # the op being emitted, in its region's order
        self._writable: set[str] = set()           # carried buffers the body may update in place
        self._shared: set[str] = set()             # an if side's arguments: the body's, never freed or written there

    # -- buffers ----------------------------------------------------------------------
    def buffer(self, value: Value) -> str:
        """A buffer for `value`: a dead one of its shape and dtype, else one allocated before the loop."""
        t = value.type
        key = (tuple(t.shape), t.dtype)
        free = self._free.get(key)
        if free:
            var = free.pop()
            self.plan.buffers[self._buffer_of[var]][0].append(value.name)
        else:
            var = f"b{len(self.plan.buffers)}"
            self._buffer_of[var] = len(self.plan.buffers)
            self.plan.buffers.append(([value.name], t.nbytes()))
            self.setup.append(f"{var} = np.empty({tuple(int(d) for d in t.shape)!r}, np.{t.dtype.name})")
            self.owned.add(var)
        self.names[value] = var
        return var

    def release(self, op: Operation, k: int) -> None:
        """Returns the buffers of the values whose last use is op number `k`."""
        for v in op.operands:
            var = self.names.get(v)
            if var in self.owned and var not in self._shared and self._last.get(v) == k and self._holder(var) is v:
                self._free.setdefault((tuple(v.type.shape), v.type.dtype), []).append(var)

    def _holder(self, var: str) -> Value | None:
        return next((v for v, n in reversed(self.names.items()) if n == var), None)

    # -- the body -----------------------------------------------------------------------
    def render_for(self, body: Program) -> str:
        """`for i in range(lo, hi, step)` over the body."""
        self.setup += ["iv = np.empty(1, np.int64)", "iv0 = iv.reshape(())"]
        # one region reads the carried values (a while's two would both read them)
        self._writable = {f"c{j}" for j in range(self.n)}
        self.emit(body, ["iv0", *self._carry_names()])
        self._yields(body)
        return self._function(["lo", "hi", "step"], ["for i in range(lo, hi, step):", "    iv[0] = i"])

    def render_while(self, before: Program, after: Program) -> str:
        """The before region's condition, then the after region, until the condition fails; an
        iteration past `bound` (max_iterations) ends the loop as an error does."""
        self.emit(before, self._carry_names())
        cond = self.names[before.outputs[0]]
        self.lines += [f"if not {cond}[()]:", "    break", "if it >= bound:", "    return it, " + self._carried()]
        self.emit(after, self._carry_names())
        self._yields(after)
        return self._function(["bound"], ["while True:"])

    def _carry_names(self) -> list[str]:
        if not self._copied:            # the initial values, copied once: the loop never writes its operands
            self.setup += [f"c{j} = x{j}.copy()" for j in range(self.n)]
            self._copied = True
        return [f"c{j}" for j in range(self.n)] + [f"k{j}" for j in range(self.n_captures)]

    def emit(self, body: Program, names: list[str]) -> None:
        """One region's ops into the iteration, its arguments bound to `names`; its dead buffers are
        reused within it."""
        self.names.update(zip(body.inputs, names))
        self._last, self._free = _last_uses(body), {}
        ops = [op for op in body.body.ops if op.name not in _SKIPPED]
        for k, op in enumerate(ops):
            self._k = k
            self._op(op, body)
            self.release(op, k)

    def _op(self, op: Operation, body: Program) -> None:
        if op.has(Trait.CONSTANT) or op.name == "np.weight":
            self.names[op.results[0]] = f"q{len(self.constants)}"
            self.constants.append(_plain(_constant(body, op.results[0])))
        elif op.uid in self.nested and op.name == "scf.if":
            self._branch(op)
        elif op.uid in self.nested:
            self._inner_loop(op)
        elif op.has(Trait.VIEW):
            self.names[op.result] = var = f"v{len(self.names)}"
            self.lines.append(f"{var} = {self.names[op.operands[0]]}.reshape({_shape(op.result.type)})")
        elif op.name == "jit.group":
            self._group(op)
        elif op.name in LINALG:
            self._linalg(op)
        else:
            getattr(self, "_" + op.name[3:])(op)

    def _group(self, op: Operation) -> None:
        ins = [self.names[v] for v in op.operands]
        outs = [self.buffer(r) for r in op.results]
        con = contraction_of(op)
        extra: list[str] = []
        if con is not None:
            extra = [self._contraction(op, con, ins, outs)]
            if not has_epilogue(op, con):
                return
        kernel = generate(op.body, "kernel", [con.result] if con is not None else [])
        prefix = self._kernel(kernel)
        lists = {ParamRole.INPUT: ins, ParamRole.INTERMEDIATE: extra, ParamRole.OUTPUT: outs}
        arrays = [lists[p.role][p.index] for p in kernel.params if p.is_array]
        if kernel.flat:
            arrays = [f"{a}.reshape(-1)" for a in arrays]
            dims = [math.prod(int(d) for d in op.results[0].type.shape)]
            size = dims[0]
        else:
            dims = [int(d) for d in kernel.plan.space]
            size = math.prod(dims)
        which = "par" if size >= PARALLEL_THRESHOLD else "seq"
        self.lines.append(f"{prefix}_{which}({', '.join(arrays + [str(d) for d in dims])})")

    def _inner_loop(self, op: Operation) -> None:
        """A loop of the body with a native loop of its own: its function, written beside this one and
        called each iteration; where it stops at an error, this loop stops too (the host reruns it)."""
        inner = self.nested[op.uid]
        sub = _Source(len(op.results), len(inner.carried) - len(op.results), inner.nested,
                      f"{self.prefix}l{op.uid}_")
        counted = op.name == "scf.for"
        self.sources.append(sub.render_for(inner.bodies[0]) if counted else sub.render_while(*inner.bodies))
        qs = [f"q{len(self.constants) + j}" for j in range(len(sub.constants))]
        self.constants += sub.constants
        self.blas |= sub.blas
        bound = inner.op.attrs.get("max_iterations")
        bounds = [f"{self.names[v]}[()]" for v in op.operands[:3]] if counted else \
            [str(_UNBOUNDED if bound is None else bound)]
        arrays = [self.names[v] for v in (op.operands[3:] if counted else op.operands)]
        failed = f"f{len(self.lines)}"
        args = ", ".join([*bounds, *arrays, *qs] + (["blas"] if sub.blas else []))
        self.lines += [f"{failed}, {failed}r = {sub.prefix}loop({args})", f"if {failed} >= 0:",
                       "    return it, " + self._carried()]
        for j, v in enumerate(op.results):
            self.names[v] = f"{failed}r[{j}]"

    def _branch(self, op: Operation) -> None:
        """An if of the body, both sides written in place under a test of the predicate: the side taken
        runs its ops and copies its yields into the results' buffers."""
        branch = self.nested[op.uid]
        outs = [self.buffer(r) for r in op.results]
        args = [self.names[v] for v in op.operands[1:]]
        self.lines.append(f"if {self.names[op.operands[0]]}[()]:")
        for k, side in enumerate(branch.bodies):
            if k:
                self.lines.append("else:")
            start = len(self.lines)
            self._side(side, args, outs, branch.nested)
            self.lines[start:] = ["    " + line for line in self.lines[start:]] or ["    pass"]

    def _side(self, side: Program, args: list[str], outs: list[str], nested: dict) -> None:
        """One side of an if: its ops with their own buffers and liveness; the body's values it reads
        are neither freed nor written in place there."""
        saved = self._last, self._free, self._k, self._shared, self._writable, self.nested
        self._shared, self._writable, self.nested = self._shared | set(args), set(), {**self.nested, **nested}
        self.emit(side, args)
        for out, v in zip(outs, side.outputs):
            self._put(out, self.names[v], _dims(v.type))
        self._last, self._free, self._k, self._shared, self._writable, self.nested = saved

    def _kernel(self, kernel) -> str:
        body = kernel_functions(kernel)
        if body not in self.kernels:
            self.kernels[body] = prefix = f"{self.prefix}g{len(self.kernels)}"
            self.sources.append(body.replace("def kernel_", f"def {prefix}_"))
        return self.kernels[body]

    def _contraction(self, group: Operation, con: Operation, ins: list[str], outs: list[str]) -> str:
        (a, ta), (b, tb) = ((ins[i], t) for i, t in contraction_operands(group.body, con))
        outputs = list(group.body.last_op.operands)
        if con.result in outputs:
            dst = outs[outputs.index(con.result)]
        else:
            k = epilogue_target(con, outputs)
            dst = outs[k] if k is not None else self.buffer(con.result)
        self.blas = True
        self.lines.append(dot_call(a, b, dst, con, ta, tb))
        return dst

    def _linalg(self, op: Operation) -> None:
        out, result = self.buffer(op.result), f"r{len(self.lines)}"
        self.lines.append(f"{result} = {LINALG[op.name]}({', '.join(self.names[v] for v in op.operands)})")
        self._put(out, result, _dims(op.result.type))

    def _concatenate(self, op: Operation) -> None:
        out = self.buffer(op.result)
        axis, start = op.attrs["axis"] % op.result.type.rank, 0
        for v in op.operands:
            extent = int(v.type.shape[axis])
            at = ["0"] * op.result.type.rank
            at[axis] = str(start)
            self._put(out, self.names[v], _dims(v.type), to=at)
            start += extent

    def _dynamic_slice(self, op: Operation) -> None:
        starts = self._region(op, op.operands[0], op.operands[1:])
        out = self.buffer(op.result)
        self._put(out, self.names[op.operands[0]], _dims(op.result.type), source=starts)

    def _dynamic_update_slice(self, op: Operation) -> None:
        x, update = op.operands[:2]
        starts = self._region(op, x, op.operands[2:])
        var = self.names[x]
        if self._dies_here(x, var) and not (isinstance(update, OpResult) and update.op.has(Trait.VIEW)):
            # x is read by nothing after this: its buffer takes the update in place (no copy of x)
            self.names[op.result] = var
            if var in self.owned:
                self.plan.buffers[self._buffer_of[var]][0].append(op.result.name)
        else:
            out = self.buffer(op.result)
            self._put(out, var, _dims(x.type))
            var = out
        self._put(var, self.names[update], _dims(update.type), to=starts)

    def _dies_here(self, value: Value, var: str) -> bool:
        """Whether `value`, in buffer `var`, is last read by the op being emitted and its buffer is this
        loop's own (not a capture, a constant or an operand)."""
        return self._last.get(value) == self._k and (var in self.owned or var in self._writable) \
            and var not in self._shared and self._holder(var) is value

    def _put(self, dst: str, src: str, shape: tuple[int, ...], to: list[str] | None = None,
             source: list[str] | None = None) -> None:
        """`dst[to + t] = src[source + t]` for every index t of `shape`, as loops: the IR matched the shapes,
        and numba's slice assignment would compile its shape-mismatch message (str, join) for every
        signature, which took most of a loop nest's compile."""
        depth = len(self.lines)
        ts = [f"t{depth}_{d}" for d in range(len(shape))]
        at = lambda starts: ", ".join(t if s in (None, "0") else f"{s} + {t}"  # noqa: E731
                                      for s, t in zip(starts or [None] * len(shape), ts)) or "()"
        loops = [f"{'    ' * d}for {t} in range({n}):" for d, (t, n) in enumerate(zip(ts, shape))]
        self.lines += loops + ["    " * len(shape) + f"{dst}[{at(to)}] = {src}[{at(source)}]"]

    def _region(self, op: Operation, x: Value, starts) -> list[str]:
        """The checked starts of a dynamic op along each axis of `x` ("0" where it takes the whole axis);
        the loop ends with the iteration's number where one is out of range."""
        shape = [int(d) for d in x.type.shape]
        index = ["0"] * len(shape)
        a = op.attrs
        for s, axis, k in zip(starts, a["axes"], a["sizes"]):
            var = f"s{len(self.lines)}"
            call = f"_index_start({self.names[s]}[()], {shape[axis]})" if axis in a["index_axes"] else \
                f"_slice_start({self.names[s]}[()], {k}, {shape[axis]})"
            self.lines += [f"{var} = {call}", f"if {var} < 0:", "    return it, " + self._carried()]
            index[axis] = var
        return index

    def _carried(self) -> str:
        return "(" + "".join(f"c{j}, " for j in range(self.n)) + ")"

    def _yields(self, body: Program) -> None:
        """Copies first (they may read carried values), then each carry trades buffers with its yield."""
        swaps, claimed = [], set()
        for j, v in enumerate(body.outputs):
            var = self.names[v]
            if var == f"c{j}" and var in self._writable:
                continue                     # updated in place, or passed through: already where it goes
            if var in self.owned and var not in claimed and isinstance(v, OpResult):
                claimed.add(var)
                swaps.append((f"c{j}", var))
            else:
                spare = f"y{j}"
                self.setup.append(f"{spare} = np.empty_like(c{j})")
                self._put(spare, var, _dims(v.type))
                swaps.append((f"c{j}", spare))
        self.lines += [f"{c}, {b} = {b}, {c}" for c, b in swaps]
        self.plan.carried_bytes = 2 * sum(v.type.nbytes() for v in body.outputs)

    def _function(self, bounds: list[str], head: list[str]) -> str:
        xs = [f"x{j}" for j in range(self.n)]
        ks = [f"k{j}" for j in range(self.n_captures)]
        qs = [f"q{j}" for j in range(len(self.constants))]
        params = ", ".join([*bounds, *xs, *ks, *qs] + (["blas"] if self.blas else []))
        body = self.setup + ["it = 0", *head]
        body += ["    " + line for line in self.lines] + ["    it += 1", "return -1, " + self._carried()]
        function = "@njit(fastmath=FLAGS, error_model=\"numpy\", cache=True)\n" + \
            f"def {self.prefix}loop({params}):\n" + "\n".join("    " + line for line in body)
        return "\n\n\n".join([*self.sources, function])


def _last_uses(body: Program) -> dict[Value, int]:
    """Each value's last reader among the body's ops (memory ops left out); outputs live to the end,
    and a value lives as long as the views of it (they read its buffer)."""
    ops = [op for op in body.body.ops if op.name not in _SKIPPED]
    last: dict[Value, int] = {}
    for k, op in enumerate(ops):
        for v in op.operands:
            last[v] = k
    for v in body.outputs:
        last[v] = len(ops)
    for op in reversed(ops):
        if op.has(Trait.VIEW) and op.result in last:
            last[op.operands[0]] = max(last[op.operands[0]], last[op.result])
    return last


def _dims(t) -> tuple[int, ...]:
    return tuple(int(d) for d in t.shape)


def _shape(t) -> str:
    return repr(_dims(t))


@dataclass
class NativeLoop:
    """Runs an scf.for or scf.while as one native call: called with the op's operands, gives its results.
    Written first, compiled by `build` (a loop inside another native loop is only written, into it)."""

    op: Operation
    source: str                             # its module: the loop function and the body's kernels
    signature: tuple
    constants: list[np.ndarray]
    blas: np.ndarray | None
    host: Callable[[int, list], list]       # runs a region from the host (the error path)
    plan: LoopPlan
    bodies: list[Program]                   # its compiled regions, for a loop around it to inline it
    carried: list[Value]                    # the body's carried values and captures
    nested: dict[int, NativeLoop]           # the native loops of its own body's loops
    cache: object = None                    # the kernel cache it is built in (None: the default)
    fn: Callable | None = None              # the compiled loop, once built

    def build(self) -> str:
        """Compiles the loop's module; '' when it runs natively, else why the host runs it."""
        parts = key_parts_for("loop:" + hashlib.sha256(self.source.encode()).hexdigest()[:16], str(self.signature),
                              self.source)
        entry = (self.cache or default_cache()).load(parts, self.source)
        try:
            timed_compile(entry.module.loop, self.signature)
        except Exception as e:  # numba's typing or lowering errors have many types: the host loop runs it
            return f"numba could not compile the native loop ({type(e).__name__}: {str(e).splitlines()[0]})"
        self.fn = entry.module.loop
        return ""

    def __call__(self, args: list) -> list:
        if self.op.name == "scf.for":
            bounds, arrays = [int(a) for a in args[:3]], args[3:]
            if bounds[2] == 0:
                return run_for(self.op, args, self.host)       # the step's own error
        else:
            bound = self.op.attrs["max_iterations"]
            bounds, arrays = [_UNBOUNDED if bound is None else bound], args
        extra = [self.blas] if self.blas is not None else []
        try:
            failed, results = self.fn(*bounds, *[_plain(a) for a in arrays], *self.constants, *extra)
        except Exception:  # a kernel's own check (numba raises it without the iteration): as below
            failed, results = 0, ()
        if failed >= 0:
            # the host loop raises numpy's error, naming the iteration: the native loop wrote into no operand
            return RUNNERS[self.op.name](self.op, args, self.host)
        return list(results)


_UNBOUNDED = 1 << 62


@dataclass
class NativeBranch:
    """An scf.if whose sides compile: written into the native loop around it (never built alone)."""

    op: Operation
    bodies: list[Program]                   # its compiled then and else regions
    nested: dict[int, NativeLoop | NativeBranch]

    def build(self) -> str:
        return ("an scf.if outside a native loop runs from the host: it calls the compiled region of the "
                "side taken, once")


_INT = KernelParam("n", ParamRole.DIM, np.dtype(np.int64))


def _array(t) -> KernelParam:
    return KernelParam("a", ParamRole.INPUT, t.dtype, t.rank)


def _constant(body: Program, value: Value) -> np.ndarray:
    """A body constant's or weight's array."""
    op = value.op
    if op.name == "np.weight":
        return np.asarray(weight_data(body, op.attrs["name"]))
    return np.asarray(op.attrs["value"].array)


def _plain(a) -> np.ndarray:
    """`a` as the writable C-contiguous array the loop is compiled for."""
    a = np.asarray(a)
    return a if a.flags.c_contiguous and a.flags.writeable else np.array(a, order="C")


def compile_loop(op: Operation, bodies: list[Program], host: Callable[[int, list], list],
                 options: dict, nested: dict[int, NativeLoop]) -> tuple[NativeLoop | None, str]:
    """The native loop of an scf.for or scf.while whose compiled regions are `bodies` (their own loops'
    native loops `nested`, by uid), written but not yet built; or None and why it runs from the host."""
    for body in bodies:
        reason = why_not_native(body, nested)
        if reason is not None:
            return None, reason
    if op.name == "scf.if":
        return NativeBranch(op, bodies, nested), ""
    n, counted = len(op.results), op.name == "scf.for"
    carried = bodies[0].inputs[1:] if counted else bodies[0].inputs
    gen = _Source(n, len(carried) - n, nested)
    text = gen.render_for(bodies[0]) if counted else gen.render_while(*bodies)
    header = '"""jitlab native loop."""\n\n' + module_header() + (GEMM_IMPORT if gen.blas else "") + _HELPERS
    source = header + "\n\n" + text + "\n"
    signature = tuple(numba_type(p) for p in [_INT] * (3 if counted else 1)
                      + [_array(v.type) for v in carried]
                      + [KernelParam("q", ParamRole.INPUT, q.dtype, q.ndim) for q in gen.constants]
                      + ([KernelParam("blas", ParamRole.BLAS, np.dtype(np.int64), 1)] if gen.blas else []))
    return NativeLoop(op, source, signature, gen.constants, blas_addresses() if gen.blas else None, host, gen.plan,
                      bodies, list(carried), nested, options.get("cache")), ""

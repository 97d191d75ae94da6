"""Readable numba source for one fused group.

Every group becomes one loop nest over its iteration space. The outer dims are
flattened into one `prange` loop (rows); inside a row, each reduction gets a loop over
the reduced dims that updates an accumulator, and a final loop writes the full-size
outputs. Values are emitted where their loop variables are bound, so anything that
depends only on the row (a reduction result, a per-row bias) is computed once per row.
An elementwise group is the same nest with no reductions and the last dim inside.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numba
import numpy as np

from ...dialects.np.writes import write_chain
from ...errors import CompileError
from ...ir.core import Operation, OpResult, Value
from ...ir.opdef import Trait
from ..base import KernelParam, ParamRole
from ..indexing import ZERO, Coord, Map, map_vars, operand_maps
from ..loopnest import REDUCTIONS, Plan, ctor, identity, is_flat, literal, normalize
from .scalar import SCALAR_RULES, TypeNames, wrapping

# Ops worth keeping in a row scratch rather than computing again in a later loop over the row.
EXPENSIVE = frozenset(f"np.{n}" for n in ("exp", "expm1", "exp2", "log", "log1p", "log2", "log10", "tanh", "erf",
                                          "sigmoid", "gelu", "sin", "cos", "tan", "pow", "atan", "asin", "acos",
                                          "sinh", "cosh", "asinh", "acosh", "atanh", "atan2"))

CHUNKS = 4 * numba.config.NUMBA_NUM_THREADS    # row chunks of a parallel reduction kernel
DIM_DTYPE = np.dtype(np.int64)         # loop extents are passed as int64 (numba's intp here)

@dataclass
class GeneratedKernel:
    """A group's kernel as the sources of its parallel and sequential variants."""

    par: str
    seq: str
    plan: Plan
    flat: bool                         # every array is passed viewed 1-D
    params: list[KernelParam]          # both variants take these, in order
    # The parallel variant's one prange loop may be split into parts run side by side (the
    # native kernels' threads): true of the loop nests here, not of a chain of writes.
    splittable: bool = False


@dataclass
class Scope:
    """A level of the loop nest: the variables it binds and the lines inside it."""

    parent: Scope | None
    binds: frozenset[str]
    header: str | None
    items: list = field(default_factory=list)
    cache: dict = field(default_factory=dict)
    open_child: int | None = None      # where hoisted lines go while a child loop is open

    def add(self, line) -> None:
        if self.open_child is None:
            self.items.append(line)
        else:
            self.items.insert(self.open_child, line)
            self.open_child += 1

    def render(self, indent: str) -> list[str]:
        lines, inner = ([indent + self.header], indent + "    ") if self.header else ([], indent)
        for item in self.items:
            lines += item.render(inner) if isinstance(item, Scope) else [inner + item]
        if self.header and not self.items:
            lines.append(inner + "pass")
        return lines


class KernelSource:
    """Builds the source of one kernel function for a group block.

    Backends that share this emitter subclass it: `rules` spells each elementwise op
    as a scalar expression, and `build` lays out the loop nest for the target."""

    rules: dict = SCALAR_RULES

    def __init__(self, block, plan: Plan, name: str, materialized: Sequence[Value] = (), flat: bool = False):
        self.block, self.plan, self.name, self.flat = block, plan, name, flat
        self.args = {a: f"a{i}" for i, a in enumerate(block.args)}
        self.materialized = list(materialized)     # values already in an array (a contraction's result)
        self.args.update((v, f"m{k}") for k, v in enumerate(self.materialized))
        self.outputs = list(block.last_op.operands)
        self._start()
        self.counter = 0
        self.vars_of: dict[str, frozenset[str]] = {}
        self.phase: int | None = None                 # the reduction loop being emitted, if any
        self.scratch: dict[tuple, tuple[str, int]] = {}  # value at map -> (row scratch, phase that wrote it)
        self.scratch_dtypes: dict[str, np.dtype] = {}

    def _start(self) -> None:
        """The function's parameters and its empty body."""
        self.params = self._params()
        self.root = Scope(None, frozenset(), f"def {self.name}({', '.join(p.name for p in self.params)}):")
        self.current = self.root

    def _params(self) -> list[KernelParam]:
        """Inputs, then values computed before the nest, then outputs, then the space's extents."""
        arrays = [(f"a{i}", ParamRole.INPUT, i, v) for i, v in enumerate(self.block.args)]
        arrays += [(f"m{k}", ParamRole.INTERMEDIATE, k, v) for k, v in enumerate(self.materialized)]
        arrays += [(f"o{j}", ParamRole.OUTPUT, j, v) for j, v in enumerate(self.outputs)]
        params = [KernelParam(name, role, v.type.dtype, 1 if self.flat else v.type.rank, tuple(v.type.shape), index)
                  for name, role, index, v in arrays]
        return params + [KernelParam(f"n{k}", ParamRole.DIM, DIM_DTYPE, shape=(), index=k)
                         for k in range(len(self.plan.space))]

    # -- scopes -------------------------------------------------------------------
    def open(self, binds: list[str], header: str) -> Scope:
        scope = Scope(self.current, frozenset(binds), header)
        self.current.open_child = len(self.current.items)
        self.current.items.append(scope)
        self.current = scope
        return scope

    def close(self) -> None:
        self.current = self.current.parent
        self.current.open_child = None

    def place(self, needs: frozenset[str]) -> Scope:
        """The outermost open scope where every variable in `needs` is bound."""
        scope, target = self.current, self.root
        while scope is not None:
            if scope.binds & needs:
                target = scope
                break
            scope = scope.parent
        return target

    def lookup(self, key) -> str | None:
        scope = self.current
        while scope is not None:
            if key in scope.cache:
                return scope.cache[key]
            scope = scope.parent
        return None

    def define(self, key, expr: str, needs: frozenset[str]) -> str:
        scope = self.place(needs)
        name = f"v{self.counter}"
        self.counter += 1
        scope.add(f"{name} = {expr}")
        scope.cache[key] = name
        self.vars_of[name] = needs
        return name

    # -- values ---------------------------------------------------------------------
    def emit(self, value: Value, m: Map) -> str:
        """The name holding `value` at map `m`, emitting whatever it needs first.

        Dependencies are emitted bottom-up from an explicit stack, so a chain of
        thousands of ops needs no deep recursion."""
        for dep, dm in self._dependencies(value, m):
            self._emit_one(dep, dm)
        return self._emit_one(value, m)

    def _operand_maps(self, op: Operation, m: Map) -> list[Map]:
        reduced = _strength_reduce(op)
        operands = op.operands[:1] if reduced is not None else op.operands
        return [self._flat_map(v, m) for v in operands] if self.flat else operand_maps(op, m)[:len(operands)]

    def _dependencies(self, value: Value, m: Map) -> list[tuple[Value, Map]]:
        """Values (with maps) `value` needs that are not emitted yet, operands before users."""
        order: list[tuple[Value, Map]] = []
        seen: set = set()
        stack = [(value, normalize(value, m), False)]
        while stack:
            v, vm, expanded = stack.pop()
            key = (id(v), vm)
            if expanded:
                order.append((v, vm))
                continue
            if key in seen or self.lookup(key) is not None or not self._needs_operands(v, key):
                continue
            seen.add(key)
            stack.append((v, vm, True))
            for operand, om in zip(v.op.operands, self._operand_maps(v.op, vm)):
                stack.append((operand, normalize(operand, om), False))
        return order[:-1]

    def _needs_operands(self, value: Value, key) -> bool:
        if value in self.args or not isinstance(value, OpResult) or key in self.scratch:
            return False
        op = value.op
        return not (op.has(Trait.CONSTANT) or op.has(Trait.REDUCTION))

    def _emit_one(self, value: Value, m: Map) -> str:
        m = normalize(value, m)
        key = (id(value), m)
        found = self.lookup(key)
        if found is not None:
            return found
        if key in self.scratch and self.scratch[key][1] != self.phase:
            return self.define(key, f"{self.scratch[key][0]}[{self._row_index()}]", self._inner_vars())
        if value in self.args:
            index = ", ".join(c.text() for c in m) if m else "()"
            return self.define(key, f"{self.args[value]}[{index}]", map_vars(m))
        if not isinstance(value, OpResult):
            raise CompileError(f"value %{value.name} has no definition in the group")
        op = value.op
        if op.has(Trait.CONSTANT):
            array = op.attrs["value"].array.reshape(-1)
            return self.define(key, literal(array[0] if array.size else 0, value.type.dtype), frozenset())
        if op.has(Trait.REDUCTION):
            raise CompileError(f"{op.name} result used before its reduction loop ran")
        reduced = _strength_reduce(op)
        if reduced is not None:
            return self._emit_one(op.operands[0], m) if reduced == "x" else self._square(op, m, key)
        rule = self.rules.get(op.name)
        operands = [self._emit_one(v, om) for v, om in zip(op.operands, self._operand_maps(op, m))]
        if rule is None:                       # injective and view ops forward their operand
            return operands[0]
        needs = frozenset().union(*(self.vars_of.get(o, frozenset()) for o in operands))
        name = self.define(key, rule(operands, op.attrs, TypeNames(op)), needs)
        if self.phase is not None and op.name in EXPENSIVE and len(value.uses) > 1 and needs & self._inner_vars():
            self._keep_in_scratch(key, name, value, needs)
        return name

    def _inner_vars(self) -> frozenset[str]:
        return frozenset(f"i{d}" for d in self.plan.inner)

    def _row_index(self) -> str:
        index = f"i{self.plan.inner[0]}"
        for d in self.plan.inner[1:]:
            index = f"({index} * n{d} + i{d})"
        return index

    def _keep_in_scratch(self, key, name: str, value: Value, needs: frozenset[str]) -> None:
        """Stores an expensive row value for the later loops over the row that need it again."""
        scratch = f"s{len(self.scratch_dtypes)}"
        self.scratch_dtypes[scratch] = value.type.dtype
        self.scratch[key] = (scratch, self.phase)
        # Stored at every index of the row, as later loops read it: inside the loop over each inner dim,
        # also those the value does not vary along (a broadcast operand).
        self.place(needs | self._inner_vars()).add(f"{scratch}[{self._row_index()}] = {name}")

    def _square(self, op: Operation, m: Map, key) -> str:
        base = self._emit_one(op.operands[0], self._operand_maps(op, m)[0])
        return self.define(key, f"({base} * {base})", self.vars_of.get(base, frozenset()))

    def _flat_map(self, value: Value, m: Map) -> Map:
        """In a flat kernel every array is 1-D: read at the loop index, or at 0 if size 1."""
        return (ZERO,) if all(d == 1 for d in value.type.shape) else m

    def store_all(self, outputs: list[tuple[int, Map]]) -> None:
        """Computes every output value first, then stores: an output buffer may also be an
        input (an in-place epilogue), and no store may come before a load it would clobber."""
        names = [self.emit(self.outputs[k], m) for k, m in outputs]
        for (k, m), name in zip(outputs, names):
            coords = ", ".join(c.text() for c in m) if m else "()"
            self.current.add(f"o{k}[{coords}] = {name}")

    # -- the nest ---------------------------------------------------------------------
    def build(self, parallel: bool) -> str:
        plan = self.plan
        loop = "prange" if parallel else "range"
        outer_vars = [f"i{d}" for d in plan.outer]
        total = " * ".join(f"n{d}" for d in plan.outer)
        chunk = None
        if parallel and plan.reductions and plan.outer:
            # Rows in a fixed number of chunks: each chunk allocates its own scratch row once.
            chunk = self.open(["c"], f"for c in prange({CHUNKS}):")
            first, last = f"c * ({total}) // {CHUNKS}", f"(c + 1) * ({total}) // {CHUNKS}"
            self.open(["t", *outer_vars], f"for t in range({first}, {last}):")
            self._split_rows(plan.outer)
        elif len(plan.outer) == 1:
            self.open(outer_vars, f"for i{plan.outer[0]} in {loop}(n{plan.outer[0]}):")
        elif plan.outer:
            self.open(["t", *outer_vars], f"for t in {loop}({total}):")
            self._split_rows(plan.outer)
        for k, red in enumerate(plan.reductions):
            self.phase = k
            self._reduction(red, parallel_inner=False)
        self.phase = None
        self._full_outputs(parallel and not plan.outer)
        self._row_outputs()
        self._allocate_scratch(chunk or self.root)
        return "\n".join(self.root.render(""))

    def _split_rows(self, outer: list[int]) -> None:
        """The multi-index of flattened row `t`."""
        rest = "t"
        for d in reversed(outer[1:]):
            self.current.add(f"i{d} = {rest} % n{d}")
            rest = f"({rest} // n{d})"
        self.current.add(f"i{outer[0]} = {rest}")

    def _allocate_scratch(self, scope: Scope) -> None:
        """Scratch rows for expensive values, allocated once per chunk of rows (or per call)."""
        size = " * ".join(f"n{d}" for d in self.plan.inner) or "1"
        for k, (name, dtype) in enumerate(self.scratch_dtypes.items()):
            scope.items.insert(k, f"{name} = np.empty({size}, np.{dtype.name})")

    def _inner_loops(self, parallel: bool) -> None:
        for k, d in enumerate(self.plan.inner):
            kind = "prange" if parallel and k == 0 else "range"
            self.open([f"i{d}"], f"for i{d} in {kind}(n{d}):")

    def _close_inner(self) -> None:
        for _ in self.plan.inner:
            self.close()

    def _full_map(self) -> Map:
        return tuple(Coord(f"i{d}") for d in range(len(self.plan.space)))

    def _reduction(self, op: Operation, parallel_inner: bool) -> None:
        init, combine = REDUCTIONS[op.name]
        acc = f"acc{self.counter}"
        self.counter += 1
        dtype = op.result.type.dtype
        self.current.add(f"{acc} = {identity(init, dtype)}")
        self._inner_loops(parallel_inner)
        value = self.emit(op.operands[0], self._full_map())
        floats = dtype.kind == "f"      # LLVM's maximum/minimum vectorize a float reduction; ints use a select
        if dtype == np.int64 and op.name in ("np.sum", "np.prod"):
            self.current.add(f"{acc} = " + wrapping("int64", "+" if op.name == "np.sum" else "*", acc, value))
        elif floats and op.name in ("np.sum", "np.mean", "np.prod"):
            # only the accumulation may be reordered, so that LLVM vectorizes it (bits.radd)
            self.current.add(f"{acc} = {'rmul' if op.name == 'np.prod' else 'radd'}({acc}, {value})")
        else:
            self.current.add(f"{acc} = " + combine.format(acc=acc, v=value, max="fmaximum" if floats else "_maximum",
                                                         min="fminimum" if floats else "_minimum"))
        self._close_inner()
        if op.name == "np.mean":
            count = " * ".join(f"n{d}" for d in self.plan.inner) or "1"
            self.current.add(f"{acc} = {acc} / {ctor(dtype)}({count})")
        self.current.cache[(id(op.result), normalize(op.result, self._result_map(op)))] = acc
        self.vars_of[acc] = frozenset(f"i{d}" for d in self.plan.outer)

    def _result_map(self, op: Operation) -> Map:
        axes = set(op.attrs["axes"])
        rank = op.operands[0].type.rank
        if op.attrs["keepdims"]:
            return tuple(ZERO if d in axes else Coord(f"i{d}") for d in range(rank))
        return tuple(Coord(f"i{d}") for d in range(rank) if d not in axes)

    def _full_outputs(self, parallel: bool) -> None:
        full = [k for k, v in enumerate(self.outputs) if self._is_full(v)]
        if not full:
            return
        self._inner_loops(parallel)
        self.store_all([(k, self._full_map()) for k in full])
        self._close_inner()

    def _row_outputs(self) -> None:
        self.store_all([(k, self._row_map(v)) for k, v in enumerate(self.outputs) if not self._is_full(v)])

    def _is_full(self, value: Value) -> bool:
        return self.flat or value.type.shape == tuple(self.plan.space)

    def _row_map(self, value: Value) -> Map:
        """Where a row-level output is written: the space without its reduced dims, either
        dropped or kept as size 1."""
        if isinstance(value, OpResult) and value.op.has(Trait.REDUCTION):
            return self._result_map(value.op)
        rank, space = value.type.rank, self.plan.space
        if rank == len(space):
            return tuple(ZERO if d in self.plan.inner else Coord(f"i{d}") for d in range(rank))
        if rank == len(self.plan.outer):
            return tuple(Coord(f"i{d}") for d in self.plan.outer)
        raise CompileError(f"output %{value.name} {value.type} is neither full-size nor row-sized")


def _splat_value(value: Value):
    if isinstance(value, OpResult) and value.op.name == "np.constant":
        array = value.op.attrs["value"].array
        if array.size and (array == array.reshape(-1)[0]).all():
            return array.reshape(-1)[0]
    return None


def _strength_reduce(op: Operation) -> str | None:
    """x ** 2 is x * x and x ** 1 is x, exactly (numpy's own fast paths), when the shapes agree."""
    if op.name != "np.pow" or op.operands[0].type.shape != op.result.type.shape:
        return None
    exponent = _splat_value(op.operands[1])
    if exponent == 2:
        return "square"
    if exponent == 1:
        return "x"
    return None


def plan_group(block) -> Plan:
    """The iteration plan of a group: its reductions decide the rows, else the last dim."""
    reductions = [op for op in block.ops if op.has(Trait.REDUCTION)]
    if reductions:
        space = reductions[0].operands[0].type.shape
        axes = sorted(reductions[0].attrs["axes"])
        return Plan(space, [d for d in range(len(space)) if d not in axes], axes, reductions)
    outputs = block.last_op.operands
    space = max((v.type.shape for v in outputs), key=len)
    rank = len(space)
    return Plan(space, list(range(rank - 1)), [rank - 1] if rank else [])


def generate(block, name: str, materialized: Sequence[Value] = ()) -> GeneratedKernel:
    """Sources of `{name}_par` (prange rows) and `{name}_seq`, the plan they follow, and
    the parameters they take."""
    if write_chain(block):
        from .writes import generate_writes  # writes.py builds on this module's emitter

        return generate_writes(block, name)
    plan = plan_group(block)
    flat = is_flat(block, plan)
    if flat:
        plan = Plan((None,), [], [0])
    par, seq = (KernelSource(block, plan, f"{name}_{suffix}", materialized, flat) for suffix in ("par", "seq"))
    sequential = seq.build(False)
    if raises(sequential):
        # an error raised in prange's threads is lost (numba reports none, the result is wrong):
        # a kernel that checks its input runs in order whatever its size
        return GeneratedKernel(sequential.replace(f"def {name}_seq(", f"def {name}_par(", 1), sequential, plan, flat,
                               seq.params)
    return GeneratedKernel(par.build(True), sequential, plan, flat, par.params, splittable=True)


RAISING_HELPERS = ("_int_pow_checked",)      # helpers.py functions that raise InputError


def raises(source: str) -> bool:
    """Whether generated code can raise an error: a check of its own or a helper that raises."""
    return "raise " in source or any(f"{helper}(" in source for helper in RAISING_HELPERS)

"""What the numba backends' loop nests share, whatever hardware runs them.

A group is one loop nest over its iteration space (`Plan`); every value is read at an
index map, normalized so that equal elements have one map (`normalize`); a reduction
starts from its identity and folds each element in with its combiner (`REDUCTIONS`);
constants are spelled as typed numba literals. numba_cpu lays the nest out as prange
rows, numba_cuda as grid-stride loops over threads and blocks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..ir.core import Operation, Value
from ..ir.opdef import Trait
from .base import ParamRole
from .indexing import ZERO, Map

PARALLEL_THRESHOLD = 1 << 15           # elements below which threads cost more than they save


@dataclass
class Plan:
    """How a group is iterated: its space, which dims are rows and which are inner."""

    space: tuple                       # the iteration shape (ints or symbolic dims)
    outer: list[int]                   # dims flattened into the parallel row loop
    inner: list[int]                   # dims looped over inside a row (the reduced dims)
    reductions: list[Operation] = field(default_factory=list)


# Each reduction op: its accumulator's identity (a kind `identity` spells for a dtype) and its
# combiner, a format over the accumulator {acc}, the element {v} and the backend's {max} and {min}.
REDUCTIONS = {
    "np.sum": ("zero", "({acc} + {v})"), "np.mean": ("zero", "({acc} + {v})"),
    "np.prod": ("one", "({acc} * {v})"), "np.max": ("lowest", "{max}({acc}, {v})"),
    "np.min": ("highest", "{min}({acc}, {v})"), "np.any": ("false", "({acc} or {v})"),
    "np.all": ("true", "({acc} and {v})"),
}

# Which of a call's argument lists (inputs, outputs, extra) each array parameter of a group's
# kernel is taken from: `run(inputs, outputs, ..., extra)` in both backends.
ARGUMENT_LISTS = {ParamRole.INPUT: 0, ParamRole.OUTPUT: 1, ParamRole.INTERMEDIATE: 2}


def identity(kind: str, dtype: np.dtype) -> str:
    """The literal a reduction's accumulator starts from: `kind` is the first entry of REDUCTIONS."""
    dtype = np.dtype(dtype)
    if kind in ("false", "true"):
        return "False" if kind == "false" else "True"
    if kind in ("zero", "one"):
        return literal(0 if kind == "zero" else 1, dtype)
    if dtype.kind == "f":
        return literal(-np.inf if kind == "lowest" else np.inf, dtype)
    info = np.iinfo(dtype) if dtype.kind in "iu" else None
    if info is None:
        return "False" if kind == "lowest" else "True"
    return literal(info.min if kind == "lowest" else info.max, dtype)


def normalize(value: Value, m: Map) -> Map:
    """Size-1 dims are always read at index 0: one map per distinct element read."""
    if len(m) != value.type.rank:       # flat kernels index every array 1-D
        return m
    return tuple(ZERO if d == 1 else c for c, d in zip(m, value.type.shape))


def is_flat(block, plan: Plan) -> bool:
    """True when every value is read at the full index or broadcast whole (a scalar):
    then all arrays can be viewed 1-D and the group is one contiguous loop."""
    if plan.reductions or len(plan.space) <= 1:
        return False
    space = tuple(plan.space)
    for op in block.ops:
        if op.has(Trait.TERMINATOR) or op.has(Trait.CONSTANT):
            continue
        if not op.has(Trait.ELEMENTWISE):
            return False
        for v in list(op.operands) + op.results:
            size_one = all(d == 1 for d in v.type.shape)
            if v.type.shape != space and not size_one:
                return False
    return all(v.type.shape == space for v in block.last_op.operands)


def reads_result_in_place(con: Operation) -> bool:
    """True when every op downstream of the contraction reads it elementwise at its own
    element: the element computed at an index is finished there alone (a CUDA thread needs
    no other thread's result), and no other index reads it (an epilogue may overwrite it)."""
    shape = con.result.type.shape
    stack, seen = [con.result], set()
    while stack:
        value = stack.pop()
        for user in value.users:
            if user.has(Trait.TERMINATOR) or id(user) in seen:
                continue
            if not user.has(Trait.ELEMENTWISE) or user.result.type.shape != shape:
                return False
            seen.add(id(user))
            stack.append(user.result)
    return True


def ctor(dtype: np.dtype) -> str:
    """The numba-side constructor of a dtype (np.float32, np.bool_, ...)."""
    dtype = np.dtype(dtype)
    return "np.bool_" if dtype.kind == "b" else f"np.{dtype.name}"


def literal(value, dtype: np.dtype) -> str:
    """A typed scalar literal numba folds into the kernel."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return "True" if bool(value) else "False"
    if dtype.kind == "f":
        return f"np.{dtype.name}({_float_text(float(value))})"
    if dtype.kind == "c":
        value = complex(value)
        return f"np.{dtype.name}(complex({_float_text(value.real)}, {_float_text(value.imag)}))"
    return f"np.{dtype.name}({int(value)})"


def _float_text(v: float) -> str:
    return repr(v) if np.isfinite(v) else ("np.nan" if np.isnan(v) else ("np.inf" if v > 0 else "-np.inf"))

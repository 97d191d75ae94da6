"""Checking call-time arguments against a program's inputs and binding its symbols."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..backends.device_arrays import device_array_meta
from ..errors import InputError
from ..ir.dtypes import DTYPE_NAMES, dtype_from_name, dtype_name
from ..ir.program import Program
from ..ir.shapes import Sym, evaluate
from ..ir.types import TensorType

SUPPORTED_DTYPES = frozenset(dtype_from_name(n) for n in DTYPE_NAMES)


def _describe(array) -> str:
    dtype = np.dtype(array.dtype)
    return f"{dtype_name(dtype) if dtype in SUPPORTED_DTYPES else dtype}{list(array.shape)}"


def native_dtype(dtype) -> np.dtype:
    """`dtype` in this machine's byte order: a big-endian f32 array is an f32 input."""
    dtype = np.dtype(dtype)
    return dtype if dtype.isnative else dtype.newbyteorder("=")


def bind_keywords(names: Sequence[str], args: Sequence, kwargs: dict, what: str) -> list:
    """The arguments in input order, keywords given by input name; InputError names a bad keyword."""
    names = list(names)
    unknown = [k for k in kwargs if k not in names]
    if unknown:
        raise InputError(f"{what} has no input named {unknown[0]!r}; its inputs are {', '.join(names)}")
    if len(args) > len(names):
        raise InputError(f"{what} takes {len(names)} input(s) ({', '.join(names)}), got {len(args)}")
    twice = [n for n in names[:len(args)] if n in kwargs]
    if twice:
        raise InputError(f"{what} got input {twice[0]!r} twice, by position and by keyword")
    missing = [n for n in names[len(args):] if n not in kwargs]
    if missing:
        raise InputError(f"{what} is missing input(s) {', '.join(missing)}; its inputs are {', '.join(names)}")
    return [*args, *(kwargs[n] for n in names[len(args):])]


def bind_symbols(names: Sequence[str], types: Sequence[TensorType], shapes: Sequence[tuple[int, ...]],
                 constraints=()) -> dict[str, int]:
    """Values of the symbols in `types` given concrete `shapes`; raises InputError on conflict.

    A dim that is a bare symbol binds it; a dim linear in one still-unbound symbol
    (`2*S+1`) is solved for it; every dim and constraint is then checked."""
    bindings: dict[str, int] = {}
    dims = [(d, n) for t, shape in zip(types, shapes) for d, n in zip(t.shape, shape) if isinstance(d, Sym)]
    progress = True
    while progress:
        progress = False
        for d, n in dims:
            unbound = d.symbols - bindings.keys()
            if len(unbound) == 1:
                (s,) = unbound
                value = _solve_linear(d, s, n, bindings)
                if value is not None:
                    bindings[s] = value
                    progress = True
    for name, t, shape in zip(names, types, shapes):
        for axis, (d, n) in enumerate(zip(t.shape, shape)):
            if isinstance(d, Sym) and d.symbols - bindings.keys():
                raise InputError(f"input '{name}': dim {axis} is {d}, whose symbols no input binds")
            expected = evaluate(d, bindings)
            if expected != n:
                raise InputError(f"input '{name}': dim {axis} must be {d} = {expected} "
                                 f"({_show(bindings)}), got {n}")
    for a, b in constraints:
        va, vb = evaluate(a, bindings), evaluate(b, bindings)
        if va != vb:
            why = constraints.reason(a, b) if hasattr(constraints, "reason") else ""
            why = f" ({why})" if why and why != "declared" else ""
            raise InputError(f"the program requires {a} == {b}{why}, but the inputs give {va} and {vb} "
                             f"({_show(bindings)}): {_origins(names, types, a, b)}")
    return bindings


def _origins(names: Sequence[str], types: Sequence[TensorType], *dims) -> str:
    """Where each symbol of `dims` comes from: 'B is dim 0 of input 'x''."""
    symbols = sorted({s for d in dims if isinstance(d, Sym) for s in d.symbols})
    found = []
    for s in symbols:
        where = next((f"dim {axis} of input '{name}'" for name, t in zip(names, types)
                      for axis, d in enumerate(t.shape) if isinstance(d, Sym) and s in d.symbols), "no input")
        found.append(f"{s} is {where}")
    return ", ".join(found)


def _show(bindings: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(bindings.items())) or "no symbols bound"


def _solve_linear(d: Sym, symbol: str, n: int, bindings: dict[str, int]) -> int | None:
    """The value of `symbol` making d == n, when d is linear in it with integer solution."""
    slope = offset = 0
    for mono, coeff in d.terms:
        if mono.count(symbol) > 1:
            return None
        term = coeff
        for s in mono:
            if s != symbol:
                term *= bindings[s]
        if symbol in mono:
            slope += term
        else:
            offset += term
    if slope == 0 or (n - offset) % slope:
        return None
    value = (n - offset) // slope
    return value if value >= 0 else None


def check_inputs(program: Program, args: Sequence, names: Sequence[str] | None = None
                 ) -> tuple[list[np.ndarray], dict[str, int]]:
    """The arguments as arrays of exactly the program's input types, and the symbol bindings."""
    names = list(names or program.own_input_names)
    types = [v.type for v in program.inputs]
    if len(args) != len(types):
        raise InputError(f"@{program.name} takes {len(types)} input(s) ({', '.join(names)}), "
                         f"got {len(args)}")
    arrays, shapes = [], []
    for name, t, a in zip(names, types, args):
        if not _is_array_like(a):
            raise InputError(f"input '{name}' must be an array, got {type(a).__name__}")
        meta = device_array_meta(a)           # device arrays stay where they are
        array = a if meta is not None else _host_array(a)
        seen = meta or array
        if seen.dtype != t.dtype:
            raise InputError(f"input '{name}' must have dtype {dtype_name(t.dtype)}, got "
                             f"{_describe(seen)} (convert it with .astype)")
        if seen.ndim != t.rank:
            raise InputError(f"input '{name}' must have rank {t.rank} ({t}), got {_describe(seen)}")
        arrays.append(array)
        shapes.append(tuple(seen.shape))
    bindings = bind_symbols(names, types, shapes, program.constraints)
    return arrays, bindings


def _host_array(a) -> np.ndarray:
    array = np.asarray(a)
    return array if array.dtype.isnative else array.astype(native_dtype(array.dtype))


def _is_array_like(a) -> bool:
    return (isinstance(a, (np.ndarray, np.generic, int, float, bool, memoryview)) or hasattr(a, "__array__")
            or device_array_meta(a) is not None)


def check_dims_nonnegative(program: Program, bindings: dict[str, int]) -> None:
    """Every symbolic dim in the program must be >= 0 for these bindings (slices rely on it)."""
    if not bindings:
        return
    for op in program.walk():
        for r in op.results:
            for d in r.type.shape:
                if isinstance(d, Sym) and evaluate(d, bindings) < 0:
                    raise InputError(f"{op.name} gives dim {d} = {evaluate(d, bindings)} < 0 for "
                                     + ", ".join(f"{k}={v}" for k, v in sorted(bindings.items())))

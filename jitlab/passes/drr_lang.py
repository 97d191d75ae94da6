"""The language of declarative rewrite rules: capture names, op patterns, target nodes
and constraints, how they print, and which captures they refer to. `drr` compiles
rules written in it into patterns; see its docstring for the whole language."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import PassError, VerifyError
from ..ir.attributes import Dense, format_attr
from ..ir.core import Operation, OpResult, Value
from ..ir.dtypes import dtype_name
from ..ir.opdef import Trait, get_opdef

# numpy's maximum/minimum return their second operand when the two compare equal, so
# maximum(0.0, -0.0) and maximum(-0.0, 0.0) differ: for floats they are not exactly commutative.
ORDER_SENSITIVE = frozenset({"np.maximum", "np.minimum"})


def exactly_commutative(op: Operation) -> bool:
    """Whether swapping the two operands of `op` gives bit-identical results."""
    if not op.has(Trait.COMMUTATIVE) or len(op.operands) != 2:
        return False
    return op.name not in ORDER_SENSITIVE or op.result.type.dtype.kind != "f"


# -- the DSL -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Var:
    """A named capture: `V.x`."""

    name: str

    def __str__(self) -> str:
        return f"${self.name}"


class _Vars:
    """`V.x` is the capture named x."""

    def __getattr__(self, name: str) -> Var:
        if name.startswith("__"):
            raise AttributeError(name)
        return Var(name)


V = _Vars()


class OpPat:
    """An op in a source or target pattern; a source pattern may accept several op names."""

    def __init__(self, names: str | Sequence[str], operands: Sequence[Any], attrs: dict[str, Any],
                 bind: str | None = None, ordered: bool = False):
        self.names = (names,) if isinstance(names, str) else tuple(names)
        for name in self.names:
            schema = get_opdef(name).attrs
            unknown = set(attrs) - set(schema)
            if unknown:
                raise VerifyError(f"pattern {name}: unknown attribute(s) {', '.join(sorted(unknown))}; "
                                  f"it takes {', '.join(schema) or 'none'}")
        self.operands, self.attrs = tuple(operands), dict(attrs)
        self.bind, self.ordered = bind, ordered

    @property
    def name(self) -> str:
        if len(self.names) != 1:
            raise PassError(f"the pattern {self} names several ops; a target must name one")
        return self.names[0]

    def named(self, name: str) -> OpPat:
        """The same pattern, also capturing the op's result as `name`."""
        return OpPat(self.names, self.operands, self.attrs, name, self.ordered)

    def in_order(self) -> OpPat:
        """The same pattern, matching operands only in the order written."""
        return OpPat(self.names, self.operands, self.attrs, self.bind, True)

    def size(self) -> int:
        return 1 + sum(o.size() for o in self.operands if isinstance(o, OpPat))

    def __str__(self) -> str:
        attrs = ", ".join(f"{k} = {show(v)}" for k, v in self.attrs.items())
        text = f"{'|'.join(self.names)}({', '.join(show(o) for o in self.operands)})"
        text += f" {{{attrs}}}" if attrs else ""
        return text + (f" as ${self.bind}" if self.bind else "")


class _Ops:
    """`P.neg(V.x)` is the pattern of op np.neg; `P("jit.yield", ...)` names any op."""

    def __getattr__(self, name: str) -> Callable[..., OpPat]:
        if name.startswith("__"):
            raise AttributeError(name)
        get_opdef(f"np.{name}")
        return lambda *operands, **attrs: OpPat(f"np.{name}", operands, attrs)

    def __call__(self, name: str, *operands: Any, **attrs: Any) -> OpPat:
        return OpPat(name, operands, attrs)

    def one_of(self, names: Sequence[str], *operands: Any, **attrs: Any) -> OpPat:
        """Source pattern: an op named any of `names` (full names, e.g. "np.floor")."""
        return OpPat(tuple(names), operands, attrs)


P = _Ops()


@dataclass(frozen=True)
class Const:
    """Source pattern: a value produced by np.constant, captured as `var`."""

    var: Var

    def __str__(self) -> str:
        return f"const {self.var}"


@dataclass(frozen=True)
class Many:
    """Source pattern: all remaining operands, captured as a tuple."""

    var: Var

    def __str__(self) -> str:
        return f"{self.var}..."


@dataclass(frozen=True, eq=False)
class Constant:
    """Target: an np.constant holding `value` (or `value(captures...)`, a scalar or an
    array) in the dtype of `like` (a capture, a target node or a dtype)."""

    value: Any
    like: Any

    def __str__(self) -> str:
        return f"constant({show(self.value)} like {show(self.like)})"


@dataclass(frozen=True, eq=False)
class Cast:
    """Target: `value` converted to `dtype` (a dtype or a function of captures); no op when
    it already has that dtype."""

    value: Any
    dtype: Any

    def __str__(self) -> str:
        return f"cast({show(self.value)} to {show(self.dtype)})"


@dataclass(frozen=True, eq=False)
class Native:
    """Target built in Python: `fn(rw, captures...)` returns the replacement value(s)."""

    fn: Callable[..., Any]

    def __str__(self) -> str:
        return f"native {getattr(self.fn, '__name__', 'fn')}"


def show(x: Any) -> str:
    if isinstance(x, (Var, OpPat, Const, Many, Constant, Cast, Native)):
        return str(x)
    if callable(x):
        name = getattr(x, "__name__", "fn")
        return f"{'fn' if name == '<lambda>' else name}({', '.join(param_names(x))})"
    if isinstance(x, np.dtype):
        return dtype_name(x)
    try:
        return format_attr(x)
    except TypeError:
        return repr(x)


def param_names(fn: Callable) -> tuple[str, ...]:
    return tuple(inspect.signature(fn).parameters)


def call_with(fn: Callable, captures: dict[str, Any], names: Sequence[str] | None = None) -> Any:
    """Calls `fn` with the captures its parameters name."""
    return fn(*(captures[n] for n in (names if names is not None else param_names(fn))))


# -- constraints ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Constraint:
    """A condition on captures: `fn(*captures[names])` returns True, or False / a reason."""

    text: str
    names: tuple[str, ...]
    fn: Callable[..., Any]

    def check(self, captures: dict[str, Any]) -> str | None:
        """None when it holds, else the reason recorded for the miss."""
        result = self.fn(*(captures[n] for n in self.names))
        if result is True:
            return None
        return f"needs {self.text}" + (f": {result}" if isinstance(result, str) and result else "")

    def __str__(self) -> str:
        return self.text


def check(text: str, fn: Callable[..., Any]) -> Constraint:
    """A constraint from a function whose parameters name captures: `check("p != q", lambda p, q: p != q)`."""
    return Constraint(text, param_names(fn), fn)


def describe(v: Value) -> str:
    if isinstance(v, OpResult):
        return (f"%{v.name} " if v.name else "") + f"from {v.op.name}"
    return f"input %{v.name}" if v.name else "a block argument"


def one_use(v: Var) -> Constraint:
    """The captured value has exactly one use (so replacing its user frees it)."""
    return Constraint(f"{v} to have one use", (v.name,),
                      lambda x: x.has_one_use or f"{describe(x)} has {len(x.uses)} uses")


def dtype_kind(v: Var, kinds: str, what: str) -> Constraint:
    """The captured value's dtype kind is among `kinds` ('f', 'iu', 'b', ...)."""
    return Constraint(f"{v} to be {what}", (v.name,),
                      lambda x: x.type.dtype.kind in kinds or f"it is {dtype_name(x.type.dtype)}")


def is_float(v: Var) -> Constraint:
    return dtype_kind(v, "f", "a float")


def is_integer(v: Var) -> Constraint:
    return dtype_kind(v, "iu", "an integer")


def const_array(v: Value) -> np.ndarray | None:
    """The array of a value produced by np.constant, else None."""
    if isinstance(v, OpResult) and v.op.name == "np.constant":
        return v.op.attrs["value"].array
    return None


def is_splat_of(array: np.ndarray, value: float) -> bool:
    """Every element equals `value`; zeros must also match its sign. Never for complex constants:
    numpy's complex product and quotient mix the parts, so z * 1, z / -1 or z + 0 can differ from
    z or -z in a zero's sign or an infinite part (inf * 0 is NaN), and no rule may fold them."""
    if array.dtype.kind == "c":
        return False
    with np.errstate(all="ignore"):
        target = np.asarray(value).astype(array.dtype)
    if array.size == 0 or not np.all(array == target):
        return False
    return array.dtype.kind != "f" or value != 0 or bool(np.all(np.signbit(array) == np.signbit(target)))


def splat(v: Var, value: float) -> Constraint:
    """The captured constant holds `value` in every element (signed zeros told apart)."""

    def holds(c):
        array = const_array(c)
        if array is None:
            return f"{describe(c)} is not a constant"
        return is_splat_of(array, value) or f"it is {format_attr(Dense(array))}"

    return Constraint(f"{v} to be a splat of {show(value)}", (v.name,), holds)


def same_type(a: Var, b: Var) -> Constraint:
    return Constraint(f"{a} and {b} to have the same type", (a.name, b.name),
                      lambda x, y: x.type == y.type or f"{x.type} vs {y.type}")



class TargetPrinter:
    """Prints a target with each node used more than once named once: `t0 = ...; ...`."""

    def __init__(self, targets: list[Any]):
        self.targets, self.uses, self.names, self.lets = targets, {}, {}, []
        for t in targets:
            self._count(t)

    def _count(self, node: Any) -> None:
        if not isinstance(node, (OpPat, Cast, Constant)):
            return
        self.uses[id(node)] = self.uses.get(id(node), 0) + 1
        if self.uses[id(node)] == 1:
            for child in _children(node):
                self._count(child)

    def text(self) -> str:
        results = ", ".join(self._show(t) for t in self.targets)
        return "; ".join(self.lets + [results])

    def _show(self, node: Any) -> str:
        if id(node) in self.names:
            return self.names[id(node)]
        if isinstance(node, OpPat):
            attrs = ", ".join(f"{k} = {self._show(v) if isinstance(v, Var) else show(v)}"
                              for k, v in node.attrs.items())
            operands = ", ".join(self._show(o) for o in node.operands)
            text = f"{node.name}({operands})" + (f" {{{attrs}}}" if attrs else "")
        elif isinstance(node, Cast):
            text = f"cast({self._show(node.value)} to {show(node.dtype)})"
        elif isinstance(node, Constant):
            text = f"constant({show(node.value)} like {self._show(node.like)})"
        else:
            return show(node)
        if self.uses.get(id(node), 0) > 1:
            self.names[id(node)] = f"t{len(self.names)}"
            self.lets.append(f"{self.names[id(node)]} = {text}")
            return self.names[id(node)]
        return text


def _children(node: Any) -> list[Any]:
    if isinstance(node, OpPat):
        return list(node.operands)
    if isinstance(node, Cast):
        return [node.value]
    return [node.like]


def captured_names(pat: Any):
    if isinstance(pat, Var):
        yield pat.name
    elif isinstance(pat, (Const, Many)):
        yield pat.var.name
    elif isinstance(pat, OpPat):
        if pat.bind:
            yield pat.bind
        for v in pat.attrs.values():
            if isinstance(v, Var):
                yield v.name
        for o in pat.operands:
            yield from captured_names(o)


def target_names(node: Any):
    """(where, name) for every capture a target refers to."""
    if isinstance(node, list):
        for t in node:
            yield from target_names(t)
    elif isinstance(node, Var):
        yield f"target {node}", node.name
    elif isinstance(node, OpPat):
        for o in node.operands:
            yield from target_names(o)
        for v in node.attrs.values():
            yield from target_names(v) if isinstance(v, Var) else _callable_names(v, node.name)
    elif isinstance(node, Constant):
        yield from _callable_names(node.value, "constant")
        yield from target_names(node.like)
    elif isinstance(node, Cast):
        yield from target_names(node.value)
        yield from _callable_names(node.dtype, "cast")
    elif isinstance(node, Native):
        yield from ((f"native {node.fn.__name__}", n) for n in param_names(node.fn)[1:])


def _callable_names(spec: Any, where: str):
    if callable(spec) and not isinstance(spec, (np.dtype, type)):
        yield from ((f"{where} {show(spec)}", n) for n in param_names(spec))

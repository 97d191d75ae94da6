"""Declarative rewrite rules (DRR): a source pattern, constraints and a target pattern,
written in a small Python DSL and compiled into a `Pattern` the greedy driver applies.

    from jitlab.passes.drr import P, V, Rule, one_use
    Rule("neg-neg", P.neg(P.neg(V.x)), V.x)
    Rule("add-neg", P.add(V.x, P.neg(V.y).named("n")), P.sub(V.x, V.y), where=[one_use(V.n)])

A Python DSL rather than IR text: constraints and attribute computations (composing two
permutations, 1/N of a shape) are Python functions anyway, patterns are Python values
that rules share and loops generate, and a typo fails on the line that has it.
`str(rule)` prints the rule as IR-like text for the explorer.

Source patterns:
  `V.x`                 any value, captured as x (a name used twice must be the same value)
  `P.op(a, b, k=...)`   an op of the `np` dialect (`P("jit.yield", ...)` for others); an
                        attribute pattern is a literal (must be equal) or `V.k` (captured);
                        the two operands of an exactly commutative op match in either order
  `.named("n")`         also captures the op's result as n
  `Const(V.c)`          a value produced by np.constant, captured as c
  `Many(V.xs)`          all remaining operands, captured as a tuple
Constraints (`where=[...]`): `Constraint`s; each names what must hold, and the first one
that fails is what the report records as the reason the rule did not apply.
Targets: `V.x`; `P.op(...)` whose attributes are literals, `V.k` or functions of captures
(by parameter name); `Constant(value, like)`; `Cast(value, dtype)`; `Native(fn)` to build
in Python; a list for ops with several results. The same target object used twice is
built once. The target must have the root's result types, and may not need symbolic
constraints the program does not already have; otherwise the rule does not apply.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import JitlabError, PassError
from ..ir.attributes import Dense, normalize_attrs
from ..ir.builder import infer_types
from ..ir.core import Operation, OpResult, Value
from ..ir.dtypes import as_dtype
from ..ir.opdef import get_opdef
from ..ir.types import TensorType
from . import drr_lang
from .drr_lang import (
    Cast,
    Const,
    Constant,
    Constraint,
    Many,
    Native,
    OpPat,
    P,
    TargetPrinter,
    V,
    Var,
    call_with,
    captured_names,
    check,
    const_array,
    describe,
    dtype_kind,
    exactly_commutative,
    is_float,
    is_integer,
    is_splat_of,
    one_use,
    param_names,
    same_type,
    show,
    splat,
    target_names,
)
from .rewriter import Pattern, Rewriter, is_trivially_dead, relative_path

__all__ = ["Cast", "Const", "Constant", "Constraint", "Many", "Native", "OpPat", "P", "Rule", "V", "Var", "check",
           "const_array", "dtype_kind", "exactly_commutative", "is_float", "is_integer", "is_splat_of", "one_use",
           "same_type", "splat"]


# -- matching -----------------------------------------------------------------------------
class _Match:
    """Captures and matched ops of one attempt; `fork`/`adopt` undo a failed branch."""

    def __init__(self, captures: dict[str, Any] | None = None, ops: list[Operation] | None = None):
        self.captures = dict(captures or {})
        self.ops = list(ops or [])

    def fork(self) -> _Match:
        return _Match(self.captures, self.ops)

    def adopt(self, other: _Match) -> None:
        self.captures, self.ops = other.captures, other.ops

    def bind(self, name: str, value: Any) -> str | None:
        if name not in self.captures:
            self.captures[name] = value
            return None
        old = self.captures[name]
        if old is value or (not isinstance(value, Value) and _attr_equal(old, value)):
            return None
        text = describe if isinstance(value, Value) else show
        return f"${name} would be both {text(old)} and {text(value)}"


def _attr_equal(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def match_value(pat: Any, value: Value, m: _Match, where: str) -> str | None:
    """None if `value` matches `pat` (extending `m`), else why not."""
    if isinstance(pat, Var):
        return m.bind(pat.name, value)
    if isinstance(pat, Const):
        if const_array(value) is None:
            return f"{where} is {describe(value)}, not a constant"
        return m.bind(pat.var.name, value)
    if not isinstance(value, OpResult):
        return f"{where} is {describe(value)}, not {' or '.join(pat.names)}"
    return match_op(pat, value.op, m, where)


def match_op(pat: OpPat, op: Operation, m: _Match, where: str) -> str | None:
    if op.name not in pat.names:
        return f"{where} is {op.name}, not {' or '.join(pat.names)}"
    if pat.bind is not None:
        reason = m.bind(pat.bind, op.results[0])
        if reason:
            return reason
    m.ops.append(op)
    for key, want in pat.attrs.items():
        reason = _match_attr(key, want, op, m)
        if reason:
            return reason
    return _match_operands(pat, op, m)


def _match_attr(key: str, want: Any, op: Operation, m: _Match) -> str | None:
    have = op.attrs[key]
    if isinstance(want, Var):
        return m.bind(want.name, have)
    want = normalize_attrs(op.name, {key: op.opdef.attrs[key]}, {key: want})[key]
    if _attr_equal(have, want):
        return None
    return f"attribute {key} of {op.name} is {show(have)}, not {show(want)}"


def _match_operands(pat: OpPat, op: Operation, m: _Match) -> str | None:
    fixed = [p for p in pat.operands if not isinstance(p, Many)]
    variadic = len(fixed) < len(pat.operands)
    n = len(op.operands)
    if n < len(fixed) or (not variadic and n != len(fixed)):
        return f"{op.name} has {n} operand(s), the pattern {len(fixed)}"
    orders = [list(range(n))]
    if not pat.ordered and not variadic and exactly_commutative(op):
        orders.append([1, 0])
    first = None
    for order in orders:
        trial = m.fork()
        reason = _match_in_order(pat, op, order, trial)
        if reason is None:
            m.adopt(trial)
            return None
        first = first or reason
    return first + (" (tried both operand orders)" if len(orders) > 1 else "")


def _match_in_order(pat: OpPat, op: Operation, order: list[int], m: _Match) -> str | None:
    operands = [op.operands[i] for i in order]
    for i, sub in enumerate(pat.operands):
        if isinstance(sub, Many):
            return m.bind(sub.var.name, tuple(operands[i:]))
        reason = match_value(sub, operands[i], m, f"operand {order[i]} of {op.name}")
        if reason:
            return reason
    return None


# -- targets ------------------------------------------------------------------------------
@dataclass(eq=False)
class _Planned:
    """A target op checked but not yet built: its name, operands, attributes and type."""

    name: str
    operands: list[Any]
    attrs: dict[str, Any]
    type: TensorType


class _Miss(Exception):
    """The target cannot be built for this match: the rule does not apply."""


class _Planner:
    """Resolves a target against captures and infers its types without touching the IR."""

    def __init__(self, rule: Rule, captures: dict[str, Any], constraints):
        self.rule, self.captures, self.constraints = rule, captures, constraints
        self.memo: dict[int, Any] = {}

    def plan(self, node: Any) -> Any:
        if id(node) not in self.memo:
            self.memo[id(node)] = self._plan(node)
        return self.memo[id(node)]

    def _plan(self, node: Any) -> Any:
        if isinstance(node, Var):
            value = self.captures[node.name]
            if not isinstance(value, Value):
                raise PassError(f"rule {self.rule.name}: target {node} is an attribute, not a value")
            return value
        if isinstance(node, OpPat):
            return self._op(node.name, [self.plan(o) for o in node.operands],
                            {k: self.attr(v) for k, v in node.attrs.items()})
        if isinstance(node, Constant):
            return self._constant(node)
        if isinstance(node, Cast):
            value, dtype = self.plan(node.value), as_dtype(self.attr(node.dtype))
            return value if value.type.dtype == dtype else self._op("np.cast", [value], {"dtype": dtype})
        if isinstance(node, Native):
            return node
        raise PassError(f"rule {self.rule.name}: cannot build target {node!r}")

    def attr(self, spec: Any) -> Any:
        if isinstance(spec, Var):
            return self.captures[spec.name]
        if callable(spec) and not isinstance(spec, (np.dtype, type)):
            return call_with(spec, self.captures)
        return spec

    def _constant(self, node: Constant) -> _Planned:
        like = node.like
        if isinstance(like, (Var, OpPat, Cast, Constant)):
            dtype = self.plan(like).type.dtype
        else:
            dtype = as_dtype(like)
        with np.errstate(all="ignore"):
            array = np.asarray(self.attr(node.value)).astype(dtype)
        return self._op("np.constant", [], {"value": Dense(array)})

    def _op(self, name: str, operands: list[Any], attrs: dict[str, Any]) -> _Planned:
        if any(isinstance(o, Native) for o in operands):
            raise PassError(f"rule {self.rule.name}: a Native target cannot be an operand")
        opdef = get_opdef(name)
        try:
            attrs = normalize_attrs(name, opdef.attrs, attrs)
            types = infer_types(opdef, [o.type for o in operands], attrs, self.constraints)
        except JitlabError as e:
            raise _Miss(f"the target {name} does not fit: {e}") from None
        return _Planned(name, operands, attrs, types[0])


def _emit(planned: Any, rw: Rewriter, captures: dict[str, Any], memo: dict[int, Any]) -> Any:
    if isinstance(planned, Value):
        return planned
    if id(planned) not in memo:
        if isinstance(planned, Native):
            memo[id(planned)] = planned.fn(rw, *(captures[n] for n in param_names(planned.fn)[1:]))
        else:
            operands = [_emit(o, rw, captures, memo) for o in planned.operands]
            memo[id(planned)] = rw.create(planned.name, operands, planned.attrs, [planned.type]).result
    return memo[id(planned)]


def defined_at() -> str:
    """"file:line" of the first caller outside this module and drr_lang (where a rule is written)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename in (__file__, drr_lang.__file__):
        frame = frame.f_back
    return f"{relative_path(frame.f_code.co_filename)}:{frame.f_lineno}" if frame is not None else ""


class Rule(Pattern):
    """A declarative rewrite rule, compiled into a Pattern rooted at the source's op."""

    def __init__(self, name: str, source: OpPat, target: Any, where: Sequence[Constraint] = (),
                 benefit: int | None = None, doc: str = ""):
        if not isinstance(source, OpPat):
            raise PassError(f"rule {name}: the source must be an op pattern, got {source!r}")
        self.name, self.source, self.target, self.where, self.doc = name, source, target, tuple(where), doc
        self.defined_at = defined_at()
        self.root = source.names[0] if len(source.names) == 1 else source.names
        self.benefit = source.size() if benefit is None else benefit
        self._check_names()

    def _check_names(self) -> None:
        known = set(captured_names(self.source))
        needed = [(str(c), n) for c in self.where for n in c.names] + list(target_names(self.target))
        for where, name in needed:
            if name not in known:
                raise PassError(f"rule {self.name}: {where} uses ${name}, which the source does not capture "
                                f"(it captures {', '.join('$' + k for k in sorted(known)) or 'nothing'})")

    def match_and_rewrite(self, op: Operation, rw: Rewriter) -> bool:
        m = _Match()
        reason = match_op(self.source, op, m, op.name)
        if reason is None:
            reason = next(filter(None, (c.check(m.captures) for c in self.where)), None)
        if reason is not None:
            return rw.fail(reason)
        try:
            planned = self._plan(op, rw, m.captures)
        except _Miss as miss:
            return rw.fail(str(miss))
        self._rewrite(op, rw, m, planned)
        return True

    def _plan(self, op: Operation, rw: Rewriter, captures: dict[str, Any]) -> list[Any]:
        constraints = rw.program.constraints.copy()
        planner = _Planner(self, captures, constraints)
        targets = self.target if isinstance(self.target, list) else [self.target]
        planned = [planner.plan(t) for t in targets]
        if len(planned) != len(op.results) and not any(isinstance(p, Native) for p in planned):
            raise _Miss(f"the rule gives {len(planned)} value(s), {op.name} has {len(op.results)} results")
        for p, r in zip(planned, op.results):
            if not isinstance(p, Native) and p.type != r.type:
                raise _Miss(f"the target gives {p.type}, the op gives {r.type}")
        added = [pair for pair in constraints if pair not in rw.program.constraints.pairs]
        if added:
            raise _Miss(f"the target needs {added[0][0]} == {added[0][1]}, which the program does not assume")
        return planned

    def _rewrite(self, op: Operation, rw: Rewriter, m: _Match, planned: list[Any]) -> None:
        memo: dict[int, Any] = {}
        values = [_emit(p, rw, m.captures, memo) for p in planned]
        values = [v for group in values for v in (group if isinstance(group, (list, tuple)) else [group])]
        rw.replace_op(op, values)
        for inner in m.ops[1:]:
            if inner.parent is not None and is_trivially_dead(inner):
                rw.erase_op(inner)

    def __str__(self) -> str:
        targets = self.target if isinstance(self.target, list) else [self.target]
        text = f"{self.source} => {TargetPrinter(targets).text()}"
        return text + (f" where {'; '.join(map(str, self.where))}" if self.where else "")

    def __repr__(self) -> str:
        return f"<Rule {self.name}: {self}>"


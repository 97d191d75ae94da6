"""Translating a jit.group of elementwise np ops into numexpr expression strings.

numexpr has no let-bindings, so a value used more than once inside a group is computed
by its own stage into a temporary; every other value is inlined into its consumer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from jitlab.ir.core import Operation, Value

# Templates take operands as {0}, {1}, {2}. max/min are written with where() and keep
# numpy's NaN propagation: a NaN on either side gives NaN.
TEMPLATES: dict[str, str] = {
    "np.add": "({0} + {1})", "np.sub": "({0} - {1})", "np.mul": "({0} * {1})", "np.div": "({0} / {1})",
    "np.pow": "({0} ** {1})", "np.neg": "(-{0})", "np.abs": "abs({0})", "np.square": "({0} * {0})",
    "np.maximum": "where(({0} < {1}) | ({1} != {1}), {1}, {0})",
    "np.minimum": "where(({0} > {1}) | ({1} != {1}), {1}, {0})",
    "np.relu": "where({0} < 0, 0, {0})", "np.where": "where({0}, {1}, {2})",
    "np.sqrt": "sqrt({0})", "np.rsqrt": "(1 / sqrt({0}))", "np.reciprocal": "(1 / {0})",
    "np.exp": "exp({0})", "np.expm1": "expm1({0})", "np.log": "log({0})", "np.log1p": "log1p({0})",
    "np.log10": "log10({0})", "np.tanh": "tanh({0})", "np.sin": "sin({0})", "np.cos": "cos({0})",
    "np.tan": "tan({0})", "np.sinh": "sinh({0})", "np.cosh": "cosh({0})", "np.asin": "arcsin({0})",
    "np.acos": "arccos({0})", "np.atan": "arctan({0})", "np.asinh": "arcsinh({0})",
    "np.acosh": "arccosh({0})", "np.atanh": "arctanh({0})", "np.atan2": "arctan2({0}, {1})",
    "np.less": "({0} < {1})", "np.less_equal": "({0} <= {1})", "np.greater": "({0} > {1})",
    "np.greater_equal": "({0} >= {1})", "np.equal": "({0} == {1})", "np.not_equal": "({0} != {1})",
    "np.logical_and": "({0} & {1})", "np.logical_or": "({0} | {1})", "np.logical_not": "(~{0})",
}

# numexpr's names for the dtypes it evaluates in (float is its single precision).
KINDS: dict[np.dtype, type] = {np.dtype(np.float32): float, np.dtype(np.float64): np.double,
                               np.dtype(np.bool_): bool}
FLOATS = {np.dtype(np.float32), np.dtype(np.float64)}
VARIABLE = re.compile(r"\b(?:a|c|t|out)\d+\b")


def why_not(op: Operation) -> str | None:
    """None when numexpr can evaluate `op` exactly as numpy does, else the reason."""
    if op.name not in TEMPLATES:
        return f"numexpr has no equivalent of {op.name}"
    dtypes = {v.type.dtype for v in [*op.operands, *op.results]}
    if not dtypes <= set(KINDS):
        return f"the numexpr engine evaluates float32/float64/bool only, not {sorted(map(str, dtypes - set(KINDS)))}"
    data = op.operands[1:] if op.name == "np.where" else op.operands
    if not op.name.startswith("np.logical_") and any(v.type.dtype not in FLOATS for v in data):
        return f"{op.name} is evaluated by the numexpr engine on floats only"
    if len(dtypes & FLOATS) > 1:
        return "mixed float precisions: numexpr would promote differently from numpy"
    return None


@dataclass
class Stage:
    """One numexpr evaluation: `expr` over `names`, written to output `out` (or a temporary when None)."""

    name: str
    expr: str
    names: list[str]
    out: int | None = None


@dataclass
class Translation:
    """A group as numexpr stages: arguments a0.., constants c0.., temporaries t0.."""

    args: list[str]
    constants: dict[str, np.ndarray] = field(default_factory=dict)
    stages: list[Stage] = field(default_factory=list)
    kinds: dict[str, type] = field(default_factory=dict)

    def source(self) -> str:
        lines = [f"# numexpr engine: {len(self.stages)} stage(s)"]
        lines += [f"{n} = {c.item()!r}" for n, c in self.constants.items()]
        lines += [f"{s.name if s.out is None else f'out[{s.out}]'} = {s.expr}" for s in self.stages]
        return "\n".join(lines)


def translate(group: Operation) -> Translation:
    """The stages that compute a group's yielded values."""
    block = group.body
    t = Translation([f"a{i}" for i in range(len(block.args))])
    text: dict[Value, str] = {}
    for name, arg in zip(t.args, block.args):
        text[arg] = name
        t.kinds[name] = KINDS[arg.type.dtype]
    outputs = {v: k for k, v in enumerate(block.terminator.operands)}
    for op in block.ops:
        if op is block.terminator:
            break
        if op.name == "np.constant":
            text[op.result] = _constant(t, op)
            continue
        expr = TEMPLATES[op.name].format(*(text[v] for v in op.operands))
        text[op.result] = _bind(t, op.result, expr, outputs.get(op.result), _uses(op.result))
    for v, k in outputs.items():
        if not any(s.out == k for s in t.stages):
            t.stages.append(Stage(f"out{k}", text[v], _names(t, text[v]), k))
    return t


def _constant(t: Translation, op: Operation) -> str:
    name = f"c{len(t.constants)}"
    array = op.attrs["value"].array
    t.constants[name] = np.asarray(array.reshape(-1)[0] if array.size else 0, array.dtype)
    t.kinds[name] = KINDS[array.dtype]
    return name


def _uses(value: Value) -> int:
    """How often `value` is spelled out by its consumers' templates."""
    return sum(TEMPLATES[use.op.name].count(f"{{{use.index}}}") for use in value.uses if use.op.name in TEMPLATES)


def _bind(t: Translation, value: Value, expr: str, out: int | None, uses: int) -> str:
    """Inlines `expr`, or gives it its own stage when it is an output or read more than once."""
    if out is None and uses <= 1:
        return expr
    name = f"out{out}" if out is not None else f"t{len(t.stages)}"
    t.stages.append(Stage(name, expr, _names(t, expr), out))
    t.kinds[name] = KINDS[value.type.dtype]
    return name


def _names(t: Translation, expr: str) -> list[str]:
    """The variables `expr` reads, in a fixed order."""
    return sorted(set(VARIABLE.findall(expr)) & set(t.kinds))

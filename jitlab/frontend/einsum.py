"""np.einsum traced into transposes, reshapes, matmuls and reductions.

Operands are contracted left to right: each pairwise step puts shared batch labels
first, the contracted labels last, and becomes one np.matmul; a label that appears in
one operand only and not in the output is summed away first.
"""

from __future__ import annotations

import numpy as np

from ..errors import TraceError, UnsupportedOp
from .tracer import Tracer


def _parse(subscripts: str, operands: list[Tracer], where: str) -> tuple[list[str], str]:
    subscripts = subscripts.replace(" ", "")
    if "..." in subscripts:
        raise UnsupportedOp(f"np.einsum with '...' is not supported ({where})")
    inputs, arrow, output = subscripts.partition("->")
    terms = inputs.split(",")
    if len(terms) != len(operands):
        raise TraceError(f"np.einsum: {len(terms)} terms for {len(operands)} operands ({where})")
    for term, x in zip(terms, operands):
        if len(term) != x.ndim:
            raise TraceError(f"np.einsum: term {term!r} does not match rank {x.ndim} ({where})")
        if len(set(term)) != len(term):
            raise UnsupportedOp(f"np.einsum with a repeated label in {term!r} (a diagonal) is not "
                                f"supported ({where})")
    if not arrow:
        counts = {c: inputs.count(c) for c in inputs if c.isalpha()}
        output = "".join(sorted(c for c, n in counts.items() if n == 1))
    return terms, output


def _sum_out(x: Tracer, term: str, keep: set[str]) -> tuple[Tracer, str]:
    axes = [i for i, c in enumerate(term) if c not in keep]
    if not axes:
        return x, term
    return np.sum(x, axis=tuple(axes)), "".join(c for c in term if c in keep)


def _contract(a: Tracer, ta: str, b: Tracer, tb: str, needed: set[str]) -> tuple[Tracer, str]:
    batch = [c for c in ta if c in tb and c in needed]
    contracted = [c for c in ta if c in tb and c not in needed]
    left = [c for c in ta if c not in tb]
    right = [c for c in tb if c not in ta]
    dims = {**dict(zip(ta, a.shape)), **dict(zip(tb, b.shape))}
    a2 = np.transpose(a, [ta.index(c) for c in batch + left + contracted])
    b2 = np.transpose(b, [tb.index(c) for c in batch + contracted + right])
    size = lambda labels: int(np.prod([dims[c] for c in labels], dtype=np.int64))  # noqa: E731
    a3 = a2.reshape(tuple(dims[c] for c in batch) + (size(left), size(contracted)))
    b3 = b2.reshape(tuple(dims[c] for c in batch) + (size(contracted), size(right)))
    out = np.matmul(a3, b3).reshape(tuple(dims[c] for c in batch + left + right))
    return out, "".join(batch + left + right)


def trace_einsum(subscripts, operands, kwargs):
    from .numpy_api import context_of

    ctx = context_of(*operands)
    if not isinstance(subscripts, str) or kwargs.get("out") is not None:
        raise UnsupportedOp(f"np.einsum needs a subscripts string and no out= ({ctx.where()})")
    xs = [ctx.lift(x) for x in operands]
    terms, output = _parse(subscripts, xs, ctx.where())
    if any(not isinstance(d, int) for x in xs for d in x.shape):
        raise UnsupportedOp(f"np.einsum over symbolic dims is not supported ({ctx.where()})")
    acc, term = xs[0], terms[0]
    later = lambda k: set(output).union(*terms[k:])  # noqa: E731
    acc, term = _sum_out(acc, term, later(1))
    for k in range(1, len(xs)):
        x, t = _sum_out(xs[k], terms[k], later(k + 1) | set(term))
        acc, term = _contract(acc, term, x, t, later(k + 1))
    acc, term = _sum_out(acc, term, set(output))
    return np.transpose(acc, [term.index(c) for c in output]) if term != output else acc

"""Einsum as diagonals, sums, transposes and batched matmuls.

Each operand first loses its repeated labels (a diagonal is a gather from the flattened
pair of axes) and the labels no one else needs (summed). Operands are then contracted
left to right; each pairwise step puts shared labels first and the contracted ones last
and becomes one np.matmul. An ellipsis stands for the same trailing letters in every term.
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import ShapeError
from ..graph import T
from ..node import Node
from ..registry import onnx_op
from .util import static_dim

_SPARE = "".join(chr(c) for c in range(ord("A"), ord("Z") + 1)) + "".join(chr(c) for c in range(ord("a"), ord("z") + 1))


def parse(n: Node, equation: str, ranks: list[int]) -> tuple[list[str], str]:
    """Terms and output with every ellipsis spelled out as letters."""
    equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise n.error(ShapeError, f"equation {equation!r} has {len(terms)} terms for {len(ranks)} inputs")
    spare = [c for c in _SPARE if c not in equation]
    width = max((r - len(t.replace("...", "")) for t, r in zip(terms, ranks) if "..." in t), default=0)
    letters = "".join(spare[:width])
    terms = [t.replace("...", letters[width - (r - len(t.replace("...", ""))):]) for t, r in zip(terms, ranks)]
    for t, r in zip(terms, ranks):
        if len(t) != r:
            raise n.error(ShapeError, f"term {t!r} does not match an input of rank {r}")
    if arrow:
        return terms, rhs.replace("...", letters)
    counts = {c: sum(t.count(c) for t in terms) for c in set("".join(terms))}
    return terms, letters + "".join(sorted(c for c, k in counts.items() if k == 1 and c not in letters))


def diagonal(x: T, term: str) -> tuple[T, str]:
    """x with each repeated label reduced to its diagonal."""
    while len(set(term)) < len(term):
        c = next(c for c in term if term.count(c) > 1)
        p, q = term.index(c), term.index(c, term.index(c) + 1)
        rest = [i for i in range(len(term)) if i not in (p, q)]
        size = x.shape[p]
        pair = x.transpose(rest + [p, q]).reshape(tuple(x.shape[i] for i in rest) + (size * size,))
        x = x.g.op("np.take", pair, x.g.const(np.arange(size, dtype=np.int64) * (size + 1)), axis=len(rest))
        term = "".join(term[i] for i in rest) + c
    return x, term


def sum_out(x: T, term: str, keep: set[str]) -> tuple[T, str]:
    axes = [i for i, c in enumerate(term) if c not in keep]
    if not axes:
        return x, term
    return x.reduce("sum", axes), "".join(c for c in term if c in keep)


def contract(a: T, ta: str, b: T, tb: str, needed: set[str]) -> tuple[T, str]:
    """The product of a and b summed over their shared labels that are not needed later."""
    dims = {**dict(zip(tb, b.shape)), **{c: d for c, d in zip(ta, a.shape) if d != 1}}
    batch = [c for c in ta if c in tb and c in needed]
    summed = [c for c in ta if c in tb and c not in needed]
    left = [c for c in ta if c not in tb]
    right = [c for c in tb if c not in ta]
    size = lambda labels: math.prod(dims[c] for c in labels)  # noqa: E731
    a3 = a.transpose([ta.index(c) for c in batch + left + summed])
    a3 = a3.reshape(a3.shape[:len(batch)] + (size(left), size(summed)))
    b3 = b.transpose([tb.index(c) for c in batch + summed + right])
    b3 = b3.reshape(b3.shape[:len(batch)] + (size(summed), size(right)))
    out = a.g.op("np.matmul", a3, b3)
    return out.reshape(out.shape[:len(batch)] + tuple(dims[c] for c in left + right)), "".join(batch + left + right)


@onnx_op("Einsum", 12, 28)
def einsum(n: Node) -> T:
    xs = n.inputs()
    for x in xs:
        for i, d in enumerate(x.shape):
            static_dim(n, d, f"dim {i} of an operand")
    terms, output = parse(n, n.attr("equation"), [x.rank for x in xs])
    pairs = [diagonal(x, t) for x, t in zip(xs, terms)]
    later = lambda k: set(output).union(*(t for _, t in pairs[k:]))  # noqa: E731
    acc, term = sum_out(*pairs[0], later(1))
    for k in range(1, len(pairs)):
        x, t = sum_out(*pairs[k], later(k + 1) | set(term))
        acc, term = contract(acc, term, x, t, later(k + 1))
    acc, term = sum_out(acc, term, set(output))
    return acc.transpose([term.index(c) for c in output])

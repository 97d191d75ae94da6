"""Floating-point operations an op does, for the roofline (docs/profiling.md): a contraction's
multiply-adds exactly (two per term), a pooling window's one per element it covers, one per
element for elementwise ops (a compare or a select counts as one), one per element read for
reductions, none for views, index maps and memory ops. An op holding a region other than a
group's body (a loop) is unknown: None."""

from __future__ import annotations

import math
from collections.abc import Callable

from ..ir.core import Operation
from ..ir.opdef import Trait
from ..ir.shapes import evaluate_shape

Sizes = Callable[[object], tuple[int, ...]]


def _matmul(op: Operation, shape: Sizes) -> int:
    return 2 * math.prod(shape(op.results[0])) * shape(op.operands[0])[-1]


def _conv2d(op: Operation, shape: Sizes) -> int:
    return 2 * math.prod(shape(op.results[0])) * math.prod(shape(op.operands[1])[1:])


def _pool(op: Operation, shape: Sizes) -> int:
    """One compare (max) or add (average) per window element of each output."""
    return math.prod(shape(op.results[0])) * math.prod(op.attrs["kernel"])


RULES: dict[str, Callable[[Operation, Sizes], int]] = {"np.matmul": _matmul, "np.conv2d": _conv2d,
                                                        "np.max_pool2d": _pool, "np.avg_pool2d": _pool}


def op_flops(op: Operation, bindings: dict[str, int]) -> int | None:
    """FLOPs of one run of `op` (a jit.group: of its body) under these symbol values."""
    def shape(v) -> tuple[int, ...]:
        return tuple(evaluate_shape(v.type.shape, bindings))

    if op.name == "jit.group":
        inner = [op_flops(o, bindings) for o in op.regions[0].blocks[0].ops if not o.has(Trait.TERMINATOR)]
        return None if None in inner else sum(inner)
    if op.regions:
        return None
    if op.name in RULES:
        return RULES[op.name](op, shape)
    if op.has(Trait.REDUCTION):
        return math.prod(shape(op.operands[0])) if op.operands else 0
    if op.has(Trait.ELEMENTWISE) and op.results:
        return math.prod(shape(op.results[0]))
    return 0


def step_flops(ops: list[Operation], bindings: dict[str, int]) -> int | None:
    """FLOPs of a profiled step's ops together; None when any is unknown."""
    counts = [op_flops(op, bindings) for op in ops]
    return None if None in counts else sum(counts)

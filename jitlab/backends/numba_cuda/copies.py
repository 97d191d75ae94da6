"""np.concatenate outside a fused group as device copies: one grid-stride kernel per operand.

An operand of shape (outer, n_i, inner) about the axis lands at column offset (n_0 + ... + n_{i-1}) *
inner of the result seen as (outer, N * inner): each launch copies one operand's block there. Without
it a concatenate no group takes (np.roll's decomposition, in a stencil loop's body) would run on
the host between a synchronisation and two transfers, each iteration.
"""

from __future__ import annotations

import math
from typing import Any

from ...ir.core import Operation
from .dynamic import load
from .launch import Policy

COPY_SOURCE = '''from numba import cuda


@cuda.jit(cache=True)
def copy_block(src, out, width, out_width, offset, total):
    for j in range(cuda.grid(1), total, cuda.gridsize(1)):
        out[(j // width) * out_width + offset + j % width] = src[j]
'''


class ConcatKernel:
    """One np.concatenate as device copies: `run(executor, step, operands, bindings, alloc, stream)`."""

    def __init__(self, op: Operation, policy: Policy, options: dict[str, Any]):
        self.axis, self.policy = op.attrs["axis"], policy
        self.fn = load(COPY_SOURCE, "copy_block", options)

    def __call__(self, executor, step, operands: list, bindings: dict[str, int], alloc, stream) -> list:
        shape = step.shapes(bindings)[0]
        out = alloc(step.outs[0], shape, step.types[0].dtype, stream)
        axis = self.axis % len(shape)
        inner = math.prod(shape[axis + 1:])
        out_width, offset = shape[axis] * inner, 0
        flat = out.reshape(out.size)
        for a in operands:
            width = a.shape[axis] * inner
            if a.size:
                launch = self.policy.elementwise(a.size)
                self.fn[launch.grid, launch.block, stream](a.reshape(a.size), flat, width, out_width, offset, a.size)
                executor.stats["launches"] += 1
            offset += width
        return [out]

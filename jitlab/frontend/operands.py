"""What the traced numpy functions share about their operands: casting them to a dtype, and
refusing, by name, those jitlab does not take (complex values where it would compute something
else, symbolic lengths where a fixed one is needed, parameters it does not honour).
"""

from __future__ import annotations

import numpy as np

from ..errors import UnsupportedOp
from ..ir.shapes import Sym
from .tracer import TraceContext, Tracer


def cast(x: Tracer, dtype) -> Tracer:
    """x in `dtype`: x itself when it has that dtype already, else one np.cast."""
    dtype = np.dtype(dtype)
    return x if x.dtype == dtype else x.ctx.op("np.cast", x.value, dtype=dtype)


def float_of(x: Tracer) -> Tracer:
    """x as numpy computes a mean of it: float and complex stay, anything else becomes float64."""
    return x if x.dtype.kind in "fc" else cast(x, np.float64)


def promoted(xs: list[Tracer]) -> list[Tracer]:
    """The arrays cast to their common numpy result dtype."""
    dtype = np.result_type(*(x.dtype for x in xs))
    return [cast(x, dtype) for x in xs]


def scalar_constant(ctx: TraceContext, value, dtype) -> Tracer:
    """A Python number as a 0-d constant of `dtype`, as numpy's copyto casts it."""
    return ctx.constant(np.asarray(value).astype(dtype))


def no_complex(x: Tracer, name: str) -> Tracer:
    """Refuses a complex operand where the traced version would compute something else than numpy."""
    if x.dtype.kind == "c":
        raise UnsupportedOp(f"{name} of complex dtype {x.dtype} is not supported by jitlab ({x.ctx.where()})")
    return x


def refuse(ctx: TraceContext, name: str, **given) -> None:
    """Refuses the named parameters given a value other than their default (None, np._NoValue, where=True)."""
    used = [k for k, v in given.items() if v is not None and v is not np._NoValue and not (k == "where" and v is True)]
    if used:
        raise UnsupportedOp(f"{name} with {', '.join(k + '=' for k in used)} is not supported ({ctx.where()})")


def static_length(x: Tracer, axis: int, name: str) -> int:
    """x's length along `axis`, refused when it is symbolic (the traced version needs it fixed)."""
    n = x.shape[axis]
    if isinstance(n, Sym):
        raise UnsupportedOp(f"{name} along the symbolic dim {n} is not supported ({x.ctx.where()}); "
                            "give that dim a fixed size")
    return int(n)

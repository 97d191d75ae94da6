"""Dense linear algebra of the `np` dialect: library kernels on the last two axes (LAPACK
through numpy), batched over the leading ones. A singular matrix raises LinAlgError when the
program runs: an InputError that is numpy's LinAlgError too."""

from __future__ import annotations

import numpy as np

from ...errors import InputError
from ...ir.opdef import Trait, defop
from ...ir.shapes import Sym
from ...ir.types import TensorType
from .common import FLOAT, INEXACT, check_dtype, same_dtype


def _square(ctx, t, what: str) -> None:
    check_dtype(ctx, t, INEXACT, what)
    if t.rank < 2:
        raise ctx.error(f"{what} {t} must be a matrix (rank >= 2)")
    ctx.equal(t.shape[-2], t.shape[-1], f"the square dims of {what} {t}")


def _same_infer(ctx, types, attrs):
    _square(ctx, types[0], "the operand")
    return [types[0]]


def _det_infer(ctx, types, attrs):
    _square(ctx, types[0], "the operand")
    return [TensorType(types[0].shape[:-2], types[0].dtype)]


def _svdvals_infer(ctx, types, attrs):
    (t,) = types
    check_dtype(ctx, t, FLOAT, "the operand")
    if t.rank < 2:
        raise ctx.error(f"the operand {t} must be a matrix (rank >= 2)")
    m, n = t.shape[-2:]
    if m == n:
        return [TensorType(t.shape[:-1], t.dtype)]
    if isinstance(m, Sym) or isinstance(n, Sym):
        raise ctx.error(f"the number of singular values of {t}, min({m}, {n}), must be known while tracing")
    return [TensorType(t.shape[:-2] + (min(m, n),), t.dtype)]


def _solve_infer(ctx, types, attrs):
    a, b = types
    dtype = same_dtype(ctx, types)
    _square(ctx, a, "a")
    if b.rank == 1:
        if a.rank != 2:
            raise ctx.error(f"a vector b {b} needs a single matrix a, got {a}")
        ctx.equal(a.shape[-1], b.shape[0], f"the rows of a {a} and b {b}")
        return [TensorType(b.shape, dtype)]
    if b.rank != a.rank:
        raise ctx.error(f"b {b} must have a's rank {a.rank} (batch dims broadcast before the op)")
    for i, (da, db) in enumerate(zip(a.shape[:-2], b.shape[:-2])):
        ctx.equal(da, db, f"batch dim {i} of a {a} and b {b}")
    ctx.equal(a.shape[-1], b.shape[-2], f"the rows of a {a} and b {b}")
    return [TensorType(b.shape, dtype)]


class LinAlgError(InputError, np.linalg.LinAlgError):
    """A matrix the kernel cannot take (singular, not positive-definite): a jitlab error that
    code catching numpy's LinAlgError still catches."""


def _typed(name: str, fn):
    def run(*xs):
        try:
            return np.asarray(fn(*xs)).astype(xs[0].dtype, copy=False)
        except np.linalg.LinAlgError as e:
            raise LinAlgError(f"{name}: {e}") from None

    return run


_LIB = (Trait.PURE,)
defop("np.cholesky", infer=_same_infer, traits=_LIB, reference=_typed("np.cholesky", np.linalg.cholesky),
      operand_names=("a",),
      doc="Lower-triangular L with L @ L.T == a, for symmetric positive-definite a (batched).")
defop("np.inv", infer=_same_infer, traits=_LIB, reference=_typed("np.inv", np.linalg.inv), operand_names=("a",),
      doc="Matrix inverse of the last two axes (batched).")
defop("np.det", infer=_det_infer, traits=_LIB, reference=_typed("np.det", np.linalg.det), operand_names=("a",),
      doc="Determinant of the last two axes (batched).")
defop("np.svdvals", infer=_svdvals_infer, traits=_LIB,
      reference=_typed("np.svdvals", lambda a: np.linalg.svd(a, compute_uv=False)), operand_names=("a",),
      doc="Singular values of the last two axes, largest first (batched).")
defop("np.solve", operands=2, infer=_solve_infer, traits=_LIB,
      reference=_typed("np.solve", np.linalg.solve), operand_names=("a", "b"),
      doc="x with a @ x == b: b a vector (one matrix a) or matrices with a's batch dims.")

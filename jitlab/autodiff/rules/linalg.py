"""VJP rules of the linear algebra library kernels: inv, det and solve, in terms of themselves.

Y = inv(A): dA = -Y^T g Y^T. d = det(A): dA = g d inv(A)^T. X = solve(A, B): dB = solve(A^T, g),
dA = -dB X^T.
"""

from __future__ import annotations

import numpy as np

from ..registry import Primal, unsupported_gradient, vjp


def _t(x):
    return np.swapaxes(x, -1, -2)


@vjp("np.inv")
def _inv(p: Primal, g):
    yt = _t(p.out)
    return [-np.matmul(np.matmul(yt, g), yt)]


@vjp("np.det")
def _det(p: Primal, g):
    scale = (g * p.out)[..., None, None]
    return [scale * _t(np.linalg.inv(p.args[0]))]


@vjp("np.solve")
def _solve(p: Primal, g):
    a, x = p.args[0], p.out
    db = np.linalg.solve(_t(a), g)
    da = -(np.multiply.outer(db, x) if x.ndim == 1 else np.matmul(db, _t(x)))
    return [da, db]


unsupported_gradient("the Cholesky factor's adjoint (a triangular solve of Phi(L^T g)) is not written yet",
                     "np.cholesky")
unsupported_gradient("the singular values' adjoint U diag(g) V^T needs the singular vectors, which jitlab does "
                     "not compute", "np.svdvals")

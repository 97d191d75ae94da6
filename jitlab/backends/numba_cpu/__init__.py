"""The numba CPU backend: fused loop nests generated as numba source, BLAS for contractions."""

import os

import numba

# numba's default OpenMP threads keep spinning after a parallel loop and slow the next
# OpenBLAS call (docs/performance.md, "What decides speed", 4); the workqueue layer does not. A user's own choice wins.
if "NUMBA_THREADING_LAYER" not in os.environ:
    numba.config.THREADING_LAYER = "workqueue"

from .backend import NumbaCPUBackend  # noqa: E402, F401  (registers the backend)

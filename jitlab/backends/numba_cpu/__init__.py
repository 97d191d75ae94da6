"""The numba CPU backend: fused loop nests generated as numba source, BLAS for contractions."""

from .backend import NumbaCPUBackend  # noqa: F401  (registers the backend)

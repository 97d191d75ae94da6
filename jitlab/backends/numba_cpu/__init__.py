"""The numba CPU backend: fused loop nests generated as numba source, BLAS for contractions.

Registering it imports no numba: a warm start whose kernels are all native libraries never does."""

from .backend import NumbaCPUBackend  # noqa: F401  (registers the backend)

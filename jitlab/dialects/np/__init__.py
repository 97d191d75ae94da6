"""The `np` dialect: operator-level ops with numpy semantics, each with shape/dtype
inference and a numpy reference implementation (the O0 oracle)."""

# Importing the modules registers their ops.
from . import bits, composite, dims, elementwise, gradient, indexing, linalg, nn, reduction, scan, shape, signal, sorting  # noqa: F401  # noqa: F401

"""The `np` dialect: operator-level ops with numpy semantics, each with shape/dtype
inference and a numpy reference implementation (the O0 oracle)."""

from . import bits, composite, dims, elementwise, indexing, nn, reduction, scan, shape, signal, sorting  # noqa: F401

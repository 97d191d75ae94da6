"""The `np` dialect: operator-level ops with numpy semantics, each with shape/dtype
inference and a numpy reference implementation (the O0 oracle)."""

# Importing the modules registers their ops.
from . import (  # noqa: F401
    bits,
    composite,
    dims,
    dynamic,
    elementwise,
    gradient,
    indexing,
    linalg,
    nn,
    reduction,
    scan,
    shape,
    signal,
    sorting,
)

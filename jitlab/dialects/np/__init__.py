"""The `np` dialect: operator-level ops with numpy semantics, each with shape/dtype
inference and a numpy reference implementation (the O0 oracle)."""

from . import composite, elementwise, gradient, nn, reduction, shape  # noqa: F401  (registers the ops)

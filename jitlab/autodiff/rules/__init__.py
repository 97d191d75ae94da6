"""The VJP rules of the `np` dialect, one module per family of ops."""

from . import composite, control_flow, elementwise, indexing, linalg, nn, reduction, shape  # noqa: F401  (registers the rules)

"""Dialects: families of ops. Importing this package registers all of them."""

from . import jit, np  # noqa: F401

"""Dialects: families of ops. Importing this package registers all of them."""

from . import jit, mem, np  # noqa: F401

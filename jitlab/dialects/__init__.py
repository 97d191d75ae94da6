"""Dialects: families of ops. Importing this package registers all of them."""

from . import jit, mem, np, scf  # noqa: F401

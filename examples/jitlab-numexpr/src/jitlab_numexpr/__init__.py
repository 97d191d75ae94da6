"""jitlab-numexpr: an example backend plugin, registered through the `jitlab.backends` entry point."""

from .backend import NumexprBackend, NumexprClaim

__all__ = ["NumexprBackend", "NumexprClaim"]

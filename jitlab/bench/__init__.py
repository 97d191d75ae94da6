"""The benchmark suite behind `jitlab bench` and `python -m jitlab.bench`."""

from .cli import main

__all__ = ["main"]

"""Backends: the interface every backend implements, and the built-in ones."""

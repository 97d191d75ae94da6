"""The numba CPU backend: generated kernels compiled with numba."""

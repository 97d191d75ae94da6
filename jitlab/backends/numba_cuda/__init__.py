"""The numba.cuda GPU backend: fused kernels generated from groups, device memory, streams."""

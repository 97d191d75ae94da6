"""Backends: each turns fused groups into kernels for one kind of device."""

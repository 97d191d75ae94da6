"""ONNX op handlers, one module per family; importing the package registers them all."""

from . import activation, attention, einsum, elementwise, indexing, loss, nn, norm, reduce, resize, shape, tensor  # noqa: F401

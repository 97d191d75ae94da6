"""ONNX op handlers, one module per family; importing the package registers them all."""

from . import activation, elementwise, indexing, nn, norm, reduce, shape, tensor  # noqa: F401

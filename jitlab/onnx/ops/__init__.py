"""ONNX op handlers, one module per family; importing the package registers them all."""

from . import (  # noqa: F401
    activation,
    attention,
    control,
    einsum,
    elementwise,
    grid,
    indexing,
    loss,
    nn,
    norm,
    quantize,
    recurrent,
    reduce,
    resize,
    rnn,
    shape,
    signal,
    tensor,
)

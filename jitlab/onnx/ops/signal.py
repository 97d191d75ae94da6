"""Signal processing: window functions (constants of their size) and the discrete Fourier
transform as a matmul with cosine and sine matrices."""

from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from ..graph import T
from ..node import Node
from ..reader import dtype_of
from ..registry import onnx_op
from .util import norm_axis, static_dim


def _window(n: Node, formula) -> T:
    size = int(n.static_scalar(0, "size"))
    dtype = dtype_of(n.attr("output_datatype", 1), "attribute 'output_datatype'")
    periods = size if n.attr("periodic", 1) else size - 1
    phase = 2 * np.pi * np.arange(size) / periods
    return n.g.const(formula(phase).astype(dtype))


@onnx_op("HannWindow", 17)
def hann_window(n: Node) -> T:
    return _window(n, lambda phase: np.sin(phase / 2) ** 2)


@onnx_op("HammingWindow", 17)
def hamming_window(n: Node) -> T:
    alpha = 25 / 46
    return _window(n, lambda phase: alpha - (1 - alpha) * np.cos(phase))


@onnx_op("BlackmanWindow", 17)
def blackman_window(n: Node) -> T:
    return _window(n, lambda phase: 0.42 - 0.5 * np.cos(phase) + 0.08 * np.cos(2 * phase))


@onnx_op("DFT", 17, 20)
def dft(n: Node) -> T:
    """Complex values are a trailing dim of 2 (real, imaginary), real ones a trailing dim of 1."""
    x = n.input(0)
    length = n.static_scalar(1, "dft_length", None)
    axis = n.static_scalar(2, "axis", -2) if n.opset >= 20 else n.attr("axis", 1)
    inverse, onesided = bool(n.attr("inverse", 0)), bool(n.attr("onesided", 0))
    axis = norm_axis(n, int(axis), x.rank)
    if axis == x.rank - 1:
        raise n.error(ShapeError, "the axis cannot be the trailing (real, imaginary) dim")
    size = static_dim(n, x.shape[axis], f"dim {axis}")
    if length is None:
        length = 2 * (size - 1) if inverse and onesided else size
    return n.g.op("np.fft", x, axis=axis, length=int(length), inverse=inverse, onesided=onesided)

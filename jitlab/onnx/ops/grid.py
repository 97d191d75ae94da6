"""Sampling grids: AffineGrid, the affine map of a constant base grid of normalized coordinates."""

from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from ..graph import T
from ..node import Node
from ..registry import onnx_op


def base_grid(sizes: list[int], align_corners: bool) -> np.ndarray:
    """(prod(sizes), len(sizes) + 1) homogeneous coordinates in [-1, 1], x (last axis) first."""
    axes = []
    for size in sizes:
        if align_corners:
            axes.append(np.linspace(-1.0, 1.0, size) if size > 1 else np.array([-1.0]))
        else:
            axes.append(-1 + (2 * np.arange(size) + 1) / size)
    mesh = np.meshgrid(*axes, indexing="ij")
    coords = [m.reshape(-1) for m in reversed(mesh)]
    return np.stack(coords + [np.ones(int(np.prod(sizes)))], axis=1)


@onnx_op("AffineGrid", 20)
def affine_grid(n: Node) -> T:
    theta = n.input(0)
    size = n.static_ints(1, "size")
    spatial = size[2:]
    if len(spatial) not in (2, 3) or theta.shape[1:] != (len(spatial), len(spatial) + 1):
        raise n.error(ShapeError, f"theta {theta.type} does not fit the size {size}")
    grid = n.g.const(base_grid(spatial, bool(n.attr("align_corners", 0))).T.astype(theta.dtype))
    points = n.g.op("np.matmul", theta, grid)                  # (N, dims, prod(spatial))
    return points.transpose((0, 2, 1)).reshape((theta.shape[0], *spatial, len(spatial)))

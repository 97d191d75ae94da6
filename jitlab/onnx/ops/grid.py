"""Sampling grids: AffineGrid (the affine map of a constant base grid of normalized
coordinates) and GridSample (a gather of the taps around each grid point, weighted)."""

from __future__ import annotations

import itertools

import numpy as np

from ...errors import ShapeError
from ..graph import T
from ..node import Node
from ..registry import onnx_op
from .util import static_dim, unary, where


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


CUBIC_A = -0.75
MODES = {"bilinear": "linear", "bicubic": "cubic", "linear": "linear", "cubic": "cubic", "nearest": "nearest"}


def _reflect(x: T, low: float, high: float) -> T:
    """x folded back into [low, high] by reflecting at the borders as often as it takes."""
    span = high - low
    below, above = low - x, x - high
    folds_below, folds_above = (unary("trunc", d / span) for d in (below, above))
    rest_below, rest_above = below - folds_below * span, above - folds_above * span
    from_below = where(_even(folds_below), rest_below + low, high - rest_below)
    from_above = where(_even(folds_above), high - rest_above, rest_above + low)
    return where(x < low, from_below, where(x > high, from_above, x))


def _even(count: T) -> T:
    return count.g.op("np.fmod", count, count._lift(2)).eq(0)


def _taps(mode: str, x: T) -> list[tuple[T, T]]:
    """(index, weight) of each tap around coordinate x (nearest: x itself, already rounded)."""
    if mode == "nearest":
        return [(x, x._lift(1))]
    base = unary("floor", x)
    f = x - base
    if mode == "linear":
        return [(base, 1 - f), (base + 1, f)]
    a = CUBIC_A
    weights = [((f + 1) * a - 5 * a) * (f + 1) * (f + 1) + (f + 1) * 8 * a - 4 * a,
               (f * (a + 2) - (a + 3)) * f * f + 1,
               ((1 - f) * (a + 2) - (a + 3)) * (1 - f) * (1 - f) + 1,
               ((2 - f) * a - 5 * a) * (2 - f) * (2 - f) + (2 - f) * 8 * a - 4 * a]
    return [(base + k, w) for k, w in zip((-1, 0, 1, 2), weights)]


def _source(x: T, size: int, align: bool, padding: str, mode: str) -> tuple[T, float, float]:
    """Grid values along one axis as pixel coordinates, moved inside the borders as padding says."""
    x = (x + 1) / 2 * (size - 1) if align else ((x + 1) * size - 1) / 2
    if mode == "nearest":
        x = unary("round", x)
    low, high = (0.0, size - 1.0) if align else (-0.5, size - 0.5)
    if padding == "border":
        outside = (x < low) | (x > high)
        x = where(outside, x.g.op("np.clip", x, min=0.0, max=float(size - 1)), x)
    elif padding == "reflection":
        x = _reflect(x, low, high)
    return x, low, high


def _pixel_index(i: T, size: int, padding: str, low: float, high: float) -> tuple[T, T | None]:
    """An integer tap index inside the axis, and (zeros padding) whether the tap was inside."""
    inside = (i >= 0) & (i < float(size)) if padding == "zeros" else None
    if padding == "reflection":
        i = unary("trunc", _reflect(i, low, high))
    return i.g.op("np.clip", i, min=0.0, max=float(size - 1)).cast(np.int64), inside


@onnx_op("GridSample", 16, 20, 22)
def grid_sample(n: Node) -> T:
    x, grid = n.input(0), n.input(1)
    mode = MODES.get(n.attr("mode", "bilinear" if n.opset < 20 else "linear"))
    padding = n.attr("padding_mode", "zeros")
    if mode is None or padding not in ("zeros", "border", "reflection"):
        raise n.unsupported(f"attribute 'mode' = {n.attr('mode')!r} or 'padding_mode' = {padding!r}")
    align = bool(n.attr("align_corners", 0))
    sizes = [static_dim(n, d, "a spatial dim") for d in x.shape[2:]]
    if grid.shape[-1] != len(sizes) or grid.rank != x.rank:
        raise n.error(ShapeError, f"grid {grid.type} does not fit the input {x.type}")
    batch, channels, out = x.shape[0], x.shape[1], grid.shape[1:-1]
    parts = n.g.ops("np.split", [grid], axis=grid.rank - 1, sizes=(1,) * len(sizes))
    points = int(np.prod(out))
    coords = [n.g.op("np.squeeze", p, axes=(grid.rank - 1,)).reshape((batch, points)) for p in parts[::-1]]
    axes = [_source(c, s, align, padding, mode) for c, s in zip(coords, sizes)]
    flat = x.reshape((batch, channels, int(np.prod(sizes))))
    strides = [int(np.prod(sizes[i + 1:])) for i in range(len(sizes))]
    total = None
    for combo in itertools.product(*[_taps(mode, c) for c, _, _ in axes]):
        index, weight = None, None
        for (i, w), (_, low, high), size, stride in zip(combo, axes, sizes, strides):
            pixel, inside = _pixel_index(i, size, padding, low, high)
            w = where(inside, w, w._lift(0)) if inside is not None else w
            index = pixel * stride if index is None else index + pixel * stride
            weight = w if weight is None else weight * w
        taken = n.g.op("np.take_along_axis", flat, n.g.op("np.broadcast_to", n.g.op(
            "np.expand_dims", index, axes=(1,)), shape=flat.shape[:2] + index.shape[1:]), axis=2)
        weight = n.g.op("np.broadcast_to", weight.cast(x.dtype), shape=index.shape)
        term = taken * n.g.op("np.expand_dims", weight, axes=(1,))
        total = term if total is None else total + term
    return total.reshape((batch, channels) + tuple(out))

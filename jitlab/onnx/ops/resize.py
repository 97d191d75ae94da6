"""Resize and Upsample: separable resampling, one axis at a time.

Along one axis every mode is a fixed linear map from the input positions to the output
positions, computed here from the ONNX formulas (coordinate transformation, then nearest
rounding, linear or cubic weights, antialiasing, exclude_outside, edge clamping). Nearest
becomes a gather (exact for every dtype, inf and NaN included); linear and cubic a
matmul with the weight matrix; tf_crop_and_resize adds the extrapolation value where the
source coordinate falls outside the input.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...dialects.np.composite import work_dtype
from ...errors import ShapeError
from ..graph import FOLD_LIMIT_BYTES, T
from ..node import Node
from ..registry import onnx_op
from .util import norm_axis, static_dim, where

TRANSFORMS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
              "tf_crop_and_resize")
NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


@dataclass(frozen=True)
class Sampling:
    """How one Resize node samples: mode and the attributes that shape the weights."""

    mode: str
    transform: str
    nearest: str = "round_prefer_floor"
    cubic_a: float = -0.75
    exclude_outside: bool = False
    antialias: bool = False
    extrapolation: float = 0.0


def source_coords(s: Sampling, size: int, out: int, scale: float, roi: tuple[float, float]) -> np.ndarray:
    """The input coordinate each output position samples (float64)."""
    y = np.arange(out, dtype=np.float64)
    length = scale * size
    if s.transform == "align_corners":
        return np.zeros(out) if length == 1 else y * (size - 1) / (length - 1)
    if s.transform == "asymmetric":
        return y / scale
    if s.transform == "tf_crop_and_resize":
        start, end = roi
        span = (end - start) * (size - 1)
        x = np.full(out, span / 2) if length == 1 else y * span / (length - 1)
        return x + start * (size - 1)
    if s.transform == "pytorch_half_pixel":
        return np.full(out, -0.5) if length == 1 else (y + 0.5) / scale - 0.5
    if s.transform == "half_pixel_symmetric":
        offset = size / 2 * (1 - out / length)
        return offset + (y + 0.5) / scale - 0.5
    return (y + 0.5) / scale - 0.5


def nearest_index(s: Sampling, x: np.ndarray, size: int) -> np.ndarray:
    frac = x - np.floor(x)
    if s.nearest == "floor":
        idx = np.floor(x)
    elif s.nearest == "ceil":
        idx = np.ceil(x)
    elif s.nearest == "round_prefer_ceil":
        idx = np.where(frac >= 0.5, np.ceil(x), np.floor(x))
    else:
        idx = np.where(frac > 0.5, np.ceil(x), np.floor(x))
    return np.clip(idx, 0, size - 1).astype(np.int64)


def _cubic_weight(t: np.ndarray, a: float) -> np.ndarray:
    t = np.abs(t)
    near = ((a + 2) * t - (a + 3)) * t * t + 1
    far = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return np.where(t <= 1, near, np.where(t < 2, far, 0.0))


def _taps(s: Sampling, ratio: np.ndarray, scale: float) -> tuple[np.ndarray, int]:
    """Weights of the taps around each coordinate, given its fractional part (1 at integers),
    and the number of taps."""
    if s.mode == "linear" and not s.antialias:
        return np.stack([1 - ratio, ratio], axis=1), 2
    if s.mode == "cubic" and not s.antialias:
        offsets = np.array([-1, 0, 1, 2])
        return _cubic_weight(offsets[None, :] - ratio[:, None], s.cubic_a), 4
    shrink = min(scale, 1.0)
    reach = 1 if s.mode == "linear" else 2
    start = int(np.floor(-reach / shrink) + 1)
    offsets = np.arange(start, 2 - start)
    args = (offsets[None, :] - ratio[:, None]) * shrink
    w = np.clip(1 - np.abs(args), 0, 1) if s.mode == "linear" else _cubic_weight(args, s.cubic_a)
    return w / w.sum(axis=1, keepdims=True), len(offsets)


def weight_matrix(s: Sampling, x: np.ndarray, size: int, scale: float) -> np.ndarray:
    """(out, size) weights of linear or cubic sampling at coordinates x, taps clamped to the edge."""
    base = np.floor(x)
    frac = x - base
    ratio = np.where(frac == 0, 1.0, frac)
    weights, n = _taps(s, ratio, scale)
    if n % 2 == 0:
        offset = np.where(frac == 0, -(n // 2), -(n // 2) + 1)
    else:
        offset = np.where(frac <= 0.5, -((n - 1) // 2), -((n - 1) // 2) + 1)
    taps = (base + offset)[:, None].astype(np.int64) + np.arange(n)[None, :]
    if s.exclude_outside:
        weights = np.where((taps < 0) | (taps >= size), 0.0, weights)
        total = weights.sum(axis=1, keepdims=True)
        weights = weights / np.where(total == 0, 1.0, total)
    matrix = np.zeros((len(x), size))
    rows = np.repeat(np.arange(len(x)), n)
    np.add.at(matrix, (rows, np.clip(taps, 0, size - 1).reshape(-1)), weights.reshape(-1))
    return matrix


def resample_axis(x: T, axis: int, s: Sampling, out: int, scale: float, roi: tuple[float, float]) -> T:
    """x resampled along one axis to `out` positions."""
    g = x.g
    size = x.shape[axis]
    coords = source_coords(s, size, out, scale, roi)
    if s.mode == "nearest":
        y = g.op("np.take", x, g.const(nearest_index(s, coords, size)), axis=axis)
    else:
        work = work_dtype(x.dtype) if x.dtype.kind == "f" else np.dtype(np.float64)    # integers exactly
        matrix = g.const(weight_matrix(s, coords, size, scale).T.astype(work))
        perm = tuple(i for i in range(x.rank) if i != axis) + (axis,)
        back = tuple(int(np.argsort(perm)[i]) for i in range(x.rank))
        y = g.op("np.matmul", x.cast(work).transpose(perm), matrix).transpose(back).cast(x.dtype)
    if s.transform == "tf_crop_and_resize":
        outside = (coords < 0) | (coords > size - 1)
        if outside.any():
            shape = tuple(out if i == axis else 1 for i in range(x.rank))
            y = where(g.const(outside.reshape(shape)), y._lift(s.extrapolation), y)
    return y


def _sampling(n: Node) -> Sampling:
    mode = n.attr("mode", "nearest")
    transform = n.attr("coordinate_transformation_mode", "half_pixel")
    nearest = n.attr("nearest_mode", "round_prefer_floor")
    for name, value, allowed in (("mode", mode, ("nearest", "linear", "cubic")),
                                 ("coordinate_transformation_mode", transform, TRANSFORMS),
                                 ("nearest_mode", nearest, NEAREST)):
        if value not in allowed:
            raise n.unsupported(f"attribute '{name}' = {value!r}")
    antialias = bool(n.attr("antialias", 0))
    if antialias and mode == "nearest":
        raise n.unsupported("attribute 'antialias' = 1 with mode 'nearest'")
    return Sampling(mode, transform, nearest, n.attr("cubic_coeff_a", -0.75), bool(n.attr("exclude_outside", 0)),
                    antialias, n.attr("extrapolation_value", 0.0))


@onnx_op("Resize", 11, 13, 18, 19)
def resize(n: Node) -> T:
    x = n.input(0)
    s = _sampling(n)
    sizes = [static_dim(n, d, f"dim {i}") for i, d in enumerate(x.shape)]
    axes = [norm_axis(n, a, x.rank) for a in n.attr("axes", list(range(x.rank)))]
    roi = n.static(1, "roi")
    scales = n.static(2, "scales")
    out_sizes = n.static_ints(3, "sizes")
    policy = n.attr("keep_aspect_ratio_policy", "stretch")
    if scales is not None and scales.size:
        if out_sizes:
            raise n.error(ShapeError, "give scales or sizes, not both")
        scale = dict(zip(axes, _scales(n, scales, 2, 0.0)))
        target = {a: int(scale[a] * sizes[a]) for a in axes}
    elif out_sizes:
        target, scale = _from_sizes(n, sizes, axes, out_sizes, policy)
    else:
        raise n.error(ShapeError, "needs scales or sizes")
    bounds = _roi(roi, axes, x.rank)
    for a in axes:
        if math.isclose(scale[a], 1.0) and target[a] == sizes[a] and bounds[a] == (0.0, 1.0):
            continue
        _check_target(n, s, a, sizes[a], target[a])
        x = resample_axis(x, a, s, target[a], scale[a], bounds[a])
    return x


def _scales(n: Node, scales: np.ndarray, i: int, least: float) -> list[float]:
    """The scales input as floats, each finite and over `least` (or, for 1.0, at least it)."""
    values = [float(v) for v in scales.reshape(-1)]
    for v in values:
        if not math.isfinite(v) or v < least or (v == least and least == 0.0):
            bound = f"> {least}" if least == 0.0 else f">= {least}"
            raise n.error(ShapeError, f"scales (input {i}) {values} must be finite and {bound}")
    return values


def _check_target(n: Node, s: Sampling, axis: int, size: int, out: int) -> None:
    """The resampled axis must have a size >= 0 and a sampling table jitlab can hold as a constant."""
    if out < 0:
        raise n.error(ShapeError, f"axis {axis} would be resized to {out} positions")
    table = out * 8 if s.mode == "nearest" else out * size * 8
    if table > FOLD_LIMIT_BYTES:
        raise n.unsupported(f"resizing axis {axis} from {size} to {out} positions needs a {table}-byte "
                            f"sampling table, over the {FOLD_LIMIT_BYTES}-byte limit for constants made at import")


def _from_sizes(n: Node, sizes, axes, out_sizes, policy: str) -> tuple[dict, dict]:
    if len(out_sizes) != len(axes):
        raise n.error(ShapeError, f"sizes {out_sizes} needs one entry per axis {axes}")
    scale = {a: o / sizes[a] for a, o in zip(axes, out_sizes)}
    if policy == "stretch":
        return dict(zip(axes, out_sizes)), scale
    if policy not in ("not_larger", "not_smaller"):
        raise n.unsupported(f"attribute 'keep_aspect_ratio_policy' = {policy!r}")
    common = (min if policy == "not_larger" else max)(scale.values())
    return {a: int(common * sizes[a] + 0.5) for a in axes}, {a: common for a in axes}


def _roi(roi, axes, rank: int) -> dict[int, tuple[float, float]]:
    bounds = {a: (0.0, 1.0) for a in range(rank)}
    if roi is not None and roi.size:
        values = [float(v) for v in roi.reshape(-1)]
        k = len(values) // 2
        for i, a in enumerate(axes if k == len(axes) else range(rank)):
            bounds[a] = (values[i], values[k + i])
    return bounds


@onnx_op("Upsample", 9, 10)
def upsample(n: Node) -> T:
    """Deprecated Resize: asymmetric coordinates, nearest rounding down."""
    x = n.input(0)
    mode = n.attr("mode", "nearest")
    if mode not in ("nearest", "linear"):
        raise n.unsupported(f"attribute 'mode' = {mode!r}")
    scales = _scales(n, n.static(1, "scales"), 1, 1.0)
    s = Sampling(mode, "asymmetric", "floor")
    for a, scale in enumerate(scales):
        size = static_dim(n, x.shape[a], f"dim {a}")
        if scale != 1.0:
            _check_target(n, s, a, size, int(scale * size))
            x = resample_axis(x, a, s, int(scale * size), scale, (0.0, 1.0))
    return x

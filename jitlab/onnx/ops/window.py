"""Convolutions and pooling of any spatial rank from 1 to 3, built from the 2-D `np` ops.

1-D windows are 2-D windows over a width-1 image. 3-D convolution sums one 2-D
convolution per kernel depth, each over the input depths that kernel slice reads.
3-D pooling is separable: a window over (D, H, W) is a window over D, then one over
(H, W); for average pooling the divisors multiply (a box's count of valid taps is the
product of its per-axis counts), so the result is exact.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ...dialects.np.nn import window_out
from ...errors import ShapeError
from ..graph import T
from ..node import Node
from .util import static_dim


@dataclass(frozen=True)
class Window:
    """Per spatial axis: kernel size, stride, dilation and padding at each end."""

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    begin: tuple[int, ...]
    end: tuple[int, ...]
    ceil_mode: bool = False

    @property
    def rank(self) -> int:
        return len(self.kernel)

    def axis(self, i: int) -> Window:
        """The window along spatial axis i alone (others size 1)."""
        return Window((self.kernel[i],), (self.strides[i],), (self.dilations[i],), (self.begin[i],),
                      (self.end[i],), self.ceil_mode)

    def out(self, sizes) -> tuple[int, ...]:
        return tuple(window_out(sizes[i], self.kernel[i], self.strides[i], self.begin[i], self.end[i],
                                self.dilations[i], self.ceil_mode) for i in range(self.rank))


def window(n: Node, x: T, kernel, ceil_mode: bool = False, dilations: bool = True) -> Window:
    """The window a Conv or pooling node describes over x's spatial dims (auto_pad resolved)."""
    rank = len(kernel)
    if x.rank != rank + 2:
        raise n.error(ShapeError, f"input {x.type} must be N,C and {rank} spatial dims")
    strides = tuple(n.attr("strides", [1] * rank))
    dil = tuple(n.attr("dilations", [1] * rank)) if dilations else (1,) * rank
    pads = n.attr("pads", [0] * 2 * rank)
    if len(strides) != rank or len(dil) != rank or len(pads) != 2 * rank:
        raise n.error(ShapeError, f"strides, dilations and pads must match the {rank} spatial dims")
    begin, end = tuple(pads[:rank]), tuple(pads[rank:])
    auto_pad = n.attr("auto_pad", "NOTSET")
    if auto_pad in ("SAME_UPPER", "SAME_LOWER", "VALID"):
        sizes = [static_dim(n, d, "a spatial dim") for d in x.shape[2:]]
        begin, end = _auto_pads(auto_pad, sizes, kernel, strides, dil)
    elif auto_pad != "NOTSET":
        raise n.unsupported(f"attribute 'auto_pad' = {auto_pad!r}")
    for name, values, least in (("kernel_shape", kernel, 1), ("strides", strides, 1), ("dilations", dil, 1),
                                ("pads", begin + end, 0)):
        if any(v < least for v in values):
            raise n.error(ShapeError, f"attribute '{name}' = {list(values)} must be >= {least}")
    for i, size in enumerate(x.shape[2:]):
        reach = (kernel[i] - 1) * dil[i] + 1
        if isinstance(size, int) and reach > size + begin[i] + end[i]:
            raise n.error(ShapeError, f"the window spans {reach} positions along spatial dim {i}, more than the "
                                      f"{size} of input {x.type} with pads {begin[i]} and {end[i]}")
    return Window(tuple(kernel), strides, dil, begin, end, ceil_mode)


def _auto_pads(mode: str, sizes, kernel, strides, dil) -> tuple[tuple[int, ...], tuple[int, ...]]:
    if mode == "VALID":
        return (0,) * len(sizes), (0,) * len(sizes)
    total = [max((-(-s // st) - 1) * st + (k - 1) * d + 1 - s, 0) for s, k, st, d in zip(sizes, kernel, strides, dil)]
    small = [t // 2 for t in total]
    big = [t - t // 2 for t in total]
    return (tuple(small), tuple(big)) if mode == "SAME_UPPER" else (tuple(big), tuple(small))


def _as_2d(win: Window) -> Window:
    """A 1-D window as a 2-D one over a width-1 image."""
    return Window(win.kernel + (1,), win.strides + (1,), win.dilations + (1,), win.begin + (0,),
                  win.end + (0,), win.ceil_mode)


def _attrs_2d(win: Window) -> dict:
    return {"strides": win.strides, "dilations": win.dilations,
            "pads": (win.begin[0], win.begin[1], win.end[0], win.end[1])}


# -- convolution ---------------------------------------------------------------------
def conv(x: T, w: T, win: Window, groups: int) -> T:
    """Cross-correlation of x (N, C, *spatial) with w (M, C/groups, *kernel); pads >= 0."""
    if win.rank == 1:
        y = conv(x.reshape(x.shape + (1,)), w.reshape(w.shape + (1,)), _as_2d(win), groups)
        return y.reshape(y.shape[:-1])
    if win.rank == 2:
        return x.g.op("np.conv2d", x, w, groups=groups, **_attrs_2d(win))
    return _conv3d(x, w, win, groups)


def _conv3d(x: T, w: T, win: Window, groups: int) -> T:
    g = x.g
    n, c, depth, h, wd = x.shape
    m = w.shape[0]
    x = g.op("np.pad", x, pads=(0, 0, 0, 0, win.begin[0], win.end[0], 0, 0, 0, 0)) if win.begin[0] or win.end[0] \
        else x
    od = window_out(depth, win.kernel[0], win.strides[0], win.begin[0], win.end[0], win.dilations[0])
    if od < 1:
        raise ShapeError(f"the kernel's depth {win.kernel[0]} (dilation {win.dilations[0]}) exceeds the padded "
                         f"input depth {depth + win.begin[0] + win.end[0]}")
    plane = Window(win.kernel[1:], win.strides[1:], win.dilations[1:], win.begin[1:], win.end[1:])
    total = None
    for kd in range(win.kernel[0]):
        start = kd * win.dilations[0]
        depths = g.op("np.slice", x, starts=(0, 0, start, 0, 0),
                      stops=(n, c, start + (od - 1) * win.strides[0] + 1, h, wd),
                      steps=(1, 1, win.strides[0], 1, 1))
        images = depths.transpose((0, 2, 1, 3, 4)).reshape((n * od, c, h, wd))
        kernel = g.op("np.slice", w, starts=(0, 0, kd, 0, 0), stops=(m, w.shape[1], kd + 1) + w.shape[3:],
                      steps=(1,) * 5).reshape((m, w.shape[1]) + w.shape[3:])
        part = conv(images, kernel, plane, groups)
        total = part if total is None else total + part
    oh, ow = total.shape[2:]
    return total.reshape((n, od, m, oh, ow)).transpose((0, 2, 1, 3, 4))


# -- pooling -------------------------------------------------------------------------
def pool(kind: str, x: T, win: Window, count_include_pad: bool = False) -> T:
    """Max ("max") or average ("avg") pooling of x (N, C, *spatial)."""
    if win.rank == 1:
        y = pool(kind, x.reshape(x.shape + (1,)), _as_2d(win), count_include_pad)
        return y.reshape(y.shape[:-1])
    if win.rank == 2:
        attrs = {"kernel": win.kernel, "ceil_mode": win.ceil_mode, **_attrs_2d(win)}
        if kind == "avg":
            attrs["count_include_pad"] = count_include_pad
        return x.g.op(f"np.{kind}_pool2d", x, **attrs)
    n, c, depth, h, w = x.shape
    over_depth = pool(kind, x.reshape((n, c, depth, h * w)), _as_2d(win.axis(0)), count_include_pad)
    od = over_depth.shape[2]
    plane = replace(win, kernel=win.kernel[1:], strides=win.strides[1:], dilations=win.dilations[1:],
                    begin=win.begin[1:], end=win.end[1:])
    y = pool(kind, over_depth.reshape((n, c * od, h, w)), plane, count_include_pad)
    return y.reshape((n, c, od) + y.shape[2:])


def window_sum(x: T, win: Window) -> T:
    """The sum over each window (zero padding), as a convolution with ones per channel."""
    n, c = x.shape[:2]
    flat = x.reshape((n * c, 1) + x.shape[2:])
    ones = x.g.const(np.ones((1, 1) + win.kernel, dtype=x.dtype))
    extra = _ceil_extra(win, x.shape[2:])
    y = conv(flat, ones, replace(win, end=tuple(e + k for e, k in zip(win.end, extra)), ceil_mode=False), 1)
    return y.reshape((n, c) + y.shape[2:])


def _ceil_extra(win: Window, sizes) -> tuple[int, ...]:
    """Padding to add at the end so that a ceil-mode window hanging over the edge exists."""
    if not win.ceil_mode:
        return (0,) * win.rank
    outs = win.out(sizes)
    return tuple(max(0, (o - 1) * s + d * (k - 1) + 1 - (size + b + e))
                 for o, s, d, k, size, b, e in zip(outs, win.strides, win.dilations, win.kernel, sizes,
                                                    win.begin, win.end))

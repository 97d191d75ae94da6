"""VJP rules of contractions and windows: matmul (numpy batching and 1-D rules), conv2d,
max_pool2d and avg_pool2d.

conv2d's input gradient is a transposed convolution built from existing ops: the
cotangent dilated by the stride, padded (or cropped) so that the result covers x
exactly, convolved with the spatially flipped kernel whose in/out channels are swapped
within each group. Its weight gradient is a convolution too, of x with the cotangent as
the kernel: batch and channels trade places, the stride becomes the dilation and the
dilation the stride. avg_pool2d reuses the input gradient with an all-ones depthwise
kernel; max_pool2d has its own op, which sends each window's gradient to its first
maximal element (as XLA's select-and-scatter and PyTorch do).
"""

from __future__ import annotations

import numpy as np

from ...frontend.tracer import Tracer
from ..emit import dilate, flip, pad_axis, static, sum_to, take_range, zeros
from ..registry import Primal, vjp


@vjp("np.matmul")
def _matmul(p: Primal, g):
    a, b = p.args
    # 1-D operands take part as a row (a) or a column (b), as numpy defines it.
    a2 = a if a.ndim > 1 else np.reshape(a, (1,) + a.shape)
    b2 = b if b.ndim > 1 else np.reshape(b, b.shape + (1,))
    g2 = np.reshape(g, g.shape[:g.ndim - (a.ndim > 1) - (b.ndim > 1)] + (a2.shape[-2], b2.shape[-1]))
    da = db = None
    if p.wants[0]:
        da = np.reshape(sum_to(np.matmul(g2, np.swapaxes(b2, -1, -2)), a2.shape), a.shape)
    if p.wants[1] and b2.ndim == 2 and a2.ndim > 2:
        # Shared weights: fold the batch into the rows instead of summing batched products.
        rows = np.reshape(a2, (-1, a2.shape[-1]))
        db = np.reshape(np.matmul(np.swapaxes(rows, 0, 1), np.reshape(g2, (-1, b2.shape[-1]))), b.shape)
    elif p.wants[1]:
        db = np.reshape(sum_to(np.matmul(np.swapaxes(a2, -1, -2), g2), b2.shape), b.shape)
    return [da, db]


def conv_input_grad(g: Tracer, w: Tracer, x_shape, strides, pads, dilations, groups: int) -> Tracer:
    """d conv2d(x, w) / dx applied to g: a stride-1 conv of the dilated g with the flipped kernel."""
    o, cg, kh, kw = w.shape
    c = x_shape[1]
    if 0 in g.shape[2:]:
        return zeros(g.ctx, x_shape, g.dtype)
    swapped = np.transpose(np.reshape(w, (groups, o // groups, cg, kh, kw)), (0, 2, 1, 3, 4))
    kernel = flip(np.reshape(swapped, (c, o // groups, kh, kw)), [2, 3])
    for axis, k, s, d, begin in zip((2, 3), (kh, kw), strides, dilations, pads[:2]):
        front = d * (k - 1) - begin
        g = dilate(g, axis, s)
        g = pad_axis(g, axis, front, x_shape[axis] + d * (k - 1) - front - g.shape[axis])
    return g.ctx.op("np.conv2d", g.value, kernel.value, dilations=tuple(dilations), groups=groups)


def conv_weight_grad(g: Tracer, x: Tracer, w_shape, strides, pads, dilations, groups: int) -> Tracer:
    """d conv2d(x, w) / dw applied to g: x convolved with g as the kernel, batch as channels."""
    n = static(x.shape[0], "the batch size of conv2d's weight gradient (batch becomes channels)")
    o, cg, kh, kw = w_shape
    if 0 in g.shape:
        return zeros(g.ctx, w_shape, g.dtype)
    # x'[c_local, group * N + n] = x[n, group * C/G + c_local]; g'[o, n] = g[n, o].
    xs = np.reshape(np.transpose(np.reshape(x, (n, groups, cg) + x.shape[2:]), (2, 1, 0, 3, 4)),
                    (cg, groups * n) + x.shape[2:])
    gs = np.transpose(g, (1, 0, 2, 3))
    full = g.ctx.op("np.conv2d", xs.value, gs.value, strides=tuple(dilations), pads=tuple(pads),
                    dilations=tuple(strides), groups=groups)
    # Windows past the last kernel tap fit when the stride left input unread: cut them off.
    cut = take_range(take_range(full, 2, 0, kh), 3, 0, kw)
    return np.transpose(cut, (1, 0, 2, 3))


@vjp("np.conv2d")
def _conv2d(p: Primal, g):
    x, w = p.args
    a = p.attrs
    window = (a["strides"], a["pads"], a["dilations"], a["groups"])
    return [conv_input_grad(g, w, x.shape, *window) if p.wants[0] else None,
            conv_weight_grad(g, x, w.shape, *window) if p.wants[1] else None]


@vjp("np.max_pool2d")
def _max_pool2d(p: Primal, g):
    return [p.emit("np.max_pool2d_grad", p.args[0], g, **p.attrs)]


def pool_counts(in_hw, out_hw, kernel, strides, pads, dilations, count_include_pad: bool) -> np.ndarray:
    """What each avg_pool2d window divides by, as an (OH, OW) array: its taps inside x
    (or inside the padded x with count_include_pad)."""
    per_axis = []
    for i, (n_in, n_out, k, s, d) in enumerate(zip(in_hw, out_hw, kernel, strides, dilations)):
        low, high = (-pads[i], n_in + pads[i + 2]) if count_include_pad else (0, n_in)
        taps = np.arange(n_out)[:, None] * s - pads[i] + np.arange(k)[None, :] * d
        per_axis.append(((taps >= low) & (taps < high)).sum(axis=1))
    return np.maximum(np.outer(*per_axis), 1)


@vjp("np.avg_pool2d")
def _avg_pool2d(p: Primal, g):
    x, a = p.args[0], p.attrs
    c = static(x.shape[1], "the channel count of avg_pool2d")
    counts = pool_counts(x.shape[2:], g.shape[2:], a["kernel"], a["strides"], a["pads"], a["dilations"],
                         a["count_include_pad"])
    ones = p.ctx.constant(np.ones((c, 1) + tuple(a["kernel"]), x.dtype))
    scaled = g / p.ctx.constant(counts.astype(x.dtype))
    return [conv_input_grad(scaled, ones, x.shape, a["strides"], a["pads"], a["dilations"], c)]

"""Contractions and windows of the `np` dialect: matmul, conv2d and 2-D pooling (NCHW)."""

from __future__ import annotations

import numpy as np

from ...ir.attributes import BOOL, INT, INTS
from ...ir.opdef import Trait, defop, static_int
from ...ir.types import TensorType
from .common import FLOAT, NUMBER, NUMERIC, attr, check_dtype, same_dtype


def _matmul_infer(ctx, types, attrs):
    a, b = types
    dtype = same_dtype(ctx, types)
    check_dtype(ctx, a, NUMBER, "the operands")
    if a.rank == 0 or b.rank == 0:
        raise ctx.error("matmul needs operands of rank >= 1 (use np.mul for scalars)")
    a_shape = a.shape if a.rank > 1 else (1,) + a.shape
    b_shape = b.shape if b.rank > 1 else b.shape + (1,)
    ctx.equal(a_shape[-1], b_shape[-2], f"contracted dims of {a} @ {b}")
    batch = ctx.broadcast(a_shape[:-2], b_shape[:-2])
    out = batch + ((a_shape[-2],) if a.rank > 1 else ()) + ((b_shape[-1],) if b.rank > 1 else ())
    return [TensorType(out, dtype)]


defop("np.matmul", operands=2, traits=(Trait.PURE, Trait.CONTRACTION), infer=_matmul_infer,
      reference=lambda a, b: np.matmul(a, b), operand_names=("a", "b"),
      doc="Matrix product with numpy's batching and 1-D rules.")


def window_out(size: int, kernel: int, stride: int, pad_begin: int, pad_end: int, dilation: int,
               ceil_mode: bool = False) -> int:
    """Output length of a sliding window (ONNX/PyTorch rule: no window starts in the end padding)."""
    span = size + pad_begin + pad_end - dilation * (kernel - 1) - 1
    if span < 0:
        return 0
    n = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (n - 1) * stride >= size + pad_begin:
        n -= 1
    return n


def _spatial(ctx, x: TensorType, attrs, kernel) -> tuple[int, int]:
    strides, pads, dil = attrs["strides"], attrs["pads"], attrs["dilations"]
    if len(strides) != 2 or len(pads) != 4 or len(dil) != 2 or len(kernel) != 2:
        raise ctx.error("strides and dilations take 2 entries, pads 4 (top, left, bottom, right)")
    if min(strides) < 1 or min(dil) < 1 or min(pads) < 0 or min(kernel) < 1:
        raise ctx.error("strides, dilations and kernel sizes must be >= 1 and pads >= 0")
    h = static_int(x.shape[2], ctx, "the height")
    w = static_int(x.shape[3], ctx, "the width")
    ceil = attrs.get("ceil_mode", False)
    return (window_out(h, kernel[0], strides[0], pads[0], pads[2], dil[0], ceil),
            window_out(w, kernel[1], strides[1], pads[1], pads[3], dil[1], ceil))


def _conv_infer(ctx, types, attrs):
    x, w = types
    dtype = same_dtype(ctx, types)
    check_dtype(ctx, x, FLOAT, "the operands")
    if x.rank != 4 or w.rank != 4:
        raise ctx.error(f"conv2d takes x as N,C,H,W and w as O,C/groups,KH,KW; got {x} and {w}")
    groups = attrs["groups"]
    c = static_int(x.shape[1], ctx, "the channel count")
    o = static_int(w.shape[0], ctx, "the output channel count")
    if groups < 1 or c % groups or o % groups:
        raise ctx.error(f"groups={groups} must divide the input ({c}) and output ({o}) channels")
    ctx.equal(w.shape[1], c // groups, f"weight {w} must have C/groups = {c // groups} input channels")
    kernel = (static_int(w.shape[2], ctx, "KH"), static_int(w.shape[3], ctx, "KW"))
    return [TensorType((x.shape[0], o) + _spatial(ctx, x, attrs, kernel), dtype)]


def _windows(xp, kh, kw, oh, ow, strides, dil):
    """The strided slice of padded input that kernel position (kh, kw) reads."""
    y0, x0 = kh * dil[0], kw * dil[1]
    return xp[:, :, y0:y0 + (oh - 1) * strides[0] + 1:strides[0], x0:x0 + (ow - 1) * strides[1] + 1:strides[1]]


def _conv2d(x, w, strides, pads, dilations, groups):
    n, c, _, _ = x.shape
    o, cg, kh_, kw_ = w.shape
    x64 = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh = window_out(x.shape[2], kh_, strides[0], pads[0], pads[2], dilations[0])
    ow = window_out(x.shape[3], kw_, strides[1], pads[1], pads[3], dilations[1])
    wg = w.astype(np.float64).reshape(groups, o // groups, cg, kh_, kw_)
    out = np.zeros((n, groups, o // groups, oh, ow))
    if oh and ow:
        for kh in range(kh_):
            for kw in range(kw_):
                patch = _windows(x64, kh, kw, oh, ow, strides, dilations).reshape(n, groups, cg, oh, ow)
                out += np.einsum("ngcyx,goc->ngoyx", patch, wg[..., kh, kw])
    return out.reshape(n, o, oh, ow).astype(x.dtype)


_WINDOW_ATTRS = {"strides": attr(INTS, (1, 1)), "pads": attr(INTS, (0, 0, 0, 0)),
                 "dilations": attr(INTS, (1, 1))}

defop("np.conv2d", operands=2, attrs={**_WINDOW_ATTRS, "groups": attr(INT, 1)},
      traits=(Trait.PURE, Trait.CONTRACTION), infer=_conv_infer, reference=_conv2d,
      operand_names=("x", "w"), doc="2-D convolution (cross-correlation), NCHW; pads are (top, left, bottom, right).")


def _pool_infer(ctx, types, attrs):
    (x,) = types
    check_dtype(ctx, x, NUMERIC, "the operand")
    if x.rank != 4:
        raise ctx.error(f"pooling takes N,C,H,W, got {x}")
    h, w = _spatial(ctx, x, attrs, attrs["kernel"])
    if attrs["kernel"][0] * attrs["kernel"][1] and (h == 0 or w == 0) and x.shape[2] and x.shape[3]:
        raise ctx.error("the kernel is larger than the padded input")
    return [x.with_shape(x.shape[:2] + (h, w))]


def _pool(x, kernel, strides, pads, dilations, ceil_mode, reduce, fill):
    oh = window_out(x.shape[2], kernel[0], strides[0], pads[0], pads[2], dilations[0], ceil_mode)
    ow = window_out(x.shape[3], kernel[1], strides[1], pads[1], pads[3], dilations[1], ceil_mode)
    # Extra end padding lets ceil-mode windows hang over the edge; `fill` never wins.
    extra_h = max(0, (oh - 1) * strides[0] + dilations[0] * (kernel[0] - 1) + 1 - (x.shape[2] + pads[0] + pads[2]))
    extra_w = max(0, (ow - 1) * strides[1] + dilations[1] * (kernel[1] - 1) + 1 - (x.shape[3] + pads[1] + pads[3]))
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2] + extra_h), (pads[1], pads[3] + extra_w)),
                constant_values=fill)
    # Reduced window by window into one array rather than stacked first: the stack was 9 copies
    # of the output for a 3x3 window (ResNet-50's max pool took 2.2 ms at O1, where it runs this).
    parts = [_windows(xp, kh, kw, oh, ow, strides, dilations)
             for kh in range(kernel[0]) for kw in range(kernel[1])]
    return reduce(parts, oh, ow)


def _running(combine, parts, dtype):
    """combine(...combine(parts[0], parts[1])..., parts[-1]) in one array of `dtype`, in order."""
    out = parts[0].astype(dtype)
    for p in parts[1:]:
        combine(out, p, out=out)
    return out


def _max_pool(x, kernel, strides, pads, dilations, ceil_mode):
    fill = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    return _pool(x, kernel, strides, pads, dilations, ceil_mode,
                 lambda parts, oh, ow: _running(np.maximum, parts, x.dtype), fill)


def _avg_pool(x, kernel, strides, pads, dilations, ceil_mode, count_include_pad):
    def average(parts, oh, ow):
        total = _running(np.add, parts, np.float64)
        h_lo = -pads[0] if count_include_pad else 0
        h_hi = x.shape[2] + (pads[2] if count_include_pad else 0)
        w_lo = -pads[1] if count_include_pad else 0
        w_hi = x.shape[3] + (pads[3] if count_include_pad else 0)
        rows = _counts(oh, kernel[0], strides[0], dilations[0], pads[0], h_lo, h_hi)
        cols = _counts(ow, kernel[1], strides[1], dilations[1], pads[1], w_lo, w_hi)
        return (total / np.maximum(np.outer(rows, cols), 1)).astype(x.dtype)

    return _pool(x, kernel, strides, pads, dilations, ceil_mode, average, 0)


def _counts(n_out, k, stride, dilation, pad_begin, lo, hi):
    """Per output position, how many of its k taps fall in [lo, hi) (input coordinates)."""
    starts = np.arange(n_out) * stride - pad_begin
    taps = starts[:, None] + np.arange(k)[None, :] * dilation
    return ((taps >= lo) & (taps < hi)).sum(axis=1)


_POOL_ATTRS = {"kernel": attr(INTS), **_WINDOW_ATTRS, "ceil_mode": attr(BOOL, False)}
defop("np.max_pool2d", attrs=_POOL_ATTRS, traits=(Trait.PURE,), infer=_pool_infer,
      reference=_max_pool, operand_names=("x",), doc="Max over 2-D windows, NCHW; padding never wins.")


def _avg_pool_infer(ctx, types, attrs):
    check_dtype(ctx, types[0], FLOAT, "the operand")
    return _pool_infer(ctx, types, attrs)


defop("np.avg_pool2d", attrs={**_POOL_ATTRS, "count_include_pad": attr(BOOL, False)},
      traits=(Trait.PURE,), infer=_avg_pool_infer,
      reference=_avg_pool, operand_names=("x",), doc="Mean over 2-D windows, NCHW.")

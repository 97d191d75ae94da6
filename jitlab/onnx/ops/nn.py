"""Contractions and windows: MatMul, Gemm, Conv, ConvTranspose and pooling."""

from __future__ import annotations

from ...errors import ShapeError
from ..graph import T
from ..node import Node
from ..registry import onnx_op
from .util import positive_attr, static_dim, unary
from .window import Window, conv, pool, window, window_sum


@onnx_op("MatMul", 9, 13)
def matmul(n: Node) -> T:
    return n.g.op("np.matmul", n.input(0), n.input(1))


@onnx_op("Gemm", 9, 11, 13)
def gemm(n: Node) -> T:
    """alpha * A' @ B' + beta * C. With transB the product is computed as (B @ A'^T)^T, keeping the
    weight in the [N, K] layout the model stores: no transposed copy, and every output is the same
    row-by-row dot product whatever its column (as onnxruntime computes it)."""
    a, b, c = n.input(0), n.input(1), n.input(2, required=n.opset < 11)
    alpha, beta = n.attr("alpha", 1.0), n.attr("beta", 1.0)
    trans_a, trans_b = n.attr("transA", 0), n.attr("transB", 0)
    if trans_b:
        y = n.g.op("np.matmul", b, a if trans_a else a.transpose((1, 0))).transpose((1, 0))
    else:
        y = n.g.op("np.matmul", a.transpose((1, 0)) if trans_a else a, b)
    if alpha != 1.0:
        y = y * alpha
    if c is not None:
        y = y + (c if beta == 1.0 else c * beta)
    return y


def kernel_of(n: Node, w: T) -> tuple[int, ...]:
    kernel = tuple(static_dim(n, d, "a kernel dim") for d in w.shape[2:])
    given = n.attr("kernel_shape", None)
    if given is not None and tuple(given) != kernel:
        raise n.error(ShapeError, f"kernel_shape {given} does not match the weight {w.type}")
    return kernel


def _bias(y: T, b: T | None) -> T:
    return y if b is None else y + b.reshape(b.shape + (1,) * (y.rank - 2))


@onnx_op("Conv", 1, 11, 22)
def conv_(n: Node) -> T:
    x, w, b = n.input(0), n.input(1), n.input(2, required=False)
    win = window(n, x, kernel_of(n, w))
    if not 1 <= win.rank <= 3:
        raise n.unsupported(f"{win.rank}-D convolution (1-D to 3-D are supported)")
    sizes = [static_dim(n, d, "a spatial dim") for d in x.shape[2:]]
    if min(win.out(sizes), default=1) < 1:
        raise n.error(ShapeError, f"the kernel {list(win.kernel)} (dilations {list(win.dilations)}) does not fit "
                                  f"the padded input {x.type}")
    return _bias(conv(x, w, win, n.attr("group", 1)), b)


@onnx_op("ConvTranspose", 1, 11, 22)
def conv_transpose(n: Node) -> T:
    """Convolution of the stride-dilated input with the flipped, transposed kernel; output
    padding, pads and output_shape then decide which part of the full result is kept."""
    x, w, b = n.input(0), n.input(1), n.input(2, required=False)
    kernel = kernel_of(n, w)
    rank, groups = len(kernel), n.attr("group", 1)
    if not 1 <= rank <= 3 or x.rank != rank + 2:
        raise n.unsupported(f"ConvTranspose of input {x.type} with a {rank}-D kernel")
    sizes = [static_dim(n, d, "a spatial dim") for d in x.shape[2:]]
    strides = n.attr("strides", [1] * rank)
    dil = n.attr("dilations", [1] * rank)
    out_pad = n.attr("output_padding", [0] * rank)
    begin, lengths = _transpose_extent(n, sizes, kernel, strides, dil, out_pad)
    spread = _dilate(x, strides)
    cut, pads_b, pads_e = [], [], []
    for i in range(rank):
        span = (kernel[i] - 1) * dil[i]
        pb = span - begin[i]
        pe = lengths[i] + span - spread.shape[2 + i] - pb
        cut.append((max(-pb, 0), max(-pe, 0)))
        pads_b.append(max(pb, 0))
        pads_e.append(max(pe, 0))
    spread = _cut(spread, cut)
    flipped = _flip_kernel(w, groups)
    win = Window(kernel, (1,) * rank, tuple(dil), tuple(pads_b), tuple(pads_e))
    return _bias(conv(spread, flipped, win, groups), b)


def _transpose_extent(n: Node, sizes, kernel, strides, dil, out_pad) -> tuple[list[int], list[int]]:
    """Per axis: where the kept output starts in the full result, and its length."""
    rank = len(sizes)
    full = [strides[i] * (sizes[i] - 1) + out_pad[i] + (kernel[i] - 1) * dil[i] + 1 for i in range(rank)]
    output_shape = n.attr("output_shape", None)
    auto_pad = n.attr("auto_pad", "NOTSET")
    pads = n.attr("pads", None)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER") and pads is None:
        lengths = list(output_shape or [sizes[i] * strides[i] for i in range(rank)])
        total = [full[i] - lengths[i] for i in range(rank)]
        begin = [t // 2 if auto_pad == "SAME_UPPER" else t - t // 2 for t in total]
        return begin, lengths
    if auto_pad not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise n.unsupported(f"attribute 'auto_pad' = {auto_pad!r}")
    pads = pads or [0] * 2 * rank
    lengths = list(output_shape) if output_shape else [full[i] - pads[i] - pads[rank + i] for i in range(rank)]
    return list(pads[:rank]), lengths


def _dilate(x: T, strides) -> T:
    """Inserts stride-1 zeros between neighbours along each spatial axis."""
    for i, s in enumerate(strides):
        if s == 1:
            continue
        axis = 2 + i
        d = x.shape[axis]
        grown = x.g.op("np.expand_dims", x, axes=(axis + 1,))
        pads = tuple(p for k in range(grown.rank) for p in ((0, s - 1) if k == axis + 1 else (0, 0)))
        grown = x.g.op("np.pad", grown, pads=pads)
        merged = grown.reshape(x.shape[:axis] + (d * s,) + x.shape[axis + 1:])
        stops = tuple((d - 1) * s + 1 if k == axis else e for k, e in enumerate(merged.shape))
        x = x.g.op("np.slice", merged, starts=(0,) * x.rank, stops=stops, steps=(1,) * x.rank)
    return x


def _cut(x: T, cut) -> T:
    if all(b == 0 and e == 0 for b, e in cut):
        return x
    starts = (0, 0) + tuple(b for b, _ in cut)
    stops = x.shape[:2] + tuple(d - e for d, (_, e) in zip(x.shape[2:], cut))
    return x.g.op("np.slice", x, starts=starts, stops=stops, steps=(1,) * x.rank)


def _flip_kernel(w: T, groups: int) -> T:
    """ConvTranspose's (C, M/groups, *k) kernel as Conv's (M, C/groups, *k), spatially flipped."""
    c, mg = w.shape[:2]
    kernel = w.shape[2:]
    rank = len(kernel)
    w = w.reshape((groups, c // groups, mg) + kernel).transpose((0, 2, 1) + tuple(range(3, 3 + rank)))
    w = w.reshape((groups * mg, c // groups) + kernel)
    return w.g.op("np.slice", w, starts=(0, 0) + tuple(k - 1 for k in kernel), stops=w.shape[:2] + (-1,) * rank,
                  steps=(1, 1) + (-1,) * rank)


@onnx_op("MaxPool", 8, 10, 11, 12, 22)
def max_pool(n: Node) -> T:
    x = n.input(0)
    if n.wants_output(1):
        raise n.unsupported("output 1 (Indices) is not supported")
    n.attr("storage_order", 0)      # only orders the Indices output
    win = window(n, x, n.attr("kernel_shape"), bool(n.attr("ceil_mode", 0)), dilations=n.opset >= 10)
    return pool("max", x, win)


@onnx_op("AveragePool", 7, 10, 11, 19, 22)
def average_pool(n: Node) -> T:
    x = n.input(0)
    win = window(n, x, n.attr("kernel_shape"), bool(n.attr("ceil_mode", 0)), dilations=n.opset >= 19)
    return pool("avg", x, win, bool(n.attr("count_include_pad", 0)))


@onnx_op("LpPool", 11, 18, 22)
def lp_pool(n: Node) -> T:
    x = n.input(0)
    p = positive_attr(n, "p", 2)
    win = window(n, x, n.attr("kernel_shape"), bool(n.attr("ceil_mode", 0)), dilations=n.opset >= 18)
    return _lp_root(window_sum(_lp_power(unary("abs", x), p), win), p)


def _lp_power(x: T, p: int) -> T:
    return x * x if p == 2 else x ** float(p)


def _lp_root(x: T, p: int) -> T:
    return unary("sqrt", x) if p == 2 else x ** (1.0 / p)


def _spatial(x: T) -> tuple[int, ...]:
    return tuple(range(2, x.rank))


@onnx_op("GlobalAveragePool", 1, 22)
def global_average_pool(n: Node) -> T:
    x = n.input(0)
    return x.reduce("mean", _spatial(x), keepdims=True)


@onnx_op("GlobalMaxPool", 1, 22)
def global_max_pool(n: Node) -> T:
    x = n.input(0)
    return x.reduce("max", _spatial(x), keepdims=True)


@onnx_op("GlobalLpPool", 2, 22)
def global_lp_pool(n: Node) -> T:
    x = n.input(0)
    p = positive_attr(n, "p", 2)
    return _lp_root(_lp_power(unary("abs", x), p).reduce("sum", _spatial(x), keepdims=True), p)

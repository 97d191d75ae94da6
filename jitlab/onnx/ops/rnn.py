"""RNN, GRU and LSTM, each direction one scf.for over the (static) sequence length.

The input projection of every step is one matmul up front; each step then adds the
recurrent projection of the previous state and applies the cell's gate equations as the
ONNX spec writes them; the loop body is imported once, so no sequence is too long. With
`sequence_lens`, a step past a batch entry's length keeps its state and outputs zeros, which
also makes the reverse direction start at each entry's end.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ...errors import ShapeError
from ...ir.core import Region
from ...ir.types import TensorType
from ..graph import T
from ..node import Node
from ..registry import onnx_op
from ..subgraph import open_region
from .control import I64, I64_SCALAR
from .util import maximum, positive_attr, slice_axis, static_dim, unary, where

DEFAULTS = {"RNN": ("Tanh",), "GRU": ("Sigmoid", "Tanh"), "LSTM": ("Sigmoid", "Tanh", "Tanh")}
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
# Default (alpha, beta) of the activations that take them.
_PARAMS = {"Affine": (1.0, 0.0), "LeakyRelu": (0.01, 0.0), "ThresholdedRelu": (1.0, 0.0),
           "ScaledTanh": (1.0, 1.0), "HardSigmoid": (0.2, 0.5), "Elu": (1.0, 0.0)}


def activation(name: str, alpha: float, beta: float) -> Callable[[T], T]:
    table = {
        "Relu": lambda x: maximum(x, 0), "Tanh": lambda x: unary("tanh", x),
        "Sigmoid": lambda x: unary("sigmoid", x), "Affine": lambda x: x * alpha + beta,
        "LeakyRelu": lambda x: where(x < 0, x * alpha, x), "ThresholdedRelu": lambda x: where(x > alpha, x, x._lift(0)),
        "ScaledTanh": lambda x: unary("tanh", x * beta) * alpha,
        "HardSigmoid": lambda x: x.g.op("np.clip", x * alpha + beta, min=0.0, max=1.0),
        "Elu": lambda x: where(x < 0, unary("expm1", x) * alpha, x), "Softsign": lambda x: x / (unary("abs", x) + 1),
        "Softplus": lambda x: unary("log1p", unary("exp", x)),
    }
    return table[name]


@dataclass
class Cell:
    """What one direction of a recurrent node computes with."""

    kind: str
    hidden: int
    acts: list[Callable[[T], T]]
    clip: float | None
    linear_before_reset: bool = False
    input_forget: bool = False


def _cell(n: Node, kind: str, direction: int) -> Cell:
    per_direction = len(DEFAULTS[kind])
    names = n.attr("activations", list(DEFAULTS[kind]) * (2 if n.attr("direction", "forward") == "bidirectional"
                                                          else 1))
    alphas, betas = n.attr("activation_alpha", []), n.attr("activation_beta", [])
    acts = []
    for k in range(direction * per_direction, (direction + 1) * per_direction):
        name = names[k] if k < len(names) else DEFAULTS[kind][k % per_direction]
        if name not in ("Relu", "Tanh", "Sigmoid", "Softsign", "Softplus") and name not in _PARAMS:
            raise n.unsupported(f"activation {name!r}")
        alpha, beta = _PARAMS.get(name, (0.0, 0.0))
        acts.append(activation(name, alphas[k] if k < len(alphas) else alpha, betas[k] if k < len(betas) else beta))
    return Cell(kind, positive_attr(n, "hidden_size", n.input(2).shape[-1]), acts, n.attr("clip", None),
                bool(n.attr("linear_before_reset", 0)), bool(n.attr("input_forget", 0)))


def _gate(cell: Cell, x: T, k: int) -> T:
    """Slice k of the gates' concatenated last dim."""
    return slice_axis(x, x.rank - 1, k * cell.hidden, (k + 1) * cell.hidden)


def _clipped(cell: Cell, x: T) -> T:
    return x if cell.clip is None else x.g.op("np.clip", x, min=-cell.clip, max=cell.clip)


def _step(cell: Cell, xw: T, h: T, c: T | None, r: T, rb: T, p: T | None) -> tuple[T, T | None]:
    """One time step: xw is the step's input projection (input bias included)."""
    hr = h.g.op("np.matmul", h, r)
    if cell.kind == "RNN":
        return cell.acts[0](_clipped(cell, xw + hr + rb)), None
    if cell.kind == "GRU":
        return _gru(cell, xw, h, hr, r, rb), None
    return _lstm(cell, xw + hr + rb, c, p)


def _gru(cell: Cell, xw: T, h: T, hr: T, r: T, rb: T) -> T:
    f, gate = cell.acts, (lambda x, k: _gate(cell, x, k))
    z = f[0](_clipped(cell, gate(xw, 0) + gate(hr, 0) + gate(rb, 0)))
    reset = f[0](_clipped(cell, gate(xw, 1) + gate(hr, 1) + gate(rb, 1)))
    if cell.linear_before_reset:
        recurrent = reset * (gate(hr, 2) + gate(rb, 2))
    else:
        r_h = slice_axis(r, 1, 2 * cell.hidden, 3 * cell.hidden)
        recurrent = h.g.op("np.matmul", reset * h, r_h) + gate(rb, 2)
    candidate = f[1](_clipped(cell, gate(xw, 2) + recurrent))
    return (1 - z) * candidate + z * h


def _lstm(cell: Cell, pre: T, c: T, p: T | None) -> tuple[T, T]:
    """Gates i, o, f, c of the pre-activations, with peepholes p (i, o, f) on the cell state."""
    f = cell.acts

    def gate(k: int, state: T) -> T:
        return _gate(cell, pre, k) if p is None else _gate(cell, pre, k) + _gate(cell, p, k) * state

    i = f[0](_clipped(cell, gate(0, c)))
    forget = 1 - i if cell.input_forget else f[0](_clipped(cell, gate(2, c)))
    c_new = forget * c + i * f[1](_clipped(cell, _gate(cell, pre, 3)))
    o = f[0](_clipped(cell, gate(1, c_new)))
    return o * f[2](c_new), c_new


def _of_direction(n: Node, i: int, d: int) -> T | None:
    """Input i's slice for direction d, without the direction axis."""
    x = n.input(i, required=False)
    return None if x is None else n.g.op("np.squeeze", slice_axis(x, 0, d, d + 1), axes=(0,))


def _weights(n: Node, cell: Cell, d: int, dtype) -> tuple[T, T, T, T]:
    """W and R transposed for right-multiplication, and the input and recurrent biases."""
    w, r, b = (_of_direction(n, i, d) for i in (1, 2, 3))
    gates = GATES[cell.kind] * cell.hidden
    if b is None:
        b = n.g.const(np.zeros(2 * gates, dtype))
    return w.transpose((1, 0)), r.transpose((1, 0)), slice_axis(b, 0, 0, gates), slice_axis(b, 0, gates, 2 * gates)


def _direction(n: Node, cell: Cell, x: T, d: int, reverse: bool, lens: T | None) -> tuple[T, T, T | None]:
    """Runs one direction over every step as one scf.for; returns the outputs (S, B, H) in time order
    and the last states."""
    g = n.g
    w, r, wb, rb = _weights(n, cell, d, x.dtype)
    projected = g.op("np.matmul", x, w) + wb                                  # (S, B, gates)
    h, c = (_initial(n, cell, x, i, d) for i in (5, 6))
    p = _of_direction(n, 7, d) if cell.kind == "LSTM" else None
    steps, carried = x.shape[0], [h] + ([c] if c is not None else [])
    ys = TensorType((steps, *h.shape), h.dtype)
    body = open_region(g, [I64_SCALAR, *(v.type for v in carried), ys])
    bg = body.g
    i, h_in, *rest = (T(a, bg) for a in body.block.args[:2 + len(carried)])
    c_in = rest[0] if c is not None else None
    t = bg.scalar(steps - 1, I64) - i if reverse else i
    step_in = bg.capture(projected)
    xw = bg.op("np.dynamic_slice", step_in, t, axes=(0,), sizes=(1,), index_axes=(0,)).reshape(step_in.shape[1:])
    h_new, c_new = _step(cell, xw, h_in, c_in, bg.capture(r), bg.capture(rb), bg.capture(p) if p is not None else None)
    out = h_new
    if lens is not None:
        active = t < bg.capture(lens)                                         # (B, 1)
        h_new, out = where(active, h_new, h_in), where(active, h_new, h_new._lift(0))
        c_new = where(active, c_new, c_in) if c_in is not None else None
    row = out.reshape((1, *out.shape))
    buf = bg.op("np.dynamic_update_slice", rest[-1], row, t, axes=(0,), sizes=(1,), index_axes=(0,))
    body.finish("scf.yield", [h_new, *([c_new] if c is not None else []), buf])
    op = g.builder.create("scf.for", [v.value for v in (g.scalar(0, I64), g.scalar(steps, I64), g.scalar(1, I64),
                                                        *carried, g.full(ys.shape, 0, ys.dtype))] + body.captures,
                          result_types=[*(v.type for v in carried), ys], regions=[Region([body.block])])
    outs = [T(v, g) for v in op.results]
    return outs[-1], outs[0], outs[1] if c is not None else None


def _initial(n: Node, cell: Cell, x: T, i: int, d: int) -> T | None:
    """The initial hidden (i = 5) or cell (i = 6, LSTM only) state of direction d."""
    if i == 6 and cell.kind != "LSTM":
        return None
    given = _of_direction(n, i, d)
    return given if given is not None else n.g.full((x.shape[1], cell.hidden), 0, x.dtype)


def _recurrent(n: Node, kind: str):
    x = n.input(0)
    layout = n.attr("layout", 0)
    if layout:
        x = x.transpose((1, 0, 2))
    if static_dim(n, x.shape[0], "the sequence length") == 0:
        raise n.unsupported("the sequence is empty (length 0)")
    lens = n.input(4, required=False)
    if lens is not None:
        lens = lens.cast(np.int64).reshape((x.shape[1], 1))
    direction = n.attr("direction", "forward")
    if direction not in ("forward", "reverse", "bidirectional"):
        raise n.unsupported(f"attribute 'direction' = {direction!r}")
    if n.input(1).shape[0] != (2 if direction == "bidirectional" else 1):
        raise n.error(ShapeError, f"W {n.input(1).type} has the wrong number of directions for {direction}")
    runs = [(0, direction == "reverse")] + ([(1, True)] if direction == "bidirectional" else [])
    results = [_direction(n, _cell(n, kind, d), x, d, reverse, lens) for d, reverse in runs]
    y = n.g.op("np.stack", *[ys for ys, _, _ in results], axis=1)                  # (S, D, B, H)
    y_h = n.g.op("np.stack", *[h for _, h, _ in results], axis=0)
    y_c = n.g.op("np.stack", *[c for _, _, c in results], axis=0) if kind == "LSTM" else None
    if layout:
        y, y_h = y.transpose((2, 0, 1, 3)), y_h.transpose((1, 0, 2))
        y_c = y_c.transpose((1, 0, 2)) if y_c is not None else None
    return (y, y_h) + ((y_c,) if kind == "LSTM" else ())


@onnx_op("RNN", 7, 14, 22)
def rnn(n: Node):
    return _recurrent(n, "RNN")


@onnx_op("GRU", 7, 14, 22)
def gru(n: Node):
    return _recurrent(n, "GRU")


@onnx_op("LSTM", 7, 14, 22)
def lstm(n: Node):
    return _recurrent(n, "LSTM")

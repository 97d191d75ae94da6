"""Loop, Scan and If as `scf` ops (dialects/scf.py), their subgraphs imported as the ops' regions.

- Loop: an scf.for over range(M) when the body passes its condition through unchanged, else an
  scf.while carrying the iteration number and the condition. The body's condition is honoured
  when the node has no condition input too, as onnxruntime does (the spec's text calls it ignored).
  Scan outputs are stacked into carried buffers written with np.dynamic_update_slice; their length
  must be known when importing, so an scf.while (whose trip count is data) with scan outputs is
  refused.
- Scan (opset 9+): an scf.for over the scanned axis, each scan input read with np.dynamic_slice.
- If: an scf.if whose two branches yield the outputs (the same types in both); when the condition is
  known at import time (shape logic), the branch taken is imported inline and the other not at all.
"""

from __future__ import annotations

import numpy as np
import onnx

from ...dialects import scf  # noqa: F401  (registers the scf ops)
from ...errors import ModelError, ShapeError
from ...ir.builder import Builder
from ...ir.core import Block, Region
from ...ir.types import TensorType
from ..graph import Graph, T
from ..node import Node
from ..registry import onnx_op
from ..subgraph import Body, import_body, inline
from .util import norm_axis

I64 = np.dtype(np.int64)
I64_SCALAR = TensorType((), I64)


def _scalar(n: Node, x: T, dtype, what: str) -> T:
    """A one-element tensor as a scalar of `dtype`."""
    if len(x.shape) and any(not isinstance(d, int) or d != 1 for d in x.shape):
        raise n.error(ShapeError, f"{what} must hold one value, got {x.type}")
    return x.reshape(()).cast(dtype)


def _build(g: Graph, name: str, operands: list, types: list, blocks: list[Block], attrs=None) -> list[T]:
    op = g.builder.create(name, [x.value if isinstance(x, T) else x for x in operands], attrs, types,
                          [Region([b]) for b in blocks])
    return [T(r, g) for r in op.results]


def _check_carried(n: Node, graph: onnx.GraphProto, first: int, inits: list[T], outs: list[T]) -> None:
    """Each carried value keeps its type through the body (an scf loop's carries are loop-invariant)."""
    for k, (x, y) in enumerate(zip(inits, outs)):
        if x.type != y.type:
            name = graph.output[first + k].name
            raise n.unsupported(f"loop-carried value '{name}' is {x.type} on entry and {y.type} after the body: "
                                "jitlab's loops carry values of one shape and dtype")


def _stack(body: Body, ys: list[T], at: list[T], position: int, length) -> list[TensorType]:
    """Writes each per-iteration value ys[k] at row at[k] of a carried buffer (new block arguments
    from `position` on); returns the buffers' types and leaves the updated buffers in body.outputs."""
    types, updated = [], []
    for k, (y, i) in enumerate(zip(ys, at)):
        t = TensorType((length, *y.shape), y.dtype)
        buf = T(body.block.insert_arg(position + k, t), body.g)
        row = y.reshape((1, *y.shape))
        updated.append(body.g.op("np.dynamic_update_slice", buf, row, i, axes=(0,), sizes=(1,), index_axes=(0,)))
        types.append(t)
    body.outputs = updated
    return types


# -- Loop ---------------------------------------------------------------------------------------
def _passes_condition(graph: onnx.GraphProto) -> bool:
    """Whether the body's condition output is its condition input (through Identity nodes)."""
    producers = {o: node for node in graph.node for o in node.output}
    name = graph.output[0].name
    while name in producers and producers[name].op_type == "Identity":
        name = producers[name].input[0]
    return name == graph.input[1].name


@onnx_op("Loop", 1, 11, 13, 16, 19, 21, 23, 24, 25)
def loop(n: Node) -> list[T]:
    m, c = n.input(0, required=False), n.input(1, required=False)
    inits = [n.input(i) for i in range(2, n.num_inputs)]
    graph = n.graph("body")
    n_scan = len(graph.output) - 1 - len(inits)
    if len(graph.input) != 2 + len(inits) or n_scan < 0:
        raise n.error(ModelError, f"its body takes {len(graph.input)} inputs and gives {len(graph.output)} outputs; "
                                  f"with {len(inits)} loop-carried value(s) it must take {2 + len(inits)} and give at "
                                  f"least {1 + len(inits)}")
    if m is not None and _passes_condition(graph):
        return _counted(n, graph, m, c, inits, n_scan)
    if n_scan:
        raise n.unsupported(f"{n_scan} scan output(s) of a Loop whose body computes its condition: how many "
                            "iterations run, and so their length, depends on the data")
    if m is None and c is None:
        raise n.unsupported("it has neither a trip count nor a condition: the loop never ends")
    return _while(n, graph, m, c, inits)


def _counted(n: Node, graph: onnx.GraphProto, m: T, c: T | None, inits: list[T], n_scan: int) -> list[T]:
    """scf.for(0, M): the body passes the condition through, so the loop runs M times when it is
    true on entry to the node (or absent), and not at all otherwise."""
    g = n.g
    if n_scan:
        count = int(n.static_scalar(0, "the trip count of a Loop with scan outputs"))
        go = c is None or bool(n.static_scalar(1, "the condition of a Loop with scan outputs"))
        length = max(count, 0) if go else 0
        hi = g.scalar(length, I64)
    else:
        hi = _scalar(n, m, I64, "the trip count M")
        if c is not None:
            hi = g.op("np.where", _scalar(n, c, np.bool_, "the condition"), hi, g.scalar(0, I64))
    types = [x.type for x in inits]
    body = import_body(n.importer, n, graph, [I64_SCALAR, *types],
                       lambda bg, args, pre: [args[0], bg.scalar(True, np.bool_), *args[1:]])
    carried, ys = body.outputs[1:1 + len(inits)], body.outputs[1 + len(inits):]
    _check_carried(n, graph, 1, inits, carried)
    if n_scan and length == 0:      # no iteration: the body only gives the scan outputs' types
        return [*inits, *(g.full((0, *y.shape), 0, y.dtype) for y in ys)]
    i = T(body.block.args[0], body.g)
    buffers = _stack(body, ys, [i] * len(ys), 1 + len(inits), length if n_scan else 0)
    body.finish("scf.yield", [*carried, *body.outputs])
    zeros = [g.full(t.shape, 0, t.dtype) for t in buffers]
    return _build(g, "scf.for", [g.scalar(0, I64), hi, g.scalar(1, I64), *inits, *zeros, *body.captures],
                  [*types, *buffers], [body.block])


def _while(n: Node, graph: onnx.GraphProto, m: T | None, c: T | None, inits: list[T]) -> list[T]:
    """scf.while carrying (iteration, condition, M if given, values...): runs while the condition
    holds and the iteration is below M."""
    g = n.g
    head = [g.scalar(0, I64), g.scalar(True, np.bool_) if c is None else _scalar(n, c, np.bool_, "the condition")]
    if m is not None:
        head.append(_scalar(n, m, I64, "the trip count M"))
    k = len(head)
    types = [x.type for x in head + inits]
    body = import_body(n.importer, n, graph, types, lambda bg, args, pre: [args[0], args[1], *args[k:]])
    _check_carried(n, graph, 1, inits, body.outputs[1:])
    args = [T(a, body.g) for a in body.block.args]
    step = [args[0] + 1, _scalar(n, body.outputs[0], np.bool_, "the body's condition output"), *args[2:k]]
    body.finish("scf.yield", [*step, *body.outputs[1:]])
    before = Block([a.type for a in body.block.args])
    b = Builder(before, loc=g.builder.loc)
    go = before.args[1]
    if m is not None:
        below = b.create("np.less", [before.args[0], before.args[2]]).result
        go = b.create("np.logical_and", [go, below]).result
    b.create("scf.condition", [go], result_types=[])
    outs = _build(g, "scf.while", [*head, *inits, *body.captures], types, [before, body.block],
                  {"max_iterations": None})
    return outs[k:]


# -- Scan ---------------------------------------------------------------------------------------
def _directions(n: Node, name: str, count: int) -> list[int]:
    values = n.attr(name, [0] * count)
    if len(values) != count or any(v not in (0, 1) for v in values):
        raise n.error(ModelError, f"attribute '{name}' = {values} must hold {count} values, each 0 or 1")
    return values


def _axes(n: Node, name: str, count: int) -> list[int]:
    values = n.attr(name, [0] * count)
    if len(values) != count:
        raise n.error(ModelError, f"attribute '{name}' = {values} must hold {count} values")
    return values


def _to_front(x: T, axis: int) -> T:
    return x.transpose([axis, *(a for a in range(x.rank) if a != axis)])


def _from_front(x: T, axis: int) -> T:
    perm = list(range(1, x.rank))
    perm.insert(axis, 0)
    return x.transpose(perm)


@onnx_op("Scan", 9, 11, 16, 19, 21, 23, 24, 25)
def scan(n: Node) -> list[T]:
    g, graph = n.g, n.graph("body")
    n_in = n.attr("num_scan_inputs")
    everything = n.inputs()
    n_state = len(everything) - n_in
    n_out = len(graph.output) - n_state
    if n_in < 1 or n_state < 0 or n_out < 0 or len(graph.input) != len(everything):
        raise n.error(ModelError, f"num_scan_inputs = {n_in} with {len(everything)} inputs and a body of "
                                  f"{len(graph.input)} inputs and {len(graph.output)} outputs do not fit together")
    states = everything[:n_state]
    in_dirs, out_dirs = _directions(n, "scan_input_directions", n_in), _directions(n, "scan_output_directions", n_out)
    xs = [_to_front(x, norm_axis(n, a, x.rank, "scan_input_axes value"))
          for x, a in zip(everything[n_state:], _axes(n, "scan_input_axes", n_in))]
    out_axes = _axes(n, "scan_output_axes", n_out)
    lengths = {x.shape[0] for x in xs}
    if len(lengths) != 1:
        raise n.error(ShapeError, "the scan inputs have different lengths along their scan axes: "
                                  f"{sorted(map(str, lengths))}")
    (length,) = lengths
    if not isinstance(length, int):
        raise n.unsupported(f"the scanned axis has the symbolic length {length}; jitlab's Scan needs it static")
    types = [s.type for s in states]

    def positions(bg: Graph, i: T, dirs: list[int]) -> list[T]:
        back = bg.scalar(length - 1, I64) - i if any(dirs) else None
        return [back if d else i for d in dirs]

    def bind(bg: Graph, args: list[T], pre: list[T]) -> list[T]:
        rows = [bg.op("np.dynamic_slice", x, at, axes=(0,), sizes=(1,), index_axes=(0,)).reshape(x.shape[1:])
                for x, at in zip(pre, positions(bg, args[0], in_dirs))]
        return [*args[1:], *rows]

    body = import_body(n.importer, n, graph, [I64_SCALAR, *types], bind, pre_captures=xs)
    carried, ys = body.outputs[:n_state], body.outputs[n_state:]
    _check_carried(n, graph, 0, states, carried)
    at = positions(body.g, T(body.block.args[0], body.g), out_dirs)
    buffers = _stack(body, ys, at, 1 + n_state, length)
    body.finish("scf.yield", [*carried, *body.outputs])
    zeros = [g.full(t.shape, 0, t.dtype) for t in buffers]
    outs = _build(g, "scf.for", [g.scalar(0, I64), g.scalar(length, I64), g.scalar(1, I64), *states, *zeros,
                                 *body.captures], [*types, *buffers], [body.block])
    stacked = [_from_front(y, norm_axis(n, a, y.rank, "scan_output_axes value"))
               for y, a in zip(outs[n_state:], out_axes)]
    return [*outs[:n_state], *stacked]


# -- If -----------------------------------------------------------------------------------------
@onnx_op("If", 1, 11, 13, 16, 19, 21, 23, 24, 25)
def if_(n: Node) -> list[T]:
    g = n.g
    pred = _scalar(n, n.input(0), np.bool_, "the condition")
    if pred.known is not None:      # decided at import time (shape logic): only the branch taken, inline
        taken = n.graph("then_branch" if bool(pred.known) else "else_branch")
        n.graph("else_branch" if bool(pred.known) else "then_branch")
        return inline(n.importer, n, taken)
    then = import_body(n.importer, n, n.graph("then_branch"), [], lambda bg, args, pre: [])
    other = import_body(n.importer, n, n.graph("else_branch"), [], lambda bg, args, pre: [],
                        pre_captures=[T(v, g) for v in then.captures])
    for v in other.captures[len(then.captures):]:
        then.block.add_arg(v.type, v.name)
    got = ([x.type for x in then.outputs], [x.type for x in other.outputs])
    if got[0] != got[1]:
        raise n.unsupported(f"its branches give different types, then_branch ({', '.join(map(str, got[0]))}) and "
                            f"else_branch ({', '.join(map(str, got[1]))}): an scf.if has one result type per output")
    then.finish("scf.yield", then.outputs)
    other.finish("scf.yield", other.outputs)
    return _build(g, "scf.if", [pred, *other.captures], got[0], [then.block, other.block])

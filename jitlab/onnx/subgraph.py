"""A node's GraphProto attribute (Loop's and Scan's `body`, If's branches) imported as the single
block of an `scf` op's region.

The regions of `scf` ops are isolated: what a subgraph reads from the enclosing graph becomes a
*capture*, an operand of the op and a block argument after the op's own arguments. Values known
at import time (initializers, constants, folded shapes) are made again inside the block instead,
so shape subgraphs in a body still fold.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import onnx

from ..errors import ModelError, UnsupportedOp
from ..ir.builder import Builder
from ..ir.core import Block, Value
from ..ir.types import TensorType
from .graph import CONSTANT_LIMIT, Graph, T
from .reader import tensor_to_array
from .scopes import node_scopes

Bind = Callable[[Graph, list[T], list[T]], list[T]]     # (graph, block args, pre-captures) -> body inputs


@dataclass
class Body:
    """An imported subgraph: its block, the graph emitting into it, and its outputs."""

    block: Block
    g: Graph
    outputs: list[T]
    captures: list[Value] = field(default_factory=list)     # outer values, in the order of their block args

    def finish(self, terminator: str, values: Sequence[T]) -> None:
        """Ends the block with `terminator` over `values`."""
        self.g.builder.create(terminator, [v.value for v in values], result_types=[])


def free_names(graph: onnx.GraphProto) -> list[str]:
    """The names a subgraph (its nested subgraphs included) reads from the scopes around it."""
    defined = {vi.name for vi in graph.input} | {t.name for t in graph.initializer}
    free: list[str] = []

    def use(name: str) -> None:
        if name and name not in defined and name not in free:
            free.append(name)

    for node in graph.node:
        for name in node.input:
            use(name)
        for a in node.attribute:
            for sub in [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs):
                for name in free_names(sub):
                    use(name)
        defined.update(o for o in node.output if o)
    for vi in graph.output:
        use(vi.name)
    return free


class RegionGraph(Graph):
    """A graph emitting into a region's block: a weight it makes (an initializer, a large folded
    array) is made in the graph around it and captured, so every weight stays in the program's body."""

    def __init__(self, outer: Graph, block: Block, capture: Callable[[T], T]):
        super().__init__(outer.program)
        self.outer, self.capture = outer, capture
        self.builder = Builder(block, constraints=outer.program.constraints, loc=outer.builder.loc)
        self.weight_hint = outer.weight_hint

    def weight(self, hint: str, array: np.ndarray) -> Value:
        inner = self.capture(T(self.outer.weight(hint, array), self.outer)).value
        self.known[inner] = np.asarray(array)
        return inner


def open_region(outer: Graph, arg_types: Sequence[TensorType]) -> Body:
    """A new block of arguments `arg_types` and a RegionGraph emitting into it; what it reads from
    `outer` it captures (`g.capture`), as new block arguments after the others."""
    block = Block(list(arg_types))
    by_value: dict[Value, T] = {}

    def capture(x: T) -> T:
        if x.value not in by_value:
            by_value[x.value] = T(block.add_arg(x.type, x.value.name), body.g)
            body.captures.append(x.value)
        return by_value[x.value]

    body = Body(block, RegionGraph(outer, block, capture), [])
    return body


def import_body(importer, node, graph: onnx.GraphProto, arg_types: Sequence[TensorType], bind: Bind,
                pre_captures: Sequence[T] = ()) -> Body:
    """Imports `graph` into a new block whose arguments are `arg_types`, then the captures
    (`pre_captures` first); `bind` gives the subgraph's inputs from those arguments."""
    _check_tensor_types(node, graph)
    outer_env = importer.env
    body = open_region(importer.g, arg_types)
    block, g = body.block, body.g
    pre = [g.capture(x) for x in pre_captures]
    env: dict[str, T] = {}
    for name in free_names(graph):
        if name in outer_env:
            env[name] = _inner(outer_env[name], g)
    inputs = bind(g, [T(a, g) for a in block.args[:len(arg_types)]], pre)
    if len(inputs) != len(graph.input):
        raise node.error(ModelError, f"its subgraph '{graph.name}' takes {len(graph.input)} input(s); "
                                     f"{node.op_type} gives it {len(inputs)}")
    env.update((vi.name, x) for vi, x in zip(graph.input, inputs))
    body.outputs = _run(importer, node, graph, g, env)
    return body


def inline(importer, node, graph: onnx.GraphProto) -> list[T]:
    """Imports an input-less subgraph (the branch an If takes, known at import time) into the graph
    around it; its own names stay its own. Returns its outputs."""
    _check_tensor_types(node, graph)
    return _run(importer, node, graph, importer.g, dict(importer.env))


def _run(importer, node, graph: onnx.GraphProto, g: Graph, env: dict[str, T]) -> list[T]:
    """Converts the subgraph's initializers and nodes with `g` and `env`; returns its outputs."""
    outer = importer.g, importer.env, importer.scopes
    importer.g, importer.env = g, env
    try:
        for t in graph.initializer:
            env[t.name] = T(g.weight(t.name, tensor_to_array(t, importer.source.folder)), g)
        importer.scopes = node_scopes(graph)
        for i, proto in enumerate(graph.node):
            importer._convert(proto, i)
    finally:
        importer.g, importer.env, importer.scopes = outer
    missing = [vi.name for vi in graph.output if vi.name not in env]
    if missing:
        raise node.error(ModelError, f"output '{missing[0]}' of its subgraph '{graph.name}' is not produced "
                                     "by any node of it or of the graphs around it")
    return [env[vi.name] for vi in graph.output]


def _inner(x: T, g: RegionGraph) -> T:
    """An outer value inside the block: small known ones made again there (so shapes fold), the
    rest captured (known ones stay known)."""
    array = x.known
    if array is not None and (array.dtype == object or array.size <= CONSTANT_LIMIT):
        return T(g.constant(np.asarray(array)), g)
    inner = g.capture(x)
    if array is not None:
        g.known[inner.value] = array
    return inner


def _check_tensor_types(node, graph: onnx.GraphProto) -> None:
    """Sequence, optional and map values in a subgraph's inputs or outputs are refused up front."""
    for vi in list(graph.input) + list(graph.output):
        kind = vi.type.WhichOneof("value")
        if kind not in (None, "tensor_type"):
            raise node.error(UnsupportedOp, f"subgraph '{graph.name}' {'input' if vi in graph.input else 'output'} "
                                            f"'{vi.name}' is a {kind}: jitlab's loops and branches carry tensors only")

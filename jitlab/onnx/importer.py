"""`jl.onnx.load`: an ONNX model to a Program of `np` ops.

Graph inputs become program inputs (dynamic dims become symbolic dims), initializers
become weights, and each node goes to the handler its op type has at the model's opset.
Ops are tagged with a Location naming the node, so errors and the explorer can point at
it; values keep the ONNX tensor names.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Mapping

import numpy as np
import onnx

from ..errors import (
    CompileError,
    DTypeError,
    InputError,
    JitlabError,
    ModelError,
    OutOfMemoryError,
    ShapeError,
    UnsupportedError,
    UnsupportedOp,
)
from ..ir.builder import FrontendClock
from ..ir.core import Location
from ..ir.dtypes import DTYPE_NAMES, dtype_name
from ..ir.program import Program
from ..ir.shapes import Sym, sym
from ..ir.types import TensorType
from ..ir.verifier import verify
from ..passes.basic import DCE
from ..passes.manager import PassContext
from .graph import Graph, T, check_dims
from .node import Node, StaticInputNeeded, tag
from .reader import Source, dtype_of, read_model, tensor_to_array
from .registry import HANDLERS, Handler, canonical_domain, lookup
from .scopes import node_scopes

_TOO_BIG = ("array is too big", "Maximum allowed size exceeded", "Maximum allowed dimension exceeded")
_RESERVED = DTYPE_NAMES | {"true", "false", "none", "inf", "nan", "dense", "loc", "func", "where"}


def load(model, *, values: Mapping[str, np.ndarray] | None = None,
         shapes: Mapping[str, tuple] | None = None) -> Program:
    """An ONNX model (path, bytes or onnx.ModelProto) as a Program.

    `values` fixes graph inputs to constants (inputs that give shapes, axes or pads must be
    known at compile time); `shapes` overrides the declared shapes of graph inputs (ints,
    or str for a symbolic dim)."""
    from . import ops  # noqa: F401  (registers the handlers)

    clock = FrontendClock()
    program = Importer(read_model(model), values or {}, shapes or {}).run()
    clock.stamp(program)
    return program


def symbol_name(text: str) -> str:
    """A dim_param as a symbol name the IR text can read back."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", text) or "d"
    if name[0].isdigit() or name in _RESERVED:
        name = "s_" + name
    return name


class Importer:
    """One import of one model."""

    def __init__(self, source: Source, values: Mapping[str, np.ndarray], shapes: Mapping[str, tuple]):
        self.source, self.model = source, source.model
        self.values, self.shapes = dict(values), dict(shapes)
        graph = self.model.graph
        self.program = Program(graph.name or "onnx_model")
        self.g = Graph(self.program)
        self.env: dict[str, T] = {}
        self.opsets = {canonical_domain(o.domain): o.version for o in self.model.opset_import}
        self._unknown = 0
        self._handlers: dict[tuple[str, str, int], Handler] = {}     # by (op type, domain, opset), this model's

    def run(self) -> Program:
        """Inputs, weights, every node in order, outputs; then unused ops and weights are dropped."""
        graph = self.model.graph
        self._check_names(graph)
        self._check_opsets(graph)
        if not graph.output:
            raise ModelError(f"{self.source.label}: the model's graph has no outputs, so it computes nothing")
        initializers = {t.name for t in graph.initializer}
        for vi in graph.input:
            if vi.name not in initializers:
                self._add_input(vi)
        for t in graph.initializer:
            self.env[t.name] = T(self.g.weight(t.name, tensor_to_array(t, self.source.folder)), self.g)
        self.scopes = node_scopes(graph)
        for i, node in enumerate(graph.node):
            self._convert(node, i)
        self._set_outputs(graph)
        DCE().apply(self.program, PassContext())
        verify(self.program)
        self._keep_own_names(graph)
        return self.program

    def _keep_own_names(self, graph: onnx.GraphProto) -> None:
        """The model's own name of each input the IR spells otherwise."""
        own = {self.env[vi.name].value: vi.name for vi in graph.input if vi.name in self.env}
        ir_names = self.program.input_names
        self.program.own_names = {name: own[a] for a, name in zip(self.program.inputs, ir_names)
                                  if own.get(a, name) != name}

    def _check_names(self, graph: onnx.GraphProto) -> None:
        declared = {vi.name for vi in graph.input}
        for name in self.values.keys() | self.shapes.keys():
            if name not in declared:
                raise InputError(f"'{name}' is not an input of the model (inputs: "
                                 f"{', '.join(vi.name for vi in graph.input)})")
        if graph.sparse_initializer:
            raise UnsupportedOp(f"sparse initializer '{graph.sparse_initializer[0].values.name}' is not supported")

    def _check_opsets(self, graph: onnx.GraphProto) -> None:
        """Every domain a node uses is one jitlab has handlers for, at an opset onnx knows."""
        known, newest = {domain for domain, _, _ in HANDLERS}, onnx.defs.onnx_opset_version()
        for index, proto in enumerate(graph.node):
            domain = canonical_domain(proto.domain)
            label = Node(proto, index, 0, self.env, self.g, None).label
            if domain not in self.opsets:
                raise UnsupportedError(f"{label}: its domain '{proto.domain}' is not imported by the model "
                                       f"(opset_import: {_opsets_text(self.model)})")
            if domain not in known:
                raise UnsupportedError(f"{label}: the domain '{proto.domain}' (opset {self.opsets[domain]}) is not "
                                       "supported: jitlab's ONNX importer has ops of the default ONNX domain only")
            if domain == "" and self.opsets[domain] > newest:
                raise UnsupportedError(f"the model imports the default ONNX domain at opset {self.opsets[domain]}, "
                                       f"newer than opset {newest}, the newest that onnx {onnx.__version__} (and so "
                                       f"jitlab) knows; its ops may mean something else there")

    # -- inputs -----------------------------------------------------------------------
    def _add_input(self, vi: onnx.ValueInfoProto) -> None:
        t = self._input_type(vi)
        if vi.name in self.values:
            array = np.asarray(self.values[vi.name])
            if array.dtype != t.dtype or array.ndim != t.rank or any(
                    isinstance(d, int) and d != n for d, n in zip(t.shape, array.shape)):
                raise InputError(f"the value given for input '{vi.name}' is {dtype_name(array.dtype)}"
                                 f"{list(array.shape)}, the model declares {t}")
            self.g.weight_hint = vi.name
            self.env[vi.name] = T(self.g.constant(array), self.g)
            return
        arg = self.program.body.add_arg(t, vi.name)
        self.env[vi.name] = T(arg, self.g)

    def _input_type(self, vi: onnx.ValueInfoProto) -> TensorType:
        kind = vi.type.WhichOneof("value")
        if kind != "tensor_type":
            raise UnsupportedOp(f"graph input '{vi.name}' is a {kind or 'value of unknown type'}; "
                                "jitlab takes tensors only")
        tt = vi.type.tensor_type
        dtype = dtype_of(tt.elem_type, f"graph input '{vi.name}'")
        if vi.name in self.shapes:
            t = TensorType(self._override(vi, tt), dtype)
        elif not tt.HasField("shape"):
            raise ShapeError(f"graph input '{vi.name}' has no shape in the model; give one with "
                             f"shapes={{'{vi.name}': (...)}}")
        else:
            t = TensorType(tuple(self._dim(d, vi.name, axis) for axis, d in enumerate(tt.shape.dim)), dtype)
        check_dims(t, f"graph input '{vi.name}' is {t}")
        return t

    def _override(self, vi: onnx.ValueInfoProto, tt) -> tuple:
        shape = tuple(sym(symbol_name(d)) if isinstance(d, str) else _dim_value(d, f"shapes['{vi.name}']", axis)
                      for axis, d in enumerate(self.shapes[vi.name]))
        if tt.HasField("shape") and len(tt.shape.dim) != len(shape):
            raise ShapeError(f"shapes['{vi.name}'] has rank {len(shape)}, the model declares rank "
                             f"{len(tt.shape.dim)}")
        return shape

    def _dim(self, d, name: str, axis: int) -> int | Sym:
        if d.HasField("dim_value"):
            return _dim_value(d.dim_value, f"graph input '{name}'", axis)
        if d.dim_param:
            return sym(symbol_name(d.dim_param))
        self._unknown += 1
        return sym(f"unk{self._unknown}")

    # -- nodes ------------------------------------------------------------------------
    def _convert(self, proto: onnx.NodeProto, index: int) -> None:
        domain = canonical_domain(proto.domain)
        node = Node(proto, index, self.opsets.get(domain, 0), self.env, self.g, self.source.folder)
        node.importer = self
        self.g.builder.loc = Location(self.source.label, index, node.label, self.scopes[index])
        self.g.weight_hint = next((o for o in proto.output if o), proto.op_type) + "_const"
        try:
            key = (proto.op_type, domain, node.opset)
            handler = self._handlers.get(key)
            if handler is None:           # ResNet-50 looks up 418 nodes of 10 kinds
                handler = self._handlers[key] = lookup(*key)
            outputs = handler(node)
            node.check_all_read()
            self._bind_outputs(node, outputs)
        except StaticInputNeeded:
            raise
        except JitlabError as e:
            raise _with_node(e, node) from None
        except Exception as e:  # a bug in a handler: still an error the user can read, never a crash
            if isinstance(e, MemoryError) or (isinstance(e, ValueError) and str(e).startswith(_TOO_BIG)):
                # a handler's own array for a huge tensor (an index table): numpy refuses sizes
                # past what it can address with a ValueError of its own
                raise tag(OutOfMemoryError(f"{node.label}: importing it needs more memory than there is: {e}"),
                          node.label) from None
            raise tag(CompileError(f"{node.label}: internal error in the ONNX importer: "
                                   f"{type(e).__name__}: {e}"), node.label) from e

    def _bind_outputs(self, node: Node, outputs) -> None:
        outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
        for k, name in enumerate(node.proto.output):
            if not name:
                continue
            if k >= len(outputs) or outputs[k] is None:
                raise node.unsupported(f"output {k} ('{name}') is not supported")
            self.g.adopt_name(outputs[k].value, name)
            self.env[name] = outputs[k]

    def _set_outputs(self, graph: onnx.GraphProto) -> None:
        results = []
        for vi in graph.output:
            if vi.name not in self.env:
                raise ModelError(f"graph output '{vi.name}' is not produced by any node, initializer or input")
            t = self.env[vi.name]
            _check_declared(vi, t)
            results.append(t.value)
        self.program.set_outputs(results)


def _dim_value(value, what: str, axis: int) -> int:
    """A declared dim as an int, refusing negative ones (ONNX writes an unknown dim as a name or nothing)."""
    try:
        value = operator.index(value)
    except TypeError:
        raise ShapeError(f"{what}: dim {axis} is {value!r}, not an int or a str") from None
    if value < 0:
        raise ShapeError(f"{what}: dim {axis} is {value}; dims are >= 0 (an unknown dim is written as a "
                         "dim_param name or left empty)")
    return value


def _opsets_text(model: onnx.ModelProto) -> str:
    return ", ".join(f"'{o.domain}' {o.version}" for o in model.opset_import) or "none"


def _check_declared(vi: onnx.ValueInfoProto, t: T) -> None:
    """The importer's result type must agree with what the model declares for an output."""
    if vi.type.WhichOneof("value") is None:
        return
    if vi.type.WhichOneof("value") != "tensor_type":
        raise UnsupportedOp(f"graph output '{vi.name}' is not a tensor")
    tt = vi.type.tensor_type
    if tt.elem_type and dtype_of(tt.elem_type, f"graph output '{vi.name}'") != t.dtype:
        raise DTypeError(f"graph output '{vi.name}': the model declares "
                         f"{dtype_name(dtype_of(tt.elem_type, vi.name))}, the import gives {t.type}")
    if not tt.HasField("shape"):
        return
    if len(tt.shape.dim) != t.rank:
        raise ShapeError(f"graph output '{vi.name}' has rank {len(tt.shape.dim)} in the model, the import "
                         f"gives {t.type}")
    for axis, (d, mine) in enumerate(zip(tt.shape.dim, t.shape)):
        if d.HasField("dim_value") and isinstance(mine, int) and d.dim_value != mine:
            raise ShapeError(f"graph output '{vi.name}': dim {axis} is {d.dim_value} in the model, "
                             f"the import gives {t.type}")


def _with_node(e: JitlabError, node: Node) -> JitlabError:
    """The same error with the node named, unless it already names it."""
    if getattr(e, "onnx_node", None):
        return e
    try:
        new = type(e)(f"{node.label}: {e}")
    except TypeError:
        new = CompileError(f"{node.label}: {e}")
    return tag(new, node.label)

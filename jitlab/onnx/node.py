"""What a handler sees of one ONNX node: its inputs as tensors, its attributes with the
spec's defaults, values it needs at compile time, and errors that name the node.

The node records which attributes and inputs its handler read; an attribute or optional
input present on the node that the handler never looked at makes the import fail with
UnsupportedOp, so nothing in a model is silently ignored.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import AttributeProto

from ..errors import JitlabError, ModelError, ShapeError, UnsupportedOp
from ..ir.shapes import Sym
from .graph import Graph, T
from .reader import tensor_to_array

REQUIRED = object()


class StaticInputNeeded(UnsupportedOp):
    """A node needs at compile time the value of a tensor computed from graph inputs (a
    shape, axes, pads...). The backend compiles again with those inputs' values fixed."""

    def __init__(self, message: str, tensor: str):
        super().__init__(message)
        self.tensor = tensor


def tag(error: JitlabError, node: str) -> JitlabError:
    """Marks an error as already naming its node."""
    error.onnx_node = node
    return error


class Node:
    """One node being imported, as its handler sees it."""

    def __init__(self, proto: onnx.NodeProto, index: int, opset: int, env: dict[str, T], g: Graph,
                 folder: str | None):
        self.proto, self.index, self.opset, self.g = proto, index, opset, g
        self.op_type = proto.op_type
        self.name = proto.name
        self._env, self._folder = env, folder
        self._attrs = {a.name: a for a in proto.attribute}
        self.read_attrs: set[str] = set()
        self.read_inputs: set[int] = set()
        self.importer = None        # the Importer, set by it: control-flow handlers import subgraphs through it

    @property
    def label(self) -> str:
        return f"{self.op_type} node '{self.name}'" if self.name else f"{self.op_type} node #{self.index}"

    def error(self, cls: type[JitlabError], message: str) -> JitlabError:
        """An error of type `cls` naming this node."""
        return tag(cls(f"{self.label}: {message}"), self.label)

    def unsupported(self, message: str) -> UnsupportedOp:
        """UnsupportedOp naming this node; `message` names the attribute or input and its value."""
        return self.error(UnsupportedOp, message)

    # -- inputs -----------------------------------------------------------------------
    @property
    def num_inputs(self) -> int:
        return len(self.proto.input)

    def has_input(self, i: int) -> bool:
        return i < len(self.proto.input) and self.proto.input[i] != ""

    def input(self, i: int, required: bool = True) -> T | None:
        """Input `i` as a tensor; None for a missing optional input."""
        if not self.has_input(i):
            if required:
                raise self.error(JitlabError, f"input {i} is required")
            return None
        self.read_inputs.add(i)
        name = self.proto.input[i]
        if name not in self._env:
            raise self.error(ModelError, f"input {i} ('{name}') is not produced by any earlier node, "
                                         "initializer or graph input")
        return self._env[name]

    def inputs(self) -> list[T]:
        """Every present input (variadic ops)."""
        return [self.input(i) for i in range(self.num_inputs) if self.has_input(i)]

    def static(self, i: int, what: str) -> np.ndarray | None:
        """The value of input `i` at compile time (None when the input is absent)."""
        x = self.input(i, required=False)
        if x is None:
            return None
        value = x.known
        if value is None:
            name = self.proto.input[i]
            raise tag(StaticInputNeeded(f"{self.label}: {what} (input {i}, '{name}') must be known at compile "
                                        "time; it is computed from graph inputs", name), self.label)
        return value

    def static_ints(self, i: int, what: str) -> list[int] | None:
        """Input `i` as a list of ints known at compile time (symbolic dims refused)."""
        value = self.static(i, what)
        if value is None:
            return None
        if value.ndim > 1:
            raise self.error(ShapeError, f"{what} (input {i}) must be a 1-D list, got shape {list(value.shape)}")
        flat = value.reshape(-1).tolist()
        if any(isinstance(v, Sym) for v in flat):
            raise self.unsupported(f"{what} (input {i}) depends on symbolic dims {value.tolist()}")
        return [int(v) for v in flat]

    def static_scalar(self, i: int, what: str, default=None):
        """Input i as one Python number known at compile time, or `default` when absent."""
        value = self.static(i, what)
        if value is None:
            return default
        if value.size != 1:
            raise self.error(JitlabError, f"{what} (input {i}) must hold one value, got shape {list(value.shape)}")
        v = value.reshape(-1)[0]
        if isinstance(v, Sym):
            raise self.unsupported(f"{what} (input {i}) is the symbolic dim {v}")
        return v.item() if isinstance(v, np.generic) else v

    # -- attributes -------------------------------------------------------------------
    def has_attr(self, name: str) -> bool:
        return name in self._attrs

    def attr(self, name: str, default: Any = REQUIRED) -> Any:
        """Attribute `name` as a Python value (ints, floats, str, lists, arrays), or `default`."""
        self.read_attrs.add(name)
        a = self._attrs.get(name)
        if a is None:
            if default is REQUIRED:
                raise self.error(JitlabError, f"missing required attribute '{name}'")
            return default
        return self._decode(a)

    def graph(self, name: str) -> onnx.GraphProto:
        """The GraphProto attribute `name` (a Loop's body, an If's branch)."""
        self.read_attrs.add(name)
        a = self._attrs.get(name)
        if a is None or a.type != AttributeProto.GRAPH:
            raise self.error(ModelError, f"attribute '{name}' must be a graph")
        return a.g

    def _decode(self, a: AttributeProto) -> Any:
        kind = a.type
        if kind == AttributeProto.FLOAT:
            return float(a.f)
        if kind == AttributeProto.INT:
            return int(a.i)
        if kind == AttributeProto.STRING:
            return a.s.decode("utf-8", errors="replace")
        if kind == AttributeProto.FLOATS:
            return [float(v) for v in a.floats]
        if kind == AttributeProto.INTS:
            return [int(v) for v in a.ints]
        if kind == AttributeProto.STRINGS:
            return [s.decode("utf-8", errors="replace") for s in a.strings]
        if kind == AttributeProto.TENSOR:
            return tensor_to_array(a.t, self._folder, f"attribute '{a.name}' of {self.label}")
        raise self.unsupported(f"attribute '{a.name}' of type {AttributeProto.AttributeType.Name(kind)} "
                               "is not supported")

    def check_all_read(self) -> None:
        """Fails on any attribute or optional input the handler did not take into account."""
        for name in self._attrs:
            if name not in self.read_attrs:
                raise self.unsupported(f"attribute '{name}' is not supported")
        for i, name in enumerate(self.proto.input):
            if name and i not in self.read_inputs:
                raise self.unsupported(f"input {i} ('{name}') is not supported")

    # -- outputs ----------------------------------------------------------------------
    def wants_output(self, k: int) -> bool:
        """Whether the node asks for output k."""
        return k < len(self.proto.output) and self.proto.output[k] != ""

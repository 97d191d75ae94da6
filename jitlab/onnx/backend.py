"""jitlab as an `onnx.backend.base.Backend`, so onnx's own backend test runner can drive it.

`prepare` imports and compiles the model. A graph input that a node needs at compile time
(a Reshape's shape, a Slice's starts, a Pad's pads ...) cannot stay a runtime input of a
program with static shapes: such a model is compiled at `run`, with those inputs' values
fixed, once per distinct value (as XLA treats compile-time-constant inputs). Inputs with
dynamic declared dims are compiled for the shapes they arrive with.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep

from ..compiler import compile as compile_program
from ..errors import InputError
from ..ir.program import Program
from ..runtime.executable import Executable
from .importer import load
from .node import StaticInputNeeded


class JitlabRep(BackendRep):
    """A prepared model: call `run` with its inputs (a list in graph order, or a dict by name)."""

    def __init__(self, model: onnx.ModelProto, level: str = "O0", target: str = "cpu"):
        self.model, self.level, self.target = model, level, target
        initializers = {t.name for t in model.graph.initializer}
        self.inputs = [vi for vi in model.graph.input if vi.name not in initializers]
        self.static_inputs: list[str] = []        # inputs whose values are compiled in
        self._cache: dict[tuple, tuple[Executable, list[int]]] = {}

    def prepare(self) -> None:
        """Compiles right away when nothing needs the inputs' values or shapes."""
        if all(_static_shape(vi) for vi in self.inputs):
            try:
                self._cache[()] = self._compile({}, None)
            except StaticInputNeeded:
                pass

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        """The model's outputs for these inputs, compiling first when the inputs call for it."""
        arrays = self._arrays(inputs)
        entry = self._cache.get(self._key(arrays))
        if entry is None:
            entry = self._compile_for(arrays)      # may add to static_inputs, so key afterwards
            self._cache[self._key(arrays)] = entry
        exe, dynamic = entry
        return tuple(np.asarray(o) for o in exe(*(arrays[i] for i in dynamic)))

    @property
    def executable(self) -> Executable | None:
        """The executable compiled last (for looking at its report)."""
        return next(reversed(self._cache.values()))[0] if self._cache else None

    def _arrays(self, inputs: Any) -> list[np.ndarray]:
        names = [vi.name for vi in self.inputs]
        if isinstance(inputs, Mapping):
            missing = [n for n in names if n not in inputs]
            extra = [n for n in inputs if n not in names]
            if missing or extra:
                raise InputError(f"the model takes inputs {names}; missing {missing}, unknown {extra}")
            inputs = [inputs[n] for n in names]
        if not isinstance(inputs, Sequence) or isinstance(inputs, (str, bytes)):
            inputs = [inputs]
        if len(inputs) != len(names):
            raise InputError(f"the model takes {len(names)} input(s) ({', '.join(names)}), got {len(inputs)}")
        return [_to_array(x) for x in inputs]

    def _key(self, arrays: list[np.ndarray]) -> tuple:
        """What a compiled program depends on: values compiled in, shapes of dynamic inputs."""
        key = tuple(_value_key(a) if vi.name in self.static_inputs else
                    (None if _static_shape(vi) else (a.dtype.str, a.shape))
                    for vi, a in zip(self.inputs, arrays))
        return key if any(k is not None for k in key) else ()

    def _compile_for(self, arrays: list[np.ndarray]) -> tuple[Executable, list[int]]:
        program, dynamic = self.program_for(arrays)
        return compile_program(program, level=self.level, target=self.target), dynamic

    def program_for(self, arrays: list[np.ndarray]) -> tuple[Program, list[int]]:
        """The imported program for these inputs, with the values of those needed at compile
        time fixed, and the indices of the inputs it still takes."""
        by_name = {vi.name: a for vi, a in zip(self.inputs, arrays)}
        shapes = {vi.name: by_name[vi.name].shape for vi in self.inputs if not _static_shape(vi)}
        while True:
            values = {n: by_name[n] for n in self.static_inputs}
            try:
                program = load(self.model, values=values, shapes=shapes)
                return program, [i for i, vi in enumerate(self.inputs) if vi.name not in values]
            except StaticInputNeeded as e:
                needed = [n for n in _feeding_inputs(self.model.graph, e.tensor, by_name)
                          if n not in self.static_inputs]
                if not needed:
                    raise
                self.static_inputs += needed

    def _compile(self, values: dict, shapes: dict | None) -> tuple[Executable, list[int]]:
        program = load(self.model, values=values, shapes=shapes)
        exe = compile_program(program, level=self.level, target=self.target)
        return exe, [i for i, vi in enumerate(self.inputs) if vi.name not in values]


class JitlabBackend(Backend):
    """Runs ONNX models through jitlab. `level` and `target` go to jl.compile; a subclass that
    sets them is a backend at another level for onnx's runner (which passes no options)."""

    level = "O0"
    target = "cpu"

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", level: str | None = None,
                target: str | None = None, **kwargs: Any) -> JitlabRep:
        """Imports and (when it can) compiles the model; raises UnsupportedOp for what jitlab lacks."""
        if not cls.supports_device(device):
            raise InputError(f"jitlab's ONNX backend runs on CPU, not {device}")
        rep = JitlabRep(model, level or cls.level, target or cls.target)
        rep.prepare()
        return rep

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs: Any, device: str = "CPU", outputs_info=None,
                 **kwargs: Any) -> tuple[np.ndarray, ...]:
        """Runs a single node on inputs, as a one-node model."""
        arrays = [_to_array(x) for x in inputs]
        names = [n for n in node.input if n]
        graph = onnx.helper.make_graph(
            [node], f"run_node_{node.op_type}",
            [onnx.helper.make_tensor_value_info(n, onnx.helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
             for n, a in zip(names, arrays)],
            [onnx.helper.make_empty_tensor_value_info(n) for n in node.output if n])
        opset = kwargs.pop("opset_version", onnx.defs.onnx_opset_version())
        model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid(node.domain, opset)])
        # onnx's checker wants typed graph outputs; its shape inference supplies them.
        return cls.prepare(onnx.shape_inference.infer_shapes(model), device, **kwargs).run(arrays)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        """CPU only: the CUDA target comes with its own issue."""
        return device.upper() == "CPU"


def _static_shape(vi: onnx.ValueInfoProto) -> bool:
    tt = vi.type.tensor_type
    return tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim)


def _to_array(x) -> np.ndarray:
    return onnx.numpy_helper.to_array(x) if isinstance(x, onnx.TensorProto) else np.asarray(x)


def _value_key(array: np.ndarray) -> tuple:
    return array.dtype.str, array.shape, array.tobytes()


def _feeding_inputs(graph: onnx.GraphProto, tensor: str, inputs: Mapping[str, np.ndarray]) -> list[str]:
    """The graph inputs that `tensor` is computed from."""
    producers = {o: node for node in graph.node for o in node.output}
    found, stack, seen = [], [tensor], set()
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in inputs:
            found.append(name)
        elif name in producers:
            stack.extend(i for i in producers[name].input if i)
    return found


prepare = JitlabBackend.prepare
run_model = JitlabBackend.run_model
run_node = JitlabBackend.run_node
supports_device = JitlabBackend.supports_device

"""An all-float32 model stays in float32: after import and the O1 passes (decomposition
included) no float64 type, cast, constant or weight appears anywhere in its IR. A constant
(an epsilon, 0.5, N) never widens the computation where numpy's weak Python scalars
(NEP 50) would not; BatchNormalization used to run in float64 for its f64 epsilon."""

import os
import warnings

import numpy as np
import onnx
import pytest
from onnx import AttributeProto, TensorProto

import jitlab as jl
from jitlab.ir.attributes import Dense
from jitlab.onnx.backend import JitlabRep
from jitlab.onnx.conformance import node_cases
from jitlab.passes.manager import PassContext, parse_pipeline
from jitlab.passes.pipelines import LEVELS
from tests.onnx.test_light_models import LIGHT, MODELS

F64 = np.dtype(np.float64)
# Attributes whose int value is an element type the model asks to compute or store in.
DTYPE_ATTRS = {"to", "dtype", "output_dtype", "softmax_precision", "stash_type"}


def float64_in(program: jl.Program) -> list[str]:
    """Every place of the IR that holds a float64: result types, dtype and constant attributes, weights."""
    found = [f"weight {name}" for name, w in program.weights.items() if np.asarray(w).dtype == F64]
    for op in program.walk():
        found += [f"{op.name} result {r.type}" for r in op.results if r.type.dtype == F64]
        for key, value in op.attrs.items():
            if (isinstance(value, Dense) and np.asarray(value.array).dtype == F64) or \
                    (isinstance(value, np.dtype) and value == F64):
                found.append(f"{op.name} attribute {key}")
    return found


O1_REWRITES = LEVELS["O1"][:LEVELS["O1"].index("mark-subgraphs")]


def o1_passes(program: jl.Program) -> jl.Program:
    """The O1 passes that rewrite ops (those after them only group and schedule), run bare:
    no snapshots, which would take most of the time."""
    ctx = PassContext(target="cpu")
    for p in parse_pipeline(",".join(O1_REWRITES)):
        program = p.apply(program, ctx)
    return program


def all_float32(model: onnx.ModelProto) -> bool:
    """Every graph input, output and initializer is float32, and no node asks for float64."""
    g = model.graph
    if any(vi.type.tensor_type.elem_type != TensorProto.FLOAT for vi in list(g.input) + list(g.output)):
        return False
    if any(t.data_type != TensorProto.FLOAT for t in g.initializer):
        return False
    for node in g.node:
        for a in node.attribute:
            if a.type == AttributeProto.INT and a.name in DTYPE_ATTRS and a.i == TensorProto.DOUBLE:
                return False
            if a.type == AttributeProto.TENSOR and a.t.data_type == TensorProto.DOUBLE:
                return False
    return True


def test_the_check_sees_a_float64_computation():
    program = jl.trace(lambda x: (x.astype(np.float64) * 2.0).astype(np.float32), np.ones(3, np.float32))
    assert float64_in(o1_passes(program))


@pytest.mark.parametrize("name", MODELS)
def test_light_models_stay_in_float32(name):
    program = jl.onnx.load(os.path.join(LIGHT, f"light_{name}.onnx"))
    assert not float64_in(o1_passes(program))


def float32_cases():
    return [c for c in node_cases() if c.excluded is None and all_float32(c.model)]


def test_every_float32_node_case_stays_in_float32():
    checked, problems = 0, []
    for case in float32_cases():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                program, _ = JitlabRep(case.model).program_for([onnx.numpy_helper.to_array(x)
                                                                if isinstance(x, TensorProto) else np.asarray(x)
                                                                for x in case.inputs])
            except jl.UnsupportedError:
                continue
            found = float64_in(o1_passes(program))
        checked += 1
        if found:
            problems.append(f"{case.name}: {found[:3]}")
    assert checked > 600, checked
    assert not problems, "\n".join(problems)

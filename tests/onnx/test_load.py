"""jl.onnx.load: sources, weights, names and locations, opset-chosen handlers, and shape
subgraphs folded at import, with static and with symbolic dims."""

import numpy as np
import onnx
import pytest
from onnx import helper

import jitlab as jl
from tests.onnx.models import model, reference, tensor
from tests.programs import assert_same

rng = np.random.default_rng(0)


def small_mlp() -> onnx.ModelProto:
    w = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Add", ["h", "b"], ["y0"], name="bias"),
             helper.make_node("Relu", ["y0"], ["y"], name="act")]
    return model(nodes, [tensor("x", np.float32, [2, 4])], [tensor("y", np.float32, [2, 3])], {"w": w, "b": b})


def test_path_bytes_and_proto_give_the_same_program(tmp_path):
    m = small_mlp()
    path = tmp_path / "mlp.onnx"
    onnx.save(m, path)
    texts = {str(jl.onnx.load(src)) for src in (m, m.SerializeToString(), path, str(path))}
    assert len(texts) == 1


def test_initializers_become_weights_and_values_keep_onnx_names():
    m = small_mlp()
    program = jl.onnx.load(m)
    assert set(program.weights) == {"w", "b"}
    assert program.op_counts()["np.weight"] == 2
    text = str(program)
    assert "%y = np.relu(%y0)" in text and 'np.weight() {name = "w"}' in text
    x = rng.standard_normal((2, 4)).astype(np.float32)
    assert_same(jl.compile(program, level="O0")(x), reference(m, {"x": x}))


def test_graph_inputs_that_are_initializers_are_weights():
    m = small_mlp()
    m.graph.input.append(tensor("w", np.float32, [4, 3]))       # IR < 4 style: the weight listed as input
    program = jl.onnx.load(m)
    assert [a.name for a in program.inputs] == ["x"] and "w" in program.weights


def test_ops_carry_the_node_name_and_op_type():
    program = jl.onnx.load(small_mlp())
    locs = {op.name: op.loc for op in program.walk() if op.loc is not None}
    assert locs["np.relu"].function == "Relu node 'act'" and locs["np.relu"].line == 2
    assert locs["np.matmul"].function == "MatMul node 'mm'"


def test_weights_round_trip_through_text():
    program = jl.onnx.load(small_mlp())
    text = str(program)
    again = jl.parse(text, weights=program.weights)
    assert str(again) == text
    x = rng.standard_normal((2, 4)).astype(np.float32)
    assert_same(jl.compile(again, level="O0")(x), jl.compile(program, level="O0")(x))


def flatten_by_shape(batch) -> onnx.ModelProto:
    """Reshape x (batch, 3, 4) to (batch, 12) through Shape -> Gather -> Unsqueeze -> Concat."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus_one"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["y"])]
    inits = {"zero": np.array(0, np.int64), "axes": np.array([0], np.int64), "minus_one": np.array([-1], np.int64)}
    return model(nodes, [tensor("x", np.float32, [batch, 3, 4])], [tensor("y", np.float32, [batch, 12])], inits)


def test_shape_subgraph_folds_to_a_static_reshape():
    program = jl.onnx.load(flatten_by_shape(2))
    assert dict(program.op_counts()) == {"np.reshape": 1}
    assert "np.reshape(%x) {shape = [2, 12]} : f32[2,12]" in str(program)


def test_symbolic_batch_folds_the_shape_subgraph_symbolically():
    m = flatten_by_shape("N")
    program = jl.onnx.load(m)
    text = str(program)
    assert "func @test(%x: f32[N,3,4]) -> (f32[N,12])" in text and dict(program.op_counts()) == {"np.reshape": 1}
    assert str(jl.parse(text)) == text
    exe = jl.compile(program, level="O0")
    for n in (1, 5):
        x = rng.standard_normal((n, 3, 4)).astype(np.float32)
        assert_same(exe(x), reference(m, {"x": x}))


def test_shape_of_a_symbolic_dim_becomes_a_tensor_at_run_time():
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Mul", ["s", "two"], ["y"])]
    m = model(nodes, [tensor("x", np.float32, ["B", 3])], [tensor("y", np.int64, [2])], {"two": np.array(2, np.int64)})
    program = jl.onnx.load(m)
    assert program.op_counts()["np.dims"] == 1
    out, = jl.compile(program, level="O0")(np.zeros((7, 3), np.float32))
    assert out.tolist() == [14, 6]


def test_shapes_argument_overrides_declared_dims():
    program = jl.onnx.load(flatten_by_shape("N"), shapes={"x": (3, 3, 4)})
    assert "np.reshape(%x) {shape = [3, 12]}" in str(program)


def test_values_argument_fixes_an_input_to_a_constant():
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["y"])]
    m = model(nodes, [tensor("x", np.float32, [2, 6]), tensor("shape", np.int64, [2])],
              [tensor("y", np.float32, [3, 4])])
    program = jl.onnx.load(m, values={"shape": np.array([3, 4])})
    assert [a.name for a in program.inputs] == ["x"]
    x = rng.standard_normal((2, 6)).astype(np.float32)
    assert_same(jl.compile(program, level="O0")(x), [x.reshape(3, 4)])


@pytest.mark.parametrize("opset", [11, 13])
def test_the_model_opset_picks_the_handler(opset):
    """Softmax before opset 13 normalizes over all dims from axis on, from 13 over axis alone.
    (onnx's ReferenceEvaluator applies the opset-13 rule at every opset, so numpy is the oracle.)"""
    m = model([helper.make_node("Softmax", ["x"], ["y"], axis=1)], [tensor("x", np.float32, [2, 3, 4])],
              [tensor("y", np.float32, [2, 3, 4])], opset=opset)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    axes = (1, 2) if opset == 11 else (1,)
    e = np.exp(x - x.max(axis=axes, keepdims=True))
    assert_same(jl.compile(jl.onnx.load(m), level="O0")(x), [e / e.sum(axis=axes, keepdims=True)])


def test_import_does_not_load_onnx_until_asked():
    import subprocess
    import sys

    code = "import sys, jitlab; assert 'onnx' not in sys.modules; jitlab.onnx; assert 'onnx' in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def filled_product(value: float) -> onnx.ModelProto:
    """y = x @ W + 1 for W = ConstantOfShape([40, 30], value): a light model's kind of weight."""
    fill = helper.make_tensor("v", onnx.TensorProto.FLOAT, [1], [value])
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["w"], value=fill),
             helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "one"], ["y"])]
    return model(nodes, [tensor("x", np.float32, [2, 40])], [tensor("y", np.float32, [2, 30])],
                 {"shape": np.array([40, 30], np.int64), "one": np.array(1, np.float32)})


@pytest.mark.parametrize("level", ["O0", "O1", "O2"])
def test_a_fill_stays_a_broadcast_weight_and_computes_as_numpy(level):
    from jitlab.runtime.executable_cache import weights_digest

    program = jl.onnx.load(filled_product(0.25))
    (w,) = [a for a in program.weights.values() if a.shape == (40, 30)]
    assert not any(w.strides) and not w.flags.writeable           # no bytes until something computes with it
    x = rng.standard_normal((2, 40)).astype(np.float32)
    np.testing.assert_allclose(jl.compile(program, level=level, target="cpu")(x)[0], x @ np.full((40, 30), 0.25,
                               np.float32) + 1, rtol=1e-5)
    # the executable cache's check of folded weights tells fills of other values apart
    other = jl.onnx.load(filled_product(0.5)).weights
    assert weights_digest(program.weights) != weights_digest(other)
    assert weights_digest(program.weights) == weights_digest(jl.onnx.load(filled_product(0.25)).weights)


def slashed_model(batch) -> onnx.ModelProto:
    """A model whose input is named as ResNet-50's (`gpu_0/data_0`), which the IR spells `gpu_0_data_0`."""
    w = rng.standard_normal((4, 3)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["gpu_0/data_0", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])]
    return model(nodes, [tensor("gpu_0/data_0", np.float32, [batch, 4])], [tensor("y", np.float32, [batch, 3])],
                 {"w": w})


@pytest.mark.parametrize("batch", [2, "N"])
def test_inputs_go_by_the_models_own_names(batch):
    from jitlab.explore.sizes import dry_run_data

    m = slashed_model(batch)
    program = jl.onnx.load(m)
    assert "%gpu_0_data_0" in str(program)
    exe = jl.compile(program, level="O1")
    assert exe.input_names == ["gpu_0/data_0"] and "gpu_0/data_0" in repr(exe)
    x = rng.standard_normal((2, 4)).astype(np.float32)
    expected = reference(m, {"gpu_0/data_0": x})
    np.testing.assert_allclose(exe(**{"gpu_0/data_0": x})[0], expected[0], rtol=1e-5, atol=1e-5)
    plan = exe.dry_run({"gpu_0/data_0": (64, 4)})
    assert plan.peak_bytes == exe.dry_run({"gpu_0_data_0": (64, 4)}).peak_bytes      # the IR's spelling too
    assert plan.peak_bytes == jl.compile(jl.onnx.load(small_named_like(m)), level="O1").dry_run({"x": (64, 4)}).peak_bytes
    assert jl.dry_run(program, {"gpu_0/data_0": (64, 4)}, level="O1").peak_bytes == plan.peak_bytes
    with pytest.raises(jl.InputError, match="input 'gpu_0/data_0'"):
        exe(rng.standard_normal((2, 5)).astype(np.float32))
    with pytest.raises(jl.InputError, match="its inputs are gpu_0/data_0"):
        exe.dry_run({"data": (64, 4)})
    page = dry_run_data(exe)
    if batch == 2:
        assert page["dims"][0]["name"] == "gpu_0/data_0.0" and page["dims"][0]["positions"] == [["gpu_0/data_0", 0]]
    assert all(set(p["shapes"]) == {"gpu_0/data_0"} for p in page["plans"]) and page["plans"]


def small_named_like(m: onnx.ModelProto) -> onnx.ModelProto:
    """`m` with its input renamed `x`: the plan an input's name must not change."""
    m = onnx.ModelProto.FromString(m.SerializeToString())
    for node in m.graph.node:
        node.input[:] = ["x" if n == "gpu_0/data_0" else n for n in node.input]
    m.graph.input[0].name = "x"
    return m


def test_an_input_is_donated_by_the_models_own_name():
    m = model([helper.make_node("Relu", ["gpu_0/data_0"], ["y"])], [tensor("gpu_0/data_0", np.float32, [2, 4])],
              [tensor("y", np.float32, [2, 4])])
    exe = jl.compile(jl.onnx.load(m), level="O1", donate=("gpu_0/data_0",))
    x = rng.standard_normal((2, 4)).astype(np.float32)
    expected = reference(m, {"gpu_0/data_0": x.copy()})[0]
    (y,) = exe(x)
    np.testing.assert_array_equal(y, expected)
    assert [d.input_name for d in exe.donations] == ["gpu_0_data_0"] and np.shares_memory(y, x)

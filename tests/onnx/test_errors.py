"""Bad input gets a clear jl.JitlabError: corrupt and truncated files, external data that
points outside the model's folder (nothing outside it is read), wrong inputs at call
time, and ops or attribute values jitlab does not handle (UnsupportedOp, never a guess)."""

import os

import numpy as np
import onnx
import pytest
from onnx import helper

import jitlab as jl
from jitlab.errors import InputError, ModelError, UnsupportedOp
from jitlab.onnx import reader
from jitlab.onnx.registry import HANDLERS
from tests.onnx.models import model, tensor
from tests.onnx.test_load import small_mlp

rng = np.random.default_rng(0)


def test_truncated_file_is_a_model_error(tmp_path):
    data = small_mlp().SerializeToString()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelError, match="cut.onnx"):
        jl.onnx.load(path)


def test_corrupt_bytes_and_missing_files_are_model_errors(tmp_path):
    with pytest.raises(ModelError, match="not a valid ONNX model"):
        jl.onnx.load(b"\x08\x07garbage\xff\xff\xff")
    with pytest.raises(ModelError, match="no ONNX model file"):
        jl.onnx.load(tmp_path / "missing.onnx")
    with pytest.raises(ModelError, match="takes a path, bytes or onnx.ModelProto"):
        jl.onnx.load(42)


def test_every_truncation_is_an_error_or_a_smaller_valid_model():
    """Cutting a model anywhere never crashes: either a JitlabError or (cut between fields) a
    model onnx's checker accepts."""
    data = small_mlp().SerializeToString()
    for cut in range(0, len(data), 7):
        try:
            jl.onnx.load(data[:cut])
        except jl.JitlabError:
            pass


def external_model(tmp_path, location: str) -> str:
    """A model whose weight `w` lives in an external file at `location` (relative to the model)."""
    m = small_mlp()
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    path = str(folder / "m.onnx")
    onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True, location="weights.bin",
                    size_threshold=0)
    saved = onnx.load(path, load_external_data=False)
    for t in saved.graph.initializer:
        for entry in t.external_data:
            if entry.key == "location":
                entry.value = location
    with open(path, "wb") as f:
        f.write(saved.SerializeToString())
    return path


def test_external_data_inside_the_folder_loads(tmp_path):
    path = external_model(tmp_path, "weights.bin")
    program = jl.onnx.load(path)
    assert program.weights["w"].shape == (4, 3)


@pytest.mark.parametrize("location", ["../secret.bin", "sub/../../secret.bin", "/etc/passwd", "link.bin"])
def test_external_data_outside_the_folder_is_refused_without_reading_it(tmp_path, monkeypatch, location):
    path = external_model(tmp_path, location)
    secret = tmp_path / "secret.bin"
    secret.write_bytes(b"\0" * 64)
    os.symlink(secret, tmp_path / "model" / "link.bin")
    opened = []
    real_open = open
    monkeypatch.setattr(reader, "open", lambda p, *a, **k: opened.append(str(p)) or real_open(p, *a, **k),
                        raising=False)
    with pytest.raises(ModelError, match="outside the model's folder|must be a relative path"):
        jl.onnx.load(path)
    assert all(os.path.dirname(os.path.realpath(p)) == str(tmp_path / "model") for p in opened)


def test_external_data_needs_the_model_path(tmp_path):
    path = external_model(tmp_path, "weights.bin")
    with pytest.raises(ModelError, match="load the model from its path"):
        jl.onnx.load(onnx.load(path, load_external_data=False))


def test_wrong_inputs_at_call_time_are_input_errors():
    exe = jl.compile(jl.onnx.load(small_mlp()), level="O0")
    x = np.zeros((2, 4), np.float32)
    with pytest.raises(InputError, match=r"takes 1 input\(s\) \(x\), got 2"):
        exe(x, x)
    with pytest.raises(InputError, match=r"takes 1 input\(s\) \(x\), got 0"):
        exe()
    with pytest.raises(InputError, match="input 'x' must have dtype f32, got f64"):
        exe(x.astype(np.float64))
    with pytest.raises(InputError, match="input 'x': dim 1 must be 4"):
        exe(np.zeros((2, 5), np.float32))


def test_unknown_names_in_values_or_shapes_are_input_errors():
    with pytest.raises(InputError, match="'z' is not an input of the model"):
        jl.onnx.load(small_mlp(), values={"z": np.zeros(2)})


def unary_model(op_type: str, opset: int = 21, **attrs) -> onnx.ModelProto:
    node = helper.make_node(op_type, ["x"], ["y"], name="the_node", **attrs)
    return model([node], [tensor("x", np.float32, [2, 3])], [tensor("y", np.float32, [2, 3])], opset=opset)


def test_an_unsupported_op_names_its_type_and_node():
    m = model([helper.make_node("NonZero", ["x"], ["y"], name="nz")], [tensor("x", np.float32, [2, 3])],
              [tensor("y", np.int64, [2, None])])
    with pytest.raises(UnsupportedOp, match="NonZero node 'nz': NonZero is not supported"):
        jl.onnx.load(m)


def test_an_unsupported_attribute_value_names_the_attribute():
    with pytest.raises(UnsupportedOp, match="LpNormalization node 'the_node': attribute 'p' = 3"):
        jl.onnx.load(unary_model("LpNormalization", p=3))


def test_an_attribute_a_handler_ignores_is_refused(monkeypatch):
    """A handler that forgets an attribute cannot give a silently wrong answer."""
    from jitlab.onnx.registry import lookup

    monkeypatch.setitem(HANDLERS, ("", "LeakyRelu", 16), lambda n: n.input(0))
    assert lookup("LeakyRelu", "", 21) is HANDLERS[("", "LeakyRelu", 16)]
    with pytest.raises(UnsupportedOp, match="LeakyRelu node 'the_node': attribute 'alpha' is not supported"):
        jl.onnx.load(unary_model("LeakyRelu", alpha=0.2))


def test_an_unsupported_output_is_refused():
    node = helper.make_node("MaxPool", ["x"], ["y", "idx"], name="pool", kernel_shape=[2, 2])
    m = model([node], [tensor("x", np.float32, [1, 1, 4, 4])],
              [tensor("y", np.float32, [1, 1, 3, 3]), tensor("idx", np.int64, [1, 1, 3, 3])])
    with pytest.raises(UnsupportedOp, match="MaxPool node 'pool': output 1 \\(Indices\\)"):
        jl.onnx.load(m)


def test_an_unsupported_element_type_names_the_input():
    m = model([helper.make_node("Relu", ["x"], ["y"])],
              [helper.make_tensor_value_info("x", onnx.TensorProto.BFLOAT16, [2])],
              [helper.make_tensor_value_info("y", onnx.TensorProto.BFLOAT16, [2])])
    with pytest.raises(UnsupportedOp, match="graph input 'x' has element type BFLOAT16"):
        jl.onnx.load(m)


def test_an_opset_older_than_every_handler_is_unsupported():
    with pytest.raises(UnsupportedOp, match="LeakyRelu at opset 1 is not supported"):
        jl.onnx.load(unary_model("LeakyRelu", opset=1))


def test_a_shape_input_computed_at_run_time_is_reported():
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["y"], name="r")]
    m = model(nodes, [tensor("x", np.float32, [2, 6]), tensor("shape", np.int64, [2])],
              [tensor("y", np.float32, [3, 4])])
    with pytest.raises(UnsupportedOp, match="Reshape node 'r': the shape \\(input 1, 'shape'\\) must be known"):
        jl.onnx.load(m)


@pytest.mark.parametrize("level", ["O0", "O2"])
def test_the_backend_answers_bad_feeds_with_input_errors(level):
    from jitlab.onnx import JitlabBackend

    m = small_mlp()
    rep = JitlabBackend.prepare(m, level=level)
    x = np.ones((2, 4), np.float32)
    bad = {r"got 2": [x, x], r"got 0": [], r"missing \['x'\], unknown \['y'\]": {"y": x},
           r"missing \[\], unknown \['q'\]": {"x": x, "q": x}, "must have dtype f32, got f64": [x.astype(np.float64)],
           "dim 1 must be 4": [np.zeros((2, 5), np.float32)]}
    for message, feed in bad.items():
        with pytest.raises(InputError, match=message):
            rep.run(feed)
    np.testing.assert_allclose(rep.run([x])[0], jl.compile(jl.onnx.load(m), level="O0")(x)[0], rtol=1e-6)


def with_external_fields(path: str, **fields) -> str:
    """The model at `path` with its external data entries (offset, length ...) set to `fields`."""
    m = onnx.load(path, load_external_data=False)
    for t in m.graph.initializer:
        entries = {e.key: e.value for e in t.external_data}
        entries.update({k: str(v) for k, v in fields.items()})
        del t.external_data[:]
        for key, value in entries.items():
            t.external_data.add(key=key, value=value)
    onnx.save(m, path)
    return path


@pytest.mark.parametrize("fields", [{"length": 10**12}, {"offset": 10**12}, {"offset": 40, "length": 48},
                                    {"offset": -8}, {"length": -5}, {"offset": "1e3"}])
def test_external_data_beyond_its_file_is_refused_before_reading(tmp_path, fields):
    """The size is checked first: length=10**12 used to be a raw MemoryError from the read."""
    path = with_external_fields(external_model(tmp_path, "weights.bin"), **fields)
    with pytest.raises(ModelError, match="tensor 'w': external data"):
        jl.onnx.load(path)


def test_a_negative_input_dim_is_a_shape_error_naming_the_input():
    m = small_mlp()
    m.graph.input[0].type.tensor_type.shape.dim[1].dim_value = -15
    with pytest.raises(jl.ShapeError, match="graph input 'x': dim 1 is -15"):
        jl.onnx.load(m)
    with pytest.raises(jl.ShapeError, match=r"shapes\['x'\]: dim 0 is -2"):
        jl.onnx.load(small_mlp(), shapes={"x": (-2, 4)})


def constant_of_shape(dims) -> onnx.ModelProto:
    shape = helper.make_tensor("s", onnx.TensorProto.INT64, [len(dims)], dims)
    node = helper.make_node("ConstantOfShape", ["s"], ["y"], name="fill")
    return helper.make_model(helper.make_graph([node], "g", [], [tensor("y", np.float32, list(dims))], [shape]),
                             opset_imports=[helper.make_opsetid("", 21)])


def test_a_constant_over_256_mib_is_not_folded_at_import():
    """ConstantOfShape of 1e12 elements was 'internal error in the ONNX importer: MemoryError'; one of
    512 MiB was folded into a weight held in memory."""
    for dims in ([2**14, 2**13], [10**6, 10**6]):
        program = jl.onnx.load(constant_of_shape(dims))
        assert not program.weights and "np.broadcast_to" in str(program)
    assert jl.onnx.load(constant_of_shape([64, 64])).weights["y"].shape == (64, 64)
    with pytest.raises(jl.OutOfMemoryError, match="3.64 TiB"):
        jl.compile(jl.onnx.load(constant_of_shape([10**6, 10**6])), level="O0")()


def test_running_out_of_memory_in_a_handler_names_the_node(monkeypatch):
    def huge(n):
        raise MemoryError("Unable to allocate 3.64 TiB")

    monkeypatch.setitem(HANDLERS, ("", "LeakyRelu", 16), huge)
    with pytest.raises(jl.OutOfMemoryError, match="LeakyRelu node 'the_node': importing it needs more memory"):
        jl.onnx.load(unary_model("LeakyRelu", alpha=0.2))


def test_an_opset_newer_than_onnx_knows_is_unsupported():
    newest = onnx.defs.onnx_opset_version()
    with pytest.raises(jl.UnsupportedError, match=f"default ONNX domain at opset 999, newer than opset {newest}"):
        jl.onnx.load(unary_model("Relu", opset=999))


def test_an_unknown_domain_is_unsupported_where_a_node_uses_it():
    m = unary_model("Relu")
    m.opset_import.append(helper.make_opsetid("com.example", 3))
    assert jl.onnx.load(m).op_counts()["np.relu"] == 1        # imported but unused: nothing to refuse
    m.graph.node[0].domain = "com.example"
    with pytest.raises(jl.UnsupportedError, match="Relu node 'the_node': the domain 'com.example' \\(opset 3\\)"):
        jl.onnx.load(m)


def test_a_model_without_outputs_is_a_model_error():
    m = unary_model("Relu")
    del m.graph.output[:]
    with pytest.raises(ModelError, match="has no outputs"):
        jl.onnx.load(m)


def one_node(op_type: str, x_shape, inits=None, extra_inputs=(), opset: int = 21, **attrs) -> onnx.ModelProto:
    """A model of one node on input x (plus initializers), its output typed by onnx's shape inference."""
    node = helper.make_node(op_type, ["x", *extra_inputs], ["y"], name="the_node", **attrs)
    graph = helper.make_graph([node], "one", [tensor("x", np.float32, list(x_shape))],
                              [helper.make_empty_tensor_value_info("y")],
                              [onnx.numpy_helper.from_array(np.asarray(v), k) for k, v in (inits or {}).items()])
    m = onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]))
    if not m.graph.output[0].type.HasField("tensor_type"):       # inference gave up on the absurd node
        m.graph.output[0].CopyFrom(tensor("y", np.float32, [None] * len(x_shape)))
    return m


I64 = np.int64
BAD_NODES = {   # found by tests/onnx/test_fuzz.py: each was an internal error (ZeroDivisionError, ValueError ...)
    "blocksize 0": (one_node("DepthToSpace", (1, 4, 2, 2), blocksize=0), jl.ShapeError, "'blocksize' = 0"),
    "rank 3 DepthToSpace": (one_node("DepthToSpace", (4, 2, 2), blocksize=2), jl.ShapeError, "must have rank 4"),
    "LpPool p 0": (one_node("LpPool", (1, 1, 4, 4), kernel_shape=[2, 2], p=0), jl.ShapeError, "'p' = 0"),
    "LRN size -1": (one_node("LRN", (1, 4, 2, 2), size=-1), jl.ShapeError, "'size' = -1"),
    "negative ConstantOfShape": (one_node("Add", (2, 3), {"s": np.array([2, -3], I64)}, ["c"]), None, None),
    "scale nan": (one_node("Resize", (1, 1, 2, 2), {"r": np.zeros(0, np.float32), "s": np.array(
        [1, 1, np.nan, 1], np.float32)}, ["r", "s"]), jl.ShapeError, r"scales \(input 2\) \[1.0, 1.0, nan"),
    "scale inf": (one_node("Resize", (1, 1, 2, 2), {"r": np.zeros(0, np.float32), "s": np.array(
        [1, 1, np.inf, 1], np.float32)}, ["r", "s"]), jl.ShapeError, "must be finite and > 0"),
    "scale 0": (one_node("Resize", (1, 1, 2, 2), {"r": np.zeros(0, np.float32), "s": np.array(
        [1, 1, 0, 1], np.float32)}, ["r", "s"]), jl.ShapeError, "must be finite and > 0"),
    "scale 1e30": (one_node("Resize", (1, 1, 2, 2), {"r": np.zeros(0, np.float32), "s": np.array(
        [1, 1, 1e30, 1], np.float32)}, ["r", "s"]), UnsupportedOp, "sampling table, over the 268435456-byte"),
    "Upsample scale 0.5": (one_node("Upsample", (1, 1, 2, 2), {"s": np.array([1, 1, 0.5, 1], np.float32)}, ["s"],
                                    opset=9), jl.ShapeError, "must be finite and >= 1.0"),
    "2-D ends": (one_node("Slice", (3, 4), {"b": np.array([0], I64), "e": np.array([[2]], I64)}, ["b", "e"]),
                 jl.ShapeError, r"ends \(input 2\) must be a 1-D list, got shape \[1, 1\]"),
    "int mean": (one_node("BatchNormalization", (1, 2, 2), {k: np.ones(2, np.float32) for k in "sbv"} | {
        "m": np.ones(2, np.int32)}, ["s", "b", "m", "v"]), jl.DTypeError, r"input_mean \(input 3\) must be a float"),
}


def _negative_constant_of_shape():
    shape = helper.make_tensor("s", onnx.TensorProto.INT64, [2], [2, -3])
    node = helper.make_node("ConstantOfShape", ["s"], ["y"], name="the_node")
    return helper.make_model(helper.make_graph([node], "g", [], [tensor("y", np.float32, [2, None])], [shape]),
                             opset_imports=[helper.make_opsetid("", 21)])


BAD_NODES["negative ConstantOfShape"] = (_negative_constant_of_shape(), jl.ShapeError,
                                         r"np.broadcast_to would give f32\[2,-3\]")


@pytest.mark.parametrize("case", BAD_NODES)
def test_absurd_attributes_and_inputs_are_errors_naming_the_node(case):
    m, error, message = BAD_NODES[case]
    with pytest.raises(error, match=f"node 'the_node': .*{message}"):
        jl.onnx.load(m)


def test_lrn_wider_than_the_channels_sums_them_all():
    """A size past 2 * channels used to build a window of that size (ValueError for 2**62)."""
    x = rng.standard_normal((1, 3, 2, 2)).astype(np.float32)
    for size in (7, 2**62 + 1):
        out, = jl.compile(jl.onnx.load(one_node("LRN", x.shape, size=size, alpha=0.5)), level="O0")(x)
        expected = x / (1 + 0.5 / size * (x * x).sum(axis=1, keepdims=True)) ** 0.75
        np.testing.assert_allclose(out, expected, rtol=1e-5)


@pytest.mark.parametrize("op_type", ["Trilu", "EyeLike"])
def test_masks_of_large_inputs_are_not_constants(op_type):
    """Trilu and EyeLike built an input-sized mask at import: 'array is too big' past 2**62 elements."""
    program = jl.onnx.load(one_node(op_type, (10**6, 10**6)))
    assert max(w.nbytes for w in program.weights.values()) <= 8 * 10**6
    x = rng.standard_normal((3, 5)).astype(np.float32)
    out, = jl.compile(jl.onnx.load(one_node(op_type, x.shape)), level="O0")(x)
    np.testing.assert_array_equal(out, np.triu(x) if op_type == "Trilu" else np.eye(3, 5, dtype=np.float32))


def test_an_allocation_numpy_cannot_address_is_an_out_of_memory_error(monkeypatch):
    def huge(n):
        np.ones(2**62)

    monkeypatch.setitem(HANDLERS, ("", "LeakyRelu", 16), huge)
    with pytest.raises(jl.OutOfMemoryError, match="LeakyRelu node 'the_node': importing it needs more memory"):
        jl.onnx.load(unary_model("LeakyRelu", alpha=0.2))


def test_an_explicit_negative_external_length_is_refused(tmp_path):
    path = with_external_fields(external_model(tmp_path, "weights.bin"), length=-1)
    with pytest.raises(ModelError, match="tensor 'w': external data length must be >= 0, got -1"):
        jl.onnx.load(path)


BAD_NODES_2 = {   # also found by the fuzzer
    "negative kernel": (one_node("LpPool", (1, 3, 8), kernel_shape=[-1], p=3), jl.ShapeError,
                        r"attribute 'kernel_shape' = \[-1\] must be >= 1"),
    "kernel past the input": (one_node("MaxPool", (1, 1, 4, 4), kernel_shape=[10**12, 2]), jl.ShapeError,
                              "the window spans 1000000000000 positions along spatial dim 0"),
    "zero stride": (one_node("AveragePool", (1, 1, 4, 4), kernel_shape=[2, 2], strides=[0, 1]), jl.ShapeError,
                    r"attribute 'strides' = \[0, 1\] must be >= 1"),
    "hidden_size 2**63": (one_node("RNN", (3, 1, 2), {"w": np.ones((1, 4, 2), np.float32),
                                                     "r": np.ones((1, 4, 4), np.float32)}, ["w", "r"],
                                   hidden_size=-(2**63)), jl.ShapeError, "'hidden_size' = -9223372036854775808"),
}


@pytest.mark.parametrize("case", BAD_NODES_2)
def test_absurd_windows_and_recurrences_are_errors_naming_the_node(case):
    """A kernel of -1 was a ValueError in np.ones."""
    m, error, message = BAD_NODES_2[case]
    with pytest.raises(error, match=f"node 'the_node': .*{message}"):
        jl.onnx.load(m)


def test_a_million_step_recurrence_is_one_loop_not_a_million_ops():
    """A GRU of 10**6 steps ran for minutes unrolling; as an scf.for its program is as long as at 3 steps."""
    def gru(steps):
        return one_node("GRU", (steps, 3, 2), {"w": np.ones((1, 15, 2), np.float32),
                                               "r": np.ones((1, 15, 5), np.float32)}, ["w", "r"], hidden_size=5)
    long, short = jl.onnx.load(gru(10**6)), jl.onnx.load(gru(3))
    assert len(str(long).splitlines()) == len(str(short).splitlines())
    assert "scf.for" in str(long)


def test_a_name_that_is_not_utf8_is_a_model_error():
    """protobuf hands such a string field back as bytes: it was a TypeError in Program()."""
    data = small_mlp().SerializeToString().replace(b"\x1a\x02mm", b"\x1a\x02m\xee")
    with pytest.raises(ModelError, match="field 'name' of a NodeProto is not valid UTF-8"):
        jl.onnx.load(data)


def causal_conv(width: int) -> onnx.ModelProto:
    node = helper.make_node("CausalConvWithState", ["x", "w"], ["y", "state"], name="the_node")
    graph = helper.make_graph([node], "g", [tensor("x", np.float32, [2, 4, 8]), tensor("w", np.float32, [4, 1, width])],
                              [tensor("y", np.float32, [2, 4, 8]), tensor("state", np.float32, [2, 4, width - 1])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 27)])


def test_zero_states_of_huge_inputs_are_not_constants():
    """CausalConvWithState's zero past state was np.zeros of the input's size: an
    OutOfMemoryError (29 TiB) for a kernel of width 10**12, where the model is valid."""
    program = jl.onnx.load(causal_conv(10**12))
    assert [str(v.type) for v in program.outputs] == ["f32[2,4,8]", "f32[2,4,999999999999]"]
    x, w = np.ones((2, 4, 8), np.float32), np.ones((4, 1, 2), np.float32)
    out, state = jl.compile(jl.onnx.load(causal_conv(2)), level="O0")(x, w)
    assert out[0, 0].tolist() == [1.0] + [2.0] * 7 and state.shape == (2, 4, 1)


def test_an_input_past_2_to_the_63_bytes_is_a_shape_error():
    """ReverseSequence's index table over such an input was 'cannot reshape array of size 0'."""
    m = one_node("ReverseSequence", (2**63 - 1, 2**63 - 1), {"lens": np.array([4, 3], I64)}, ["lens"])
    with pytest.raises(jl.ShapeError, match=r"graph input 'x' is f32\[9223372036854775807,9223372036854775807\]: "
                                            "more than 2\\*\\*63 bytes"):
        jl.onnx.load(m)


def test_reverse_sequence_over_a_symbolic_time_dim_is_unsupported():
    """Its index table needs the number of steps: np.arange of a symbol was a TypeError."""
    m = one_node("ReverseSequence", ("T", 2), {"lens": np.array([2, 1], I64)}, ["lens"])
    with pytest.raises(UnsupportedOp, match="ReverseSequence node 'the_node': the time dim is the symbolic dim T"):
        jl.onnx.load(m)
    with pytest.raises(jl.ShapeError, match="batch_axis 1 and time_axis 1 must be 0 and 1"):
        jl.onnx.load(one_node("ReverseSequence", (3, 2), {"lens": np.array([2, 1], I64)}, ["lens"], time_axis=1))

"""ONNX Loop, Scan and If imported onto scf ops, checked against onnxruntime at O0 and O1."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import jitlab as jl
from tests.onnx.models import model, onnxruntime_run, tensor

pytest.importorskip("onnxruntime")

F, I64, B = np.float32, np.int64, np.bool_
LEVELS = ("O0", "O1")


def body(nodes, inputs, outputs, name="body"):
    return helper.make_graph(nodes, name, inputs, outputs)


def check(m, feeds: dict, level: str, ops: set[str]) -> None:
    """jitlab at `level` agrees with onnxruntime, and the import holds the scf ops `ops`."""
    program = jl.onnx.load(m)
    assert ops <= {op.name for op in program.walk()}
    got = jl.compile(program, level=level)(*feeds.values())
    got = got if isinstance(got, tuple) else (got,)
    want = onnxruntime_run(m, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-6)


def counter_loop():
    """x <- 2 x + i, M times, M a graph input (a traced trip count); w read from the outer graph."""
    nodes = [helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["x_in", "w"], ["x2"]),
             helper.make_node("Add", ["x2", "fi"], ["x_out"]),
             helper.make_node("Identity", ["c_in"], ["c_out"])]
    g = body(nodes, [tensor("i", I64, []), tensor("c_in", B, []), tensor("x_in", F, [3])],
             [tensor("c_out", B, []), tensor("x_out", F, [3])])
    loop = helper.make_node("Loop", ["M", "", "x"], ["y"], body=g)
    return model([loop], [tensor("M", I64, []), tensor("x", F, [3]), tensor("w", F, [3])], [tensor("y", F, [3])])


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("trips", [0, 1, 5])
def test_counter_loop(level, trips):
    feeds = {"M": np.array(trips, I64), "x": np.array([1, -2, 0.5], F), "w": np.array([2, 1, -1], F)}
    check(counter_loop(), feeds, level, {"scf.for"})


def scan_output_loop(cond: bool):
    nodes = [helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
             helper.make_node("Add", ["x_in", "fi"], ["x_out"]),
             helper.make_node("Mul", ["x_out", "x_out"], ["sq"]),
             helper.make_node("Identity", ["c_in"], ["c_out"])]
    g = body(nodes, [tensor("i", I64, []), tensor("c_in", B, []), tensor("x_in", F, [2])],
             [tensor("c_out", B, []), tensor("x_out", F, [2]), tensor("sq", F, [2])])
    loop = helper.make_node("Loop", ["M", "cond", "x"], ["y", "ys"], body=g)
    return model([loop], [tensor("x", F, [2])], [tensor("y", F, [2]), tensor("ys", F, [None, 2])],
                 initializers={"M": np.array(4, I64), "cond": np.array(cond)})


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("cond", [True, False])
def test_loop_with_scan_outputs(level, cond):
    ops = {"scf.for", "np.dynamic_update_slice"} if cond else set()     # false on entry: no iteration, no loop
    check(scan_output_loop(cond), {"x": np.array([0.5, -1], F)}, level, ops)


def early_exit_loop():
    """Doubles x while its sum stays below a limit, at most M times: an scf.while."""
    nodes = [helper.make_node("Mul", ["x_in", "two"], ["x_out"]),
             helper.make_node("ReduceSum", ["x_out"], ["s"], keepdims=0),
             helper.make_node("Less", ["s", "limit"], ["c_out"])]
    g = body(nodes, [tensor("i", I64, []), tensor("c_in", B, []), tensor("x_in", F, [3])],
             [tensor("c_out", B, []), tensor("x_out", F, [3])])
    loop = helper.make_node("Loop", ["M", "cond", "x"], ["y"], body=g)
    return model([loop], [tensor("M", I64, []), tensor("cond", B, []), tensor("x", F, [3]), tensor("limit", F, [])],
                 [tensor("y", F, [3])], initializers={"two": np.array(2, F)})


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("trips, cond, limit", [(10, True, 100.0), (3, True, 1e6), (10, False, 100.0),
                                                (10, True, -1.0)])
def test_early_exit_loop(level, trips, cond, limit):
    feeds = {"M": np.array(trips, I64), "cond": np.array(cond), "x": np.array([1, 2, 0.5], F),
             "limit": np.array(limit, F)}
    check(early_exit_loop(), feeds, level, {"scf.while"})


def row_sum_scan(axis: int, direction: int, out_axis: int):
    nodes = [helper.make_node("Add", ["s_in", "row"], ["s_out"]), helper.make_node("Identity", ["s_out"], ["y"])]
    g = body(nodes, [tensor("s_in", F, [3]), tensor("row", F, [3])], [tensor("s_out", F, [3]), tensor("y", F, [3])])
    node = helper.make_node("Scan", ["s0", "x"], ["s", "ys"], body=g, num_scan_inputs=1, scan_input_axes=[axis],
                            scan_input_directions=[direction], scan_output_axes=[out_axis])
    shape = [5, 3] if axis in (0, -2) else [3, 5]
    return model([node], [tensor("s0", F, [3]), tensor("x", F, shape)],
                 [tensor("s", F, [3]), tensor("ys", F, [5, 3] if out_axis in (0, -2) else [3, 5])])


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("axis, direction, out_axis", [(0, 0, 0), (1, 1, -1), (-2, 1, 1)])
def test_scan_sums_rows(level, axis, direction, out_axis):
    rng = np.random.default_rng(axis + 3 * direction)
    shape = (5, 3) if axis in (0, -2) else (3, 5)
    feeds = {"s0": rng.standard_normal(3).astype(F), "x": rng.standard_normal(shape).astype(F)}
    check(row_sum_scan(axis, direction, out_axis), feeds, level, {"scf.for", "np.dynamic_slice"})


def computed_if():
    """x * 2 when sum(x) > 0, else y - x: each branch reads outer values (x in both, y in one)."""
    then = body([helper.make_node("Mul", ["x", "two"], ["a"])], [], [tensor("a", F, [4])], "then")
    other = body([helper.make_node("Sub", ["y", "x"], ["b"])], [], [tensor("b", F, [4])], "else")
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["p"]),
             helper.make_node("If", ["p"], ["r"], then_branch=then, else_branch=other)]
    return model(nodes, [tensor("x", F, [4]), tensor("y", F, [4])], [tensor("r", F, [4])],
                 initializers={"two": np.array(2, F), "zero": np.array(0, F)})


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("sign", [1, -1])
def test_if_on_a_computed_boolean(level, sign):
    feeds = {"x": sign * np.array([1, 2, -0.5, 3], F), "y": np.array([10, 20, 30, 40], F)}
    check(computed_if(), feeds, level, {"scf.if"})


def test_scan_outputs_of_a_data_dependent_loop_are_refused():
    g = body([helper.make_node("Less", ["x_in", "x_in"], ["c"]), helper.make_node("ReduceMax", ["c"], ["c_out"],
                                                                                 keepdims=0)],
             [tensor("i", I64, []), tensor("c_in", B, []), tensor("x_in", F, [1])],
             [tensor("c_out", B, []), tensor("x_in", F, [1]), tensor("x_in", F, [1])])
    m = model([helper.make_node("Loop", ["M", "cond", "x"], ["y", "ys"], body=g)],
              [tensor("M", I64, []), tensor("cond", B, []), tensor("x", F, [1])],
              [tensor("y", F, [1]), tensor("ys", F, [None, 1])])
    with pytest.raises(jl.UnsupportedError, match="Loop node #0: .*scan output.*depends on the data"):
        jl.onnx.load(m)


def test_a_carried_value_that_changes_shape_is_refused():
    g = body([helper.make_node("Concat", ["x_in", "x_in"], ["x_out"], axis=0),
              helper.make_node("Identity", ["c_in"], ["c_out"])],
             [tensor("i", I64, []), tensor("c_in", B, []), tensor("x_in", F, [None])],
             [tensor("c_out", B, []), tensor("x_out", F, [None])])
    m = model([helper.make_node("Loop", ["M", "", "x"], ["y"], body=g)], [tensor("M", I64, []), tensor("x", F, [2])],
              [tensor("y", F, [None])])
    with pytest.raises(jl.UnsupportedError, match="loop-carried value 'x_out' is f32\\[2\\] on entry and f32\\[4\\]"):
        jl.onnx.load(m)


def sliding_loop():
    """y += x[i:i + 2] for i < M: a Slice whose starts are the loop's counter (np.dynamic_slice)."""
    nodes = [helper.make_node("Add", ["i", "two"], ["end"]),
             helper.make_node("Unsqueeze", ["i", "zero"], ["s"]), helper.make_node("Unsqueeze", ["end", "zero"], ["e"]),
             helper.make_node("Slice", ["x", "s", "e"], ["window"]),
             helper.make_node("Add", ["y_in", "window"], ["y_out"]),
             helper.make_node("Identity", ["c_in"], ["c_out"])]
    g = body(nodes, [tensor("i", I64, []), tensor("c_in", B, []), tensor("y_in", F, [2])],
             [tensor("c_out", B, []), tensor("y_out", F, [2])])
    loop = helper.make_node("Loop", ["M", "", "y0"], ["y"], body=g)
    return model([loop], [tensor("M", I64, []), tensor("x", F, [6]), tensor("y0", F, [2])], [tensor("y", F, [2])],
                 initializers={"two": np.array(2, I64), "zero": np.array([0], I64)})


@pytest.mark.parametrize("level", LEVELS)
def test_a_slice_at_the_loop_counter(level):
    feeds = {"M": np.array(5, I64), "x": np.arange(6, dtype=F) ** 2, "y0": np.array([1, -1], F)}
    check(sliding_loop(), feeds, level, {"scf.for", "np.dynamic_slice"})


def test_a_slice_past_the_end_is_an_error_not_a_clamp():
    feeds = {"M": np.array(6, I64), "x": np.arange(6, dtype=F), "y0": np.zeros(2, F)}
    with pytest.raises(jl.InputError, match="slice 5:7 of axis 0 with size 6 holds 1 element.*iteration 5 of the scf.for"):
        jl.compile(jl.onnx.load(sliding_loop()), level="O0")(*feeds.values())


def test_an_if_known_at_import_takes_its_branch_inline():
    """Branches of different shapes (shape logic): the condition is a constant, so only one is imported."""
    then = body([helper.make_node("Concat", ["x", "x"], ["a"], axis=0)], [], [tensor("a", F, [6])], "then")
    other = body([helper.make_node("Neg", ["x"], ["b"])], [], [tensor("b", F, [3])], "else")
    m = model([helper.make_node("If", ["p"], ["r"], then_branch=then, else_branch=other)], [tensor("x", F, [3])],
              [tensor("r", F, [None])], initializers={"p": np.array(True)})
    program = jl.onnx.load(m)
    assert not {"scf.if", "np.neg"} & {op.name for op in program.walk()}
    x = np.array([1, 2, 3], F)
    (got,) = jl.compile(program, level="O0")(x)
    np.testing.assert_array_equal(got, onnxruntime_run(m, {"x": x})[0])


def nested_if_in_loop():
    """x <- x * w or x - w as the counter is even or odd: an If inside a Loop's body whose branches
    read w from the outermost graph (captured through both regions) and x from the body."""
    then = body([helper.make_node("Mul", ["x_in", "w"], ["a"])], [], [tensor("a", F, [2])], "then")
    other = body([helper.make_node("Sub", ["x_in", "w"], ["b"])], [], [tensor("b", F, [2])], "else")
    nodes = [helper.make_node("Mod", ["i", "two"], ["r"]), helper.make_node("Equal", ["r", "zero"], ["even"]),
             helper.make_node("If", ["even"], ["x_out"], then_branch=then, else_branch=other),
             helper.make_node("Identity", ["c_in"], ["c_out"])]
    g = body(nodes, [tensor("i", I64, []), tensor("c_in", B, []), tensor("x_in", F, [2])],
             [tensor("c_out", B, []), tensor("x_out", F, [2])])
    loop = helper.make_node("Loop", ["M", "", "x"], ["y"], body=g)
    return model([loop], [tensor("M", I64, []), tensor("x", F, [2]), tensor("w", F, [2])], [tensor("y", F, [2])],
                 initializers={"two": np.array(2, I64), "zero": np.array(0, I64)})


@pytest.mark.parametrize("level", LEVELS)
def test_an_if_inside_a_loop_reads_the_outer_graph(level):
    feeds = {"M": np.array(5, I64), "x": np.array([1.5, -2], F), "w": np.array([3, 0.5], F)}
    check(nested_if_in_loop(), feeds, level, {"scf.for", "scf.if"})


def test_without_a_condition_input_the_body_condition_still_ends_the_loop():
    """onnxruntime stops when the body's condition turns false even if the node has no condition input."""
    g = body([helper.make_node("Add", ["x_in", "one"], ["x_out"]), helper.make_node("Less", ["x_out", "three"], ["c"]),
              helper.make_node("ReduceMin", ["c"], ["c_out"], keepdims=0)],
             [tensor("i", I64, []), tensor("c_in", B, []), tensor("x_in", F, [1])],
             [tensor("c_out", B, []), tensor("x_out", F, [1])])
    m = model([helper.make_node("Loop", ["M", "", "x"], ["y"], body=g)], [tensor("M", I64, []), tensor("x", F, [1])],
              [tensor("y", F, [1])], initializers={"one": np.array(1, F), "three": np.array(3, F)})
    check(m, {"M": np.array(10, I64), "x": np.zeros(1, F)}, "O0", {"scf.while"})


# GRU's import is checked over few steps by tests/onnx/test_handlers.py; its 5,000 O0 steps here: -m slow
@pytest.mark.parametrize("op", ["RNN", pytest.param("GRU", marks=pytest.mark.slow), "LSTM"])
def test_a_recurrent_op_past_the_old_step_cap_is_one_loop(op):
    """5,000 steps (past the 4,096 the unrolled import allowed) import as one scf.for per direction."""
    rng = np.random.default_rng(0)
    gates, hidden, steps = {"RNN": 1, "GRU": 3, "LSTM": 4}[op], 3, 5000
    inits = {"W": rng.standard_normal((2, gates * hidden, 2)).astype(F) * 0.3,
             "R": rng.standard_normal((2, gates * hidden, hidden)).astype(F) * 0.3}
    node = helper.make_node(op, ["x", "W", "R"], ["y", "y_h"], hidden_size=hidden, direction="bidirectional")
    m = model([node], [tensor("x", F, [steps, 1, 2])], [tensor("y", F, [steps, 2, 1, hidden]),
                                                         tensor("y_h", F, [2, 1, hidden])], initializers=inits)
    program = jl.onnx.load(m)
    assert sum(op.name == "scf.for" for op in program.walk()) == 2 and len(list(program.walk())) < 200
    x = rng.standard_normal((steps, 1, 2)).astype(F)
    for got, want in zip(jl.compile(program, level="O0")(x), onnxruntime_run(m, {"x": x})):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)

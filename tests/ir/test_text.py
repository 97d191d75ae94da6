"""The text format: exact round trips, and parse errors with line and column."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import jitlab as jl
from jitlab.errors import ParseError
from jitlab.ir import Builder, Dense, Program, TensorType
from tests.programs import programs

HAND_WRITTEN = [
    """func @mlp(%x: f32[B,784], %w: f32[784,10]) -> (f32[B,10]) {
  %0 = np.matmul(%x, %w) : f32[B,10]
  %1 = np.softmax(%0) {axis = 1} : f32[B,10]
  func.return(%1)
}
""",
    """func @groups(%a: f32[2,3], %b: f32[3]) -> (f32[2,3], f32[2,1]) {
  %0, %1 = jit.group(%a, %b) {id = 0, key = "k\\"q", backend = "numba_cpu"} : f32[2,3], f32[2,1] {
  ^bb(%p: f32[2,3], %q: f32[3]):
    %2 = np.add(%p, %q) : f32[2,3]
    %3 = np.sum(%2) {axes = [1], keepdims = true} : f32[2,1]
    jit.yield(%2, %3)
  }
  func.return(%0, %1)
}
""",
    """func @consts(%x: f64[]) -> (f64[4], f32[2,2], bool[2], i64[0]) {
  %c = np.constant() {value = dense<f64[4] [1.5, -0.0, nan, -inf]>} : f64[4]
  %d = np.constant() {value = dense<f32[2,2] [[0.1, 3.4028235e38], [1e-45, -2.5]]>} : f32[2,2]
  %e = np.constant() {value = dense<bool[2] [true, false]>} : bool[2]
  %f = np.constant() {value = dense<i64[0] []>} : i64[0]
  %g = np.add(%c, %x) : f64[4]
  func.return(%g, %d, %e, %f)
}
""",
    """func @weights(%x: f32[2*S+1,4]) -> (f32[2*S+1,4]) {
  %w = np.weight() {name = "layer.0.weight"} : f32[4,4]
  %0 = np.matmul(%x, %w) : f32[2*S+1,4]
  %1 = np.clip(%0) {min = -1.0} : f32[2*S+1,4]
  %2 = np.slice(%1) {starts = [1, 0], stops = [2*S+1, 4], steps = [1, 1]} : f32[2*S,4]
  %3 = np.pad(%2) {pads = [1, 0, 0, 0]} : f32[2*S+1,4]
  func.return(%3)
}
""",
]


@pytest.mark.parametrize("text", HAND_WRITTEN)
def test_hand_written_round_trip(text):
    program = jl.parse(text)
    assert str(program) == text
    assert str(jl.parse(str(program))) == text


def test_weights_by_name_round_trip_with_data():
    text = HAND_WRITTEN[3]
    w = np.eye(4, dtype=np.float32)
    program = jl.parse(text, weights={"layer.0.weight": w})
    assert str(program) == text
    out, = jl.compile(program, level="O0")(np.ones((7, 4), np.float32))
    assert out.shape == (7, 4)


def test_locations_print_and_parse():
    def f(x):
        return np.tanh(x) * 2.0

    p = jl.trace(f, np.ones(3, np.float32))
    text = p.__str__()
    with_locs = jl.ir.print_program(p, locs=True)
    assert "loc(" in with_locs and "test_text.py" in with_locs
    q = jl.parse(with_locs)
    assert jl.ir.print_program(q, locs=True) == with_locs
    assert str(q) == text


def test_comments_are_ignored():
    text = HAND_WRITTEN[0].replace("{\n  %0", "{  // the first layer\n  %0")
    assert str(jl.parse(text)) == HAND_WRITTEN[0]


BAD = [
    ("func @f(%x: f32[4]) -> (f32[4]) {\n  %0 = np.exp(%x : f32[4]\n}", 2, "expected ',' or ')'"),
    ("func @f(%x: f32[4]) -> (f32[4]) {\n  %0 = np.exp(%y) : f32[4]\n  func.return(%0)\n}", 2, "undefined value %y"),
    ("func @f(%x: f32[4]) -> (f32[4]) {\n  %0 = np.expp(%x) : f32[4]\n  func.return(%0)\n}", 2, "did you mean np.exp"),
    ("func @f(%x: q32[4]) -> (f32[4]) {}", 1, "unknown element type 'q32'"),
    ("func @f(%x: f32[4]) -> (f32[4]) {\n  %0 = np.exp(%x) : f32[4]\n  %0 = np.exp(%x) : f32[4]\n}", 3, "defined twice"),
    ("func @f(%x: f32[4]) -> (f32[4]) {\n  %0 = np.exp(%x) : f32[4]\n", 3, "'}' closing the function"),
    ("func @f(%x: f32[4]) -> (f32[4]) {\n  %0 = np.sum(%x) {axes = [0], axes = [0]} : f32[]\n}", 2, "given twice"),
    ("func @f(%x: f32[4]) -> (f32[4]) {\n  %0 = np.constant() {value = dense<f32[2] [1.0]>} : f32[2]\n}", 2, "shape [1]"),
    ("func @f(%x: f32[4]) -> (f32[4]) {\n  %0 = np.exp(%x) : f32[4], f32[4]\n}", 2, "names 1 result(s) but gives 2"),
    ("func @f(%x: f32[4]) -> (f32[4]) {\n  %0 = np.exp(%x) : f32[4]\n  func.return(%0)\n} extra", 4, "end of input"),
    ("func @f(%x: f32[4]) -> (f32[4]) {\n  %0 = np.exp(%x) # f32[4]\n}", 2, "unexpected character '#'"),
    ("func @f(%x: f32[-4]) -> (f32[4]) {}", 1, "negative"),
    ("func @f(%x: f32[4]) -> (f32[3]) {\n  func.return(%x)\n}", 2, "header declares (f32[3])"),
    ("", 1, "expected 'func'"),
    # found by the parser fuzzer (tests/ir/test_parser_fuzz.py): each was another exception before
    ("func @f(%x: f32[" + "(" * 5000 + "1]) -> () {}", 1, "nested more than 200 levels"),
    ("func @f(%x: f32[4]) -> (f32[4]) {\n  %0 = np.sum(%x) {axes = " + "[" * 5000 + "}\n}", 2, "nested more"),
    ("func @f(%x: f32[" + "9" * 5000 + "]) -> () {}", 1, "out of range (at most 2**64 - 1)"),
    ("func @f(%x: f32[18446744073709551615]) -> () {}", 1, "dimension is too large"),
    ("func @f(%x: f32[4294967296*4294967296]) -> () {}", 1, "dimension expression too large"),
    ("func @f(%x: f32[" + "*".join(["(A+B+C+D+E+F+G+H)"] * 30) + "]) -> () {}", 1, "dimension expression too"),
    ('func @f() -> (f32[1]) {\n  %w = np.weight() {name = "\\u12"} : f32[1]\n}', 2, "malformed string"),
]


@pytest.mark.parametrize("text,line,message", BAD)
def test_parse_errors_give_line_column_and_expectation(text, line, message):
    with pytest.raises(ParseError) as info:
        jl.parse(text)
    assert info.value.line == line, str(info.value)
    assert info.value.column >= 1
    assert message in str(info.value), str(info.value)


def test_parser_never_evaluates_code():
    text = 'func @f(%x: f32[4]) -> (f32[4]) {\n  %0 = np.exp(%x) {__import__("os") = 1} : f32[4]\n}'
    with pytest.raises(ParseError):
        jl.parse(text)


def test_non_string_input():
    with pytest.raises(ParseError, match="must be a str"):
        jl.parse(b"func @f")


@given(programs(max_ops=12, dtypes=("f32", "f64")))
def test_random_programs_round_trip(case):
    text = str(case.program)
    parsed = jl.parse(text)
    assert str(parsed) == text
    assert str(jl.parse(str(parsed))) == text


floats32 = st.floats(width=32, allow_nan=True, allow_infinity=True)


@given(st.lists(floats32, min_size=1, max_size=6), st.sampled_from([np.float32, np.float64, np.float16]))
def test_dense_float_constants_round_trip_bit_exactly(values, dtype):
    with np.errstate(over="ignore"):
        array = np.array(values, dtype=np.float64).astype(dtype)
    p = Program("c", [], [])
    b = Builder(p.body)
    c = b.create("np.constant", attrs={"value": Dense(array)}).result
    p.set_outputs([c])
    parsed = jl.parse(str(p))
    got = parsed.ops[0].attrs["value"].array
    assert got.dtype == array.dtype
    assert got.tobytes() == array.tobytes() or np.array_equal(np.isnan(got), np.isnan(array))
    assert str(parsed) == str(p)


@given(st.floats(allow_nan=False), st.integers(-2**62, 2**62), st.text(max_size=12))
def test_scalar_attributes_round_trip(f, i, s):
    p = Program("a", [TensorType((2,), "f32")], ["x"])
    b = Builder(p.body)
    c = b.create("np.clip", [p.inputs[0]], {"min": f}).result
    p.set_outputs([c])
    text = str(p)
    assert str(jl.parse(text)) == text
    assert jl.parse(text).ops[0].attrs["min"] == f
    from jitlab.ir.attributes import format_attr

    assert format_attr(i) == str(i)
    q = Program(s.isidentifier() and s or "a", [], [])
    w = Builder(q.body).create("np.weight", attrs={"name": s}, result_types=[TensorType((1,), "f32")]).result
    q.set_outputs([w])
    assert str(jl.parse(str(q))) == str(q)

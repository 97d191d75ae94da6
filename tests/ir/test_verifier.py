"""Each verifier rule, tripped once; the error names the op and where it stands."""

import numpy as np
import pytest

import jitlab as jl
from jitlab.errors import VerifyError
from jitlab.ir import Block, Builder, Operation, Program, Region, TensorType, sym, verify

F4 = TensorType((4,), "f32")
F3 = TensorType((3,), "f32")


def prog(*types):
    p = Program("f", list(types) or [F4], [f"x{i}" for i in range(len(types) or 1)])
    return p, Builder(p.body, constraints=p.constraints)


def trips(p, *fragments):
    with pytest.raises(VerifyError) as info:
        verify(p)
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)
    return str(info.value)


def test_body_must_end_with_return():
    p, b = prog()
    b("np.exp", p.inputs[0])
    trips(p, "must end with func.return", "np.exp")


def test_terminator_must_be_last():
    p, b = prog()
    p.body.append(Operation("func.return", [p.inputs[0]]))
    b("np.exp", p.inputs[0])
    p.body.append(Operation("func.return", [p.inputs[0]]))
    trips(p, "op #0", "terminator must be the last op")


def test_operand_count():
    p, b = prog()
    op = p.body.append(Operation("np.exp", [p.inputs[0], p.inputs[0]], [F4]))
    p.set_outputs([op.result])
    trips(p, "np.exp", "takes 1 operand(s), got 2")


def test_attribute_kind():
    p, b = prog()
    op = b.create("np.sum", [p.inputs[0]], {"axes": (0,)})
    op.attrs["axes"] = "zero"
    p.set_outputs([op.result])
    trips(p, "np.sum", "attribute 'axes' must be a list of ints")


def test_unknown_and_missing_attributes():
    with pytest.raises(VerifyError, match="unknown attribute"):
        Operation("np.exp", [], [F4], {"axis": 1})
    with pytest.raises(VerifyError, match="missing required attribute 'perm'"):
        Operation("np.transpose", [], [F4], {})


def test_result_type_must_match_inference():
    p, b = prog()
    op = p.body.append(Operation("np.exp", [p.inputs[0]], [F3]))
    p.set_outputs([op.result])
    trips(p, "op #0", "np.exp", "f32[3]", "inferred (f32[4])")


def test_dtype_rules_are_checked():
    p, b = prog(F4, TensorType((4,), "f64"))
    op = p.body.append(Operation("np.add", list(p.inputs), [F4]))
    p.set_outputs([op.result])
    trips(p, "np.add", "operands must share one dtype")


def test_dominance():
    p, b = prog()
    e = Operation("np.exp", [p.inputs[0]], [F4])
    t = Operation("np.tanh", [e.result], [F4])
    p.body.append(t)
    p.body.append(e)
    p.set_outputs([t.result])
    trips(p, "op #0", "np.tanh", "does not dominate")


def test_isolated_region_cannot_use_outer_values():
    p, b = prog()
    outer = b("np.exp", p.inputs[0])
    body = Block([F4])
    inner = Builder(body)("np.add", body.args[0], outer)
    body.append(Operation("jit.yield", [inner]))
    g = p.body.append(Operation("jit.group", [p.inputs[0]], [F4], {"id": 0}, [Region([body])]))
    p.set_outputs([g.result])
    trips(p, "np.add", "does not dominate")


def test_region_block_needs_a_terminator():
    p, b = prog()
    body = Block([F4])
    Builder(body)("np.exp", body.args[0])
    g = p.body.append(Operation("jit.group", [p.inputs[0]], [F4], {"id": 0}, [Region([body])]))
    p.set_outputs([g.result])
    trips(p, "jit.group", "must end with a terminator")


def test_region_count():
    p, b = prog()
    g = p.body.append(Operation("jit.group", [p.inputs[0]], [F4], {"id": 0}))
    p.set_outputs([g.result])
    trips(p, "jit.group", "0 region(s)")


def test_group_yield_types_must_match_results():
    p, b = prog()
    body = Block([F4])
    body.append(Operation("jit.yield", [body.args[0]]))
    g = p.body.append(Operation("jit.group", [p.inputs[0]], [F3], {"id": 0}, [Region([body])]))
    p.set_outputs([g.result])
    trips(p, "jit.group", "jit.yield gives (f32[4])")


def test_group_block_args_must_match_operands():
    p, b = prog()
    body = Block([F3])
    body.append(Operation("jit.yield", [body.args[0]]))
    g = p.body.append(Operation("jit.group", [p.inputs[0]], [F3], {"id": 0}, [Region([body])]))
    p.set_outputs([g.result])
    trips(p, "jit.group", "block argument types")


def test_stale_use_list():
    p, b = prog()
    e = b("np.exp", p.inputs[0])
    p.set_outputs([e])
    p.inputs[0].uses.clear()
    trips(p, "np.exp", "missing from the use list")


def test_weight_must_exist_and_match():
    p, b = prog()
    w = b.create("np.weight", attrs={"name": "w"}, result_types=[F4]).result
    s = b("np.add", p.inputs[0], w)
    p.set_outputs([s])
    p.weights["other"] = np.zeros(4, np.float32)
    trips(p, "np.weight", "weight 'w' is not among")
    p.weights["w"] = np.zeros(3, np.float32)
    trips(p, "np.weight", "holds float32[3]")


def test_undeclared_symbolic_constraint():
    text = """func @f(%x: f32[B], %y: f32[C]) -> (f32[B]) {
  %0 = np.add(%x, %y) : f32[B]
  func.return(%0)
}
"""
    with pytest.raises(VerifyError, match="needs the constraint B == C"):
        jl.parse(text)
    fixed = text.replace("-> (f32[B]) {", "-> (f32[B]) where B == C {")
    assert str(jl.parse(fixed)) == fixed


def test_error_names_the_line_of_parsed_text():
    text = """func @f(%x: f32[4]) -> (f32[3]) {
  %0 = np.exp(%x) : f32[3]
  func.return(%0)
}
"""
    with pytest.raises(VerifyError, match=r"line 2"):
        jl.parse(text)


def test_symbolic_broadcast_records_constraint_when_building():
    p, b = prog(TensorType((sym("B"), 4), "f32"), TensorType((sym("C"), 4), "f32"))
    s = b("np.add", *p.inputs)
    p.set_outputs([s])
    assert list(p.constraints) == [(sym("B"), sym("C"))]
    verify(p)

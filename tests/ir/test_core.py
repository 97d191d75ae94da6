"""Mutation API of the IR core: use lists stay right under every change."""

import numpy as np
import pytest

import jitlab  # noqa: F401  (registers dialects)
from jitlab.errors import UnknownOpError, VerifyError
from jitlab.ir import Block, Builder, Dense, Operation, Program, Region, TensorType, Use, sym, verify
from jitlab.ir.shapes import exact_div

F4 = TensorType((4,), "f32")


def make():
    p = Program("f", [F4, F4], ["x", "y"])
    b = Builder(p.body)
    s = b("np.add", *p.inputs)
    e = b("np.exp", s)
    m = b("np.mul", e, s)
    p.set_outputs([m])
    return p, s, e, m


def uses_consistent(p):
    for op in p.walk():
        for i, v in enumerate(op.operands):
            assert Use(op, i) in v.uses
    for op in p.walk():
        for r in op.results:
            for u in r.uses:
                assert u.op.operands[u.index] is r


def test_use_lists_after_build():
    p, s, e, m = make()
    assert [u.op.name for u in s.uses] == ["np.exp", "np.mul"]
    assert s.users == [e.op, m.op]
    uses_consistent(p)


def test_set_operand_moves_the_use():
    p, s, e, m = make()
    m.op.set_operand(1, p.inputs[0])
    assert [u.op.name for u in s.uses] == ["np.exp"]
    assert Use(m.op, 1) in p.inputs[0].uses
    uses_consistent(p)
    verify(p)


def test_replace_all_uses_with():
    p, s, e, m = make()
    s.replace_all_uses_with(p.inputs[1])
    assert s.uses == []
    assert len(p.inputs[1].uses) == 3
    uses_consistent(p)


def test_erase_requires_no_uses_and_drops_operand_uses():
    p, s, e, m = make()
    with pytest.raises(VerifyError, match="still used"):
        s.op.erase()
    p.return_op.set_operand(0, e)
    m.op.erase()
    assert [u.op.name for u in e.uses] == ["func.return"]
    assert [u.op.name for u in s.uses] == ["np.exp"]
    assert [op.name for op in p.ops] == ["np.add", "np.exp", "func.return"]
    uses_consistent(p)
    verify(p)


def test_insert_before_and_after_keep_order():
    p, s, e, m = make()
    neg = Operation("np.neg", [s], [F4])
    p.body.insert_after(s.op, neg)
    tanh = Operation("np.tanh", [s], [F4])
    p.body.insert_before(s.op.next_op, tanh)
    assert [op.name for op in p.ops] == ["np.add", "np.tanh", "np.neg", "np.exp", "np.mul", "func.return"]
    assert len(p.body) == 6
    assert s.op.is_before_in_block(m.op) and not m.op.is_before_in_block(s.op)
    assert [op.name for op in p.body.ops_reversed()][0] == "func.return"


def test_detach_and_reinsert():
    p, s, e, m = make()
    e.op.detach()
    assert e.op.parent is None and len(p.body) == 3
    with pytest.raises(VerifyError, match="does not dominate"):
        verify(p)
    p.body.insert_before(m.op, e.op)
    verify(p)
    with pytest.raises(VerifyError, match="already in a block"):
        p.body.append(e.op)


def test_clone_is_deep_and_independent():
    p, s, e, m = make()
    q = p.clone()
    assert str(q) == str(p)
    q_add = q.ops[0]
    assert q_add is not s.op and q_add.uid == s.op.uid
    q_add.results[0].replace_all_uses_with(q.inputs[0])
    assert len(s.uses) == 2, "cloning must not share use lists"
    uses_consistent(p)
    uses_consistent(q)


def test_walk_enters_regions():
    p = Program("g", [F4], ["x"])
    body = Block([F4])
    Builder(body)("np.exp", body.args[0])
    body.append(Operation("jit.yield", [body.last_op.result]))
    group = Operation("jit.group", [p.inputs[0]], [F4], {"id": 0}, [Region([body])])
    p.body.append(group)
    p.set_outputs([group.result])
    assert [op.name for op in p.walk()] == ["jit.group", "np.exp", "jit.yield", "func.return"]
    verify(p)
    clone = p.clone()
    assert [op.name for op in clone.walk()] == ["jit.group", "np.exp", "jit.yield", "func.return"]
    assert clone.ops[0].body is not group.body


def test_unknown_op_and_bad_operand():
    with pytest.raises(UnknownOpError, match="did you mean np.add"):
        Operation("np.addd")
    with pytest.raises(UnknownOpError, match="dialect.op"):
        Operation("add")
    with pytest.raises(VerifyError, match="not an IR value"):
        Operation("np.exp", [np.zeros(3)], [F4])


def test_erase_block_arg():
    block = Block([F4, F4])
    block.erase_arg(block.args[0])
    assert len(block.args) == 1 and block.args[0].index == 0


def test_symbolic_dims_are_polynomials():
    B, S = sym("B"), sym("S")
    assert B * S == S * B
    assert (B + 1) - 1 == B
    assert str(2 * B * S + B - 3) == "2*B*S+B-3"
    assert exact_div(B * S * 8, S) == B * 8
    assert exact_div(B * 8, 3) is None
    assert (B * 4).evaluate({"B": 3}) == 12
    assert B - B == 0 and isinstance(B - B, int)


def test_dense_attributes_compare_by_content():
    a = Dense(np.array([1.0, np.nan], np.float32))
    assert a == Dense(np.array([1.0, np.nan], np.float32))
    assert a != Dense(np.array([1.0, np.nan], np.float64))
    assert hash(a) == hash(Dense(np.array([1.0, np.nan], np.float32)))
    assert not a.array.flags.writeable

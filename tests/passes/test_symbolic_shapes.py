"""Symbolic shapes: constraints collected from broadcasting, matmul and concatenation,
products through reshape and sums through concat, contradictions refused at trace
time, call-time errors naming the symbol and the inputs, and one compiled program (at
O1, after canonicalize and decompose) serving every shape that satisfies them."""

import numpy as np
import pytest

import jitlab as jl
from jitlab.errors import InputError, ShapeError

rng = np.random.default_rng(3)


def stacked_matmul(a, b, w):
    c = np.concatenate([a, b], axis=0)
    return (c @ w).reshape(-1), c


def test_matmul_and_concatenate_record_constraints_reshape_and_concat_build_expressions():
    p = jl.trace(stacked_matmul, jl.spec(("B", 4)), jl.spec(("C", 4)), jl.spec(("K", 3)))
    text = str(p)
    assert "where K == 4" in text
    assert "np.concatenate(%a, %b) {axis = 0} : f32[B+C,4]" in text
    assert "np.reshape(%1) {shape = [3*B+3*C]} : f32[3*B+3*C]" in text
    assert str(jl.parse(text)) == text


def test_call_time_error_names_the_symbol_why_it_is_needed_and_the_input():
    exe = jl.compile(jl.trace(stacked_matmul, jl.spec(("B", 4)), jl.spec(("C", 4)), jl.spec(("K", 3))))
    a, b = np.ones((2, 4), np.float32), np.ones((3, 4), np.float32)
    with pytest.raises(InputError, match=r"requires K == 4 \(np.matmul: contracted dims .*\), but the inputs "
                                         r"give 5 and 4 .*K is dim 0 of input 'w'"):
        exe(a, b, np.ones((5, 3), np.float32))


def test_broadcast_constraint_error_names_both_inputs():
    exe = jl.compile(jl.trace(lambda a, b: a * b, jl.spec(("B", 3)), jl.spec(("C", 3))))
    with pytest.raises(InputError, match="B is dim 0 of input 'a', C is dim 0 of input 'b'"):
        exe(np.ones((2, 3), np.float32), np.ones((4, 3), np.float32))


def test_contradictory_constraints_are_refused_when_tracing():
    with pytest.raises(ShapeError, match=r"needs B == 3, but the program already requires B == 2"):
        jl.trace(lambda a, b, c: (a + b, a + c), jl.spec(("B",)), np.ones(2, np.float32), np.ones(3, np.float32))


def transformer_norm(x, w):
    mu = x.mean(axis=-1, keepdims=True)
    h = (x - mu) / np.sqrt(((x - mu) ** 2).mean(axis=-1, keepdims=True) + 1e-5)
    scores = h @ w
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).T.T


def test_one_o1_program_serves_every_batch_size():
    w = rng.standard_normal((8, 5)).astype(np.float32)
    f = jl.jit(transformer_norm, level="O1", dynamic={"x": {0: "B"}})
    for batch in (1, 4, 0, 9):
        x = rng.standard_normal((batch, 8)).astype(np.float32)
        np.testing.assert_allclose(f(x, w), transformer_norm(x, w), rtol=1e-5, atol=1e-6)
    assert f.cache_size == 1
    passes = [r.name for r in f.last.report.passes]
    assert passes == [name.split("{")[0] for name in jl.passes.LEVELS["O1"]]
    assert "np.mean" not in str(f.last.program) and "np.transpose" not in str(f.last.program)


def test_canonicalize_uses_and_keeps_the_declared_constraints():
    p = jl.parse("""func @f(%x: f32[B], %y: f32[C]) -> (f32[B]) where B == C {
  %0 = np.broadcast_to(%y) {shape = [B]} : f32[B]
  %1 = np.add(%x, %0) : f32[B]
  func.return(%1)
}
""")
    out = jl.opt(p, "canonicalize")
    assert str(out) == """func @f(%x: f32[B], %y: f32[C]) -> (f32[B]) where B == C {
  %1 = np.add(%x, %y) : f32[B]
  func.return(%1)
}
"""


def test_contradictory_declared_constraints_are_a_parse_error_at_their_place():
    with pytest.raises(jl.ParseError, match=r"line 1, column 47: the constraints cannot all hold: .*B == 2"):
        jl.parse("func @f(%x: f32[B]) -> (f32[B]) where B == 2, B == 3 {\n  func.return(%x)\n}\n")

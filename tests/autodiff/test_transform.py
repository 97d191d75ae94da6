"""The grad transform on the IR: the `grad` pass on IR text, its errors, the VJP table's
coverage of the np dialect, and random programs against finite differences at O0."""

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import jitlab as jl
from jitlab.autodiff import NO_GRADIENT, VJPS, grad_program, no_gradient, vjp
from jitlab.autodiff.registry import UNSUPPORTED
from jitlab.dialects.reference import Interpreter, run_reference
from jitlab.errors import DTypeError, JitlabError, ShapeError, UnsupportedOp
from jitlab.ir import Builder, Dense, registered_ops
from tests.autodiff.checks import numeric_grad, op_fn
from tests.programs import assert_same, programs

MLP = """\
func @mlp(%x: f32[8,4], %w: f32[4,3], %b: f32[3]) -> (f32[]) {
  %0 = np.matmul(%x, %w) : f32[8,3]
  %1 = np.add(%0, %b) : f32[8,3]
  %2 = np.tanh(%1) : f32[8,3]
  %3 = np.mean(%2) {axes = [0, 1]} : f32[]
  func.return(%3)
}
"""

# Ops that have no VJP rule on purpose: max_pool2d_grad exists only inside backward graphs,
# so only a second derivative through max_pool2d would need one.
WITHOUT_RULE = {"np.max_pool2d_grad"}


def test_every_np_op_has_a_rule_or_is_marked_without_gradient():
    unclassified = ({d.name for d in registered_ops("np")} - set(VJPS) - set(NO_GRADIENT) - set(UNSUPPORTED)
                    - WITHOUT_RULE)
    assert not unclassified, f"np ops without a VJP rule or a no_gradient mark: {sorted(unclassified)}"
    assert not set(VJPS) & set(NO_GRADIENT)


def test_a_second_rule_for_an_op_is_refused():
    with pytest.raises(ValueError, match="gradient rule 'np.exp' is registered twice"):
        vjp("np.exp")(lambda p, g: [g])
    with pytest.raises(ValueError, match="gradient rule 'np.floor' is registered twice"):
        no_gradient("again", "np.floor")


def test_grad_pass_appends_gradients_as_outputs():
    program = jl.parse(MLP)
    out = jl.opt(program, "grad{wrt=w:b}")
    text = str(out)
    assert "-> (f32[], f32[4,3], f32[3])" in text
    assert "%grad_w = np.matmul" in text and "func.return(%3, %grad_w, %grad_b)" in text
    assert str(jl.parse(text)) == text
    # the forward ops are untouched and come first
    assert text.splitlines()[1:5] == MLP.splitlines()[1:5]


def test_backward_graph_of_a_broadcast_product():
    source = ("func @f(%x: f32[2,3], %w: f32[3]) -> (f32[]) {\n"
              "  %0 = np.mul(%x, %w) : f32[2,3]\n"
              "  %1 = np.tanh(%0) : f32[2,3]\n"
              "  %2 = np.sum(%1) {axes = [0, 1]} : f32[]\n"
              "  func.return(%2)\n}\n")
    expected = source.replace("-> (f32[])", "-> (f32[], f32[3])").replace("  func.return(%2)\n", (
        "  %3 = np.constant() {value = dense<f32[] 1.0>} : f32[]\n"
        "  %4 = np.expand_dims(%3) {axes = [0, 1]} : f32[1,1]\n"
        "  %5 = np.broadcast_to(%4) {shape = [2, 3]} : f32[2,3]\n"
        "  %6 = np.mul(%1, %1) : f32[2,3]\n"
        "  %7 = np.sub(%3, %6) : f32[2,3]\n"
        "  %8 = np.mul(%5, %7) : f32[2,3]\n"
        "  %9 = np.mul(%8, %x) : f32[2,3]\n"
        "  %grad_w = np.sum(%9) {axes = [0]} : f32[3]\n"
        "  func.return(%2, %grad_w)\n"))
    assert str(jl.opt(jl.parse(source), "grad{wrt=w}")) == expected


def test_grad_pass_runs_at_o0_against_numpy():
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in [(8, 4), (4, 3), (3,)])
    exe = jl.compile(jl.parse(MLP), level="O0", passes="grad{wrt=1:2},verify,dce")
    loss, gw, gb = exe(x, w, b)
    t = np.tanh(x @ w + b)
    dpre = (1 - t * t) / t.size
    assert_same([loss, gw, gb], [np.float32(t.mean()), x.T @ dpre, dpre.sum(axis=0)], rtol=1e-5)
    record = exe.report.passes[0]
    assert record.name == "grad" and record.changed and "backward op(s) giving grad_w, grad_b" in record.notes[0]


def test_grad_of_every_float_input_by_default():
    out = grad_program(jl.parse(MLP))
    assert [str(v.type) for v in out.outputs] == ["f32[]", "f32[8,4]", "f32[4,3]", "f32[3]"]


def test_unused_input_gets_zeros():
    program = jl.parse("func @f(%x: f32[3], %y: f32[2]) -> (f32[]) {\n"
                       "  %0 = np.sum(%x) {axes = [0]} : f32[]\n  func.return(%0)\n}\n")
    _, gx, gy = run_reference(grad_program(program), [np.ones(3, np.float32), np.ones(2, np.float32)])
    assert_same([gx, gy], [np.ones(3, np.float32), np.zeros(2, np.float32)])


def test_gradients_of_weights_by_name():
    rng = np.random.default_rng(3)
    w1, w2 = rng.standard_normal((4, 17)), rng.standard_normal(17)   # large enough to become weights

    def f(x):
        return np.sum(np.tanh(x @ w1) * w2)

    x = rng.standard_normal((2, 4))
    program = jl.trace(f, x)
    assert sorted(program.weights) == ["w1", "w2"]
    _, gw2, gx = jl.compile(jl.opt(program, "grad{wrt=w2:x}"), level="O0")(x)
    np.testing.assert_allclose(gw2, np.tanh(x @ w1).sum(axis=0), rtol=1e-12)
    np.testing.assert_allclose(gx, (w2 * (1 - np.tanh(x @ w1) ** 2)) @ w1.T, rtol=1e-12)
    assert "%grad_w2 = " in str(grad_program(program, ["w2"]))


def test_errors_name_what_is_wrong():
    program = jl.parse(MLP)
    with pytest.raises(JitlabError, match="@mlp has no input or weight 'v'; its inputs are x, w, b"):
        grad_program(program, ["v"])
    with pytest.raises(JitlabError, match="@mlp has 1 outputs; there is no output 2"):
        grad_program(program, output=2)
    with pytest.raises(jl.PassError, match="unknown option 'of'"):
        jl.opt(program, "grad{of=x}")
    vector = jl.parse(MLP.replace("(f32[])", "(f32[8,3])").replace("func.return(%3)", "func.return(%2)"))
    with pytest.raises(ShapeError, match=r"output 0 of @mlp must be a scalar loss .* got f32\[8,3\]"):
        grad_program(vector)
    ints = jl.parse("func @f(%i: i32[3], %x: f32[3]) -> (f32[]) {\n  %0 = np.sum(%x) {axes = [0]} : f32[]\n"
                    "  func.return(%0)\n}\n")
    with pytest.raises(DTypeError, match="'i' of @f is i32\\[3\\]: only floats can be differentiated"):
        grad_program(ints, ["i"])


def test_an_op_without_a_rule_on_the_gradient_path_is_unsupported():
    def pool_grad_norm(v):
        return np.sum(jl.grad(lambda u: np.sum(op_fn("np.max_pool2d", kernel=(2, 2))(u) ** 2))(v) ** 2)

    with pytest.raises(UnsupportedOp, match=r"np.max_pool2d_grad has no gradient rule, .* \(from .*checks.py:\d+"):
        jl.grad(pool_grad_norm)(np.ones((1, 1, 3, 3)))


def test_rules_that_need_static_dims_say_so():
    traced = jl.trace(lambda x: np.pad(x, ((1, 1), (0, 0)), mode="edge").sum(), jl.spec(("B", 3), "f32"))
    with pytest.raises(UnsupportedOp, match=r"needs the padding to be static, got B-1 .*gradient of np.pad"):
        grad_program(traced)


class ExactCasts(Interpreter):
    """The reference, except that float casts keep f64, so finite differences stay exact
    (the gradient treats a float cast as the identity)."""

    def run_op(self, op, args):
        if op.name == "np.cast" and args[0].dtype.kind == "f" and op.attrs["dtype"].kind == "f":
            return [args[0].astype(np.float64)]
        return super().run_op(op, args)


def with_weighted_sum_loss(program, seed: int):
    """The program with its first output replaced by sum(output * r), r fixed and random;
    also gives r."""
    out = program.outputs[0]
    b = Builder(program.body, before=program.return_op, constraints=program.constraints)
    r = np.random.default_rng(seed).standard_normal(tuple(out.type.shape))
    weights = b.create("np.constant", attrs={"value": Dense(r)}).result
    program.set_outputs([b("np.sum", b("np.mul", out, weights), axes=tuple(range(out.type.rank)))])
    return program, r


@given(case=programs(dtypes=("f64",), allow_empty=False), seed=st.integers(0, 2**31))
def test_random_programs_against_finite_differences(case, seed):
    first = run_reference(case.program, case.inputs)[0]
    program, r = with_weighted_sum_loss(case.program, seed)
    graded = jl.opt(program, "grad,dce")
    outs = jl.compile(graded, level="O0")(*case.inputs)
    assert_same(outs[:1], run_reference(program, case.inputs))

    def loss(*args):
        return ExactCasts(program, check=False).run(list(args))[0]

    # Rounding the loss's largest terms is what finite differences cannot see below.
    atol = 1e-6 + 1e-9 * float(np.sum(np.abs(first * r)))
    for i, g in enumerate(outs[1:]):
        expected = numeric_grad(loss, case.inputs, i)
        # exp(exp(exp(x))) overflows: finite differences of inf say nothing.
        assume(np.all(np.isfinite(expected)))
        np.testing.assert_allclose(g, expected, rtol=1e-4, atol=atol, err_msg=f"input {i} of\n{graded}")

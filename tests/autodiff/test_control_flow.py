"""Reverse mode through scf.for and scf.if: gradients equal those of the same function with its loop
written out in Python (traced unrolled, the established path), or finite differences, and the
gradient program is itself one loop that does not grow with the trip count."""

import inspect

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jitlab as jl
from jitlab.ir.verifier import verify
from tests.autodiff.checks import check_grads, numeric_grad

rng = np.random.default_rng(31)
R = rng.standard_normal(6)       # weights the outputs, so the whole VJP is checked, not only its sum


def assert_same_grads(looped, unrolled, args, argnums, level="O0", **options):
    got = jl.grad(looped, argnums=argnums, level=level, **options)(*args)
    want = jl.grad(unrolled, argnums=argnums)(*args)
    for i, g, w in zip(argnums, got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, f"argument {i}"
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12, err_msg=f"gradient of argument {i}")


# -- the kernels, each as a loop and written out --------------------------------------------------
def stencil(u, w):
    return u + w * (np.roll(u, 1) - 2 * u + np.roll(u, -1)) + 0.1 * np.sin(u)


def heat(u, w, steps=5):
    return np.sum(jl.fori_loop(0, steps, lambda i, u: stencil(u, w), u) * R)


def heat_unrolled(u, w, steps=5):
    for _ in range(steps):
        u = stencil(u, w)
    return np.sum(u * R)


def rnn(W, xs, h0):
    def step(h, x):
        h = np.tanh(W @ h + x)
        return h, np.sum(h * h)
    h, ys = jl.scan(step, h0, xs)
    return np.sum(h) + np.sum(ys * np.arange(len(ys)))


def rnn_unrolled(W, xs, h0):
    h, total = h0, 0.0
    for t in range(len(xs)):
        h = np.tanh(W @ h + xs[t])
        total = total + np.sum(h * h) * t
    return np.sum(h) + total


def reads(x, w):
    """A loop that reads rows of captured arrays at its index (np.dynamic_slice), from 1 to 5."""
    return np.sum(jl.fori_loop(1, 5, lambda i, acc: acc + x[i] * w[i] * np.sum(acc), np.ones(3)) ** 2)


def reads_unrolled(x, w):
    acc = np.ones(3)
    for i in range(1, 5):
        acc = acc + x[i] * w[i] * np.sum(acc)
    return np.sum(acc ** 2)


def branchy(x):
    """An scf.if inside an scf.for: which branch runs changes from iteration to iteration."""
    def body(i, c):
        return jl.cond(np.sum(c) > 0, lambda a: a * np.cos(a) - 0.5, lambda a: a - 0.3 * a ** 2 + 0.7, c)
    return np.sum(jl.fori_loop(0, 4, body, x) * R[:3])


def branchy_unrolled(x):
    c = x
    for _ in range(4):
        c = np.where(np.sum(c) > 0, c * np.cos(c) - 0.5, c - 0.3 * c ** 2 + 0.7)
    return np.sum(c * R[:3])


def nested(x, w):
    def outer(i, c):
        return jl.fori_loop(0, 3, lambda j, d: np.tanh(d * w + 0.1 * i - 0.2 * j), c)
    return np.sum(jl.fori_loop(0, 3, outer, x) * R[:3])


def nested_unrolled(x, w):
    c = x
    for i in range(3):
        for j in range(3):
            c = np.tanh(c * w + 0.1 * i - 0.2 * j)
    return np.sum(c * R[:3])


def heat_args():
    return rng.standard_normal(6), np.array(0.2)


def rnn_args():
    return 0.5 * rng.standard_normal((4, 4)), rng.standard_normal((5, 4)), rng.standard_normal(4)


CASES = {
    "heat": (heat, heat_unrolled, heat_args, (0, 1)),
    "rnn": (rnn, rnn_unrolled, rnn_args, (0, 1, 2)),
    "reads": (reads, reads_unrolled, lambda: (rng.standard_normal((6, 3)), rng.standard_normal(6)), (0, 1)),
    "branchy": (branchy, branchy_unrolled, lambda: (rng.standard_normal(3),), (0,)),
    "nested": (nested, nested_unrolled, lambda: (rng.standard_normal(3), rng.standard_normal(3)), (0, 1)),
}


@pytest.mark.parametrize("name,recompute", [(name, False) for name in CASES] + [("rnn", True), ("nested", True)])
def test_loop_gradients_equal_the_unrolled_loops(name, recompute):
    looped, unrolled, make_args, argnums = CASES[name]
    assert_same_grads(looped, unrolled, make_args(), argnums, recompute=recompute)


@pytest.mark.slow
@pytest.mark.parametrize("level", ["O1", "O2"])
@pytest.mark.parametrize("name", list(CASES))
def test_loop_gradients_compile(name, level):
    looped, unrolled, make_args, argnums = CASES[name]
    assert_same_grads(looped, unrolled, make_args(), argnums, level=level)


@pytest.mark.slow
def test_loop_gradient_at_o1():
    """The smallest of the compiled ones (a cold numba compile of its bodies takes 12 s): the saved buffer
    and the reverse loop compiled at O1. The O0 tests above are the fast twins of these."""
    x, w = rng.standard_normal(3), rng.standard_normal(3)
    assert_same_grads(lambda x, w: np.sum(jl.fori_loop(0, 3, lambda i, c: c * w + 1.0, x) * R[:3]),
                      lambda x, w: np.sum((((x * w + 1.0) * w + 1.0) * w + 1.0) * R[:3]), (x, w), (0, 1),
                      level="O1")


def test_heat_loop_against_finite_differences():
    check_grads(lambda u, w: jl.fori_loop(0, 4, lambda i, u: stencil(u, w), u), *heat_args())


def test_the_gradient_program_does_not_grow_with_the_trip_count():
    u, w = heat_args()
    counts = [jl.trace(jl.grad(lambda u, w, n=n: heat(u, w, n), argnums=(0, 1)), u, w).op_counts()
              for n in (3, 3000)]
    assert counts[0] == counts[1]
    assert counts[0]["scf.for"] == 2            # the forward loop, and the reverse one


@pytest.mark.parametrize("name,recompute", [("branchy", False), ("rnn", False), ("nested", True)])
def test_gradient_programs_verify_and_print_back(name, recompute):
    looped, _, make_args, argnums = CASES[name]
    program = jl.trace(jl.grad(looped, argnums=argnums, recompute=recompute), *make_args())
    verify(program)
    assert str(jl.parse(str(program))) == str(program)


def test_saved_carries_are_a_stacked_buffer_written_forward_and_read_in_reverse():
    u, w = heat_args()
    forward, reverse = [op for op in jl.trace(jl.grad(heat), u, w).body.ops if op.name == "scf.for"]
    assert forward.results[1].type.shape == (5, 6)          # one row per iteration
    assert "np.dynamic_update_slice" in [op.name for op in forward.body.ops]
    assert forward.results[1] in reverse.operands
    assert "np.dynamic_slice" in [op.name for op in reverse.body.ops]


def test_recompute_saves_nothing_and_reruns_the_loop_in_each_reverse_iteration():
    u, w = heat_args()
    program = jl.trace(jl.grad(heat, recompute=True), u, w)
    forward, reverse = [op for op in program.body.ops if op.name == "scf.for"]
    assert len(forward.results) == 1
    assert [op.name for op in reverse.body.ops].count("scf.for") == 1


def test_scan_outputs_are_not_saved():
    """A scan's stacked outputs are only written by its body: saving them per step would take steps² rows."""
    forward = next(op for op in jl.trace(jl.grad(rnn), *rnn_args()).body.ops if op.name == "scf.for")
    assert [r.type.shape for r in forward.results] == [(4,), (5,), (5, 4)]   # h, ys, h's rows


@pytest.mark.parametrize("n", [0, 1, 4])
def test_traced_trip_count(n):
    def looped(u, n):
        return np.sum(jl.fori_loop(0, n, lambda i, u: u * 0.9 + np.sin(u) * i, u) * R[:5])

    def unrolled(u, n):
        for i in range(int(n)):
            u = u * 0.9 + np.sin(u) * i
        return np.sum(u * R[:5])

    u = rng.standard_normal(5)
    np.testing.assert_allclose(jl.grad(looped)(u, np.int64(n)), jl.grad(unrolled)(u, n), rtol=1e-12)


@pytest.mark.parametrize("recompute", [False, True])
def test_zero_trips(recompute):
    x, w = rng.standard_normal(3), rng.standard_normal(3)
    gx, gw = jl.grad(lambda x, w: np.sum(jl.fori_loop(3, 3, lambda i, c: c * w, x) * w), argnums=(0, 1),
                     recompute=recompute)(x, w)
    np.testing.assert_array_equal(gx, w)
    np.testing.assert_array_equal(gw, x)


@pytest.mark.parametrize("positive", [True, False])
def test_cond_against_finite_differences(positive):
    x = np.abs(rng.standard_normal(3)) * (1 if positive else -1)
    w = rng.standard_normal(3)
    check_grads(lambda x, w: jl.cond(np.sum(x) > 0, lambda a, b: a * b * a, lambda a, b: np.exp(a) - b, x, w), x, w)


def test_integer_and_pytree_carries_and_an_input_both_carried_and_captured():
    def looped(x):
        def body(i, c):
            y, k = c["y"], c["k"]
            return {"y": y * np.sin(x + k) + x, "k": k + 2}
        return np.sum(jl.fori_loop(0, 4, body, {"y": x, "k": np.int64(1)})["y"] * R[:3])

    def unrolled(x):
        y, k = x, 1
        for _ in range(4):
            y, k = y * np.sin(x + k) + x, k + 2
        return np.sum(y * R[:3])

    assert_same_grads(looped, unrolled, (rng.standard_normal(3),), (0,))


def test_a_captured_python_loop_differentiates():
    @jl.capture_loops
    def looped(u, w):
        for _ in range(5):
            u = stencil(u, w)
        return np.sum(u * R)

    u, w = heat_args()
    assert jl.trace(jl.grad(looped), u, w).op_counts()["scf.for"] == 2
    assert_same_grads(looped, heat_unrolled, (u, w), (0, 1))


def test_while_loop_gradient_is_refused_naming_its_line():
    def f(x):
        return np.sum(jl.while_loop(lambda c: np.sum(c) < 10, lambda c: c * 2, x))

    line = inspect.getsourcelines(f)[1] + 1
    with pytest.raises(jl.UnsupportedOp, match=rf"while loop \(scf.while\) at .*test_control_flow.py:{line}.*"
                                              "counted loop"):
        jl.grad(f)(np.ones(3))


def test_a_while_loop_off_the_gradient_path_is_fine():
    def f(x, n):
        k = jl.while_loop(lambda c: c < n, lambda c: c + 1, np.int64(0))
        return np.sum(x * x) * 1.0 + k * 0

    x = rng.standard_normal(3)
    np.testing.assert_allclose(jl.grad(f)(x, np.int64(3)), 2 * x)


def test_a_training_step_through_a_loop():
    """SGD on the RNN's weights: a jitted step's gradients and losses follow the unrolled loop's."""
    W, xs, h0 = rnn_args()

    def step(loss_fn):
        @jl.jit(level="O0")
        def run(W):
            loss, g = jl.value_and_grad(loss_fn)(W, xs, h0)
            return loss, jl.optim.sgd(W, g, lr=0.05)
        return run

    looped, unrolled, a, b = step(rnn), step(rnn_unrolled), W, W
    for _ in range(3):
        (la, a), (lb, b) = looped(a), unrolled(b)
        np.testing.assert_allclose(la, lb, rtol=1e-12)
        np.testing.assert_allclose(a, b, rtol=1e-12)


# -- random loop bodies ---------------------------------------------------------------------------
UNARY = [np.sin, np.tanh, lambda a: a * a, lambda a: 0.5 * a]
BINARY = [np.add, np.multiply, np.subtract]


@st.composite
def bodies(draw):
    """A random body over (carry, capture): a few unary and binary steps, each on earlier values."""
    steps = draw(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2), st.integers(0, 10), st.integers(0, 10)),
                          min_size=1, max_size=4))

    def body(c, w):
        values = [c, w]
        for u, b, i, j in steps:
            values.append(BINARY[b](UNARY[u](values[i % len(values)]), values[j % len(values)]))
        return values[-1]
    return body


@settings(max_examples=8, deadline=None)
@given(body=bodies(), trips=st.integers(0, 3), recompute=st.booleans())
def test_random_loop_bodies(body, trips, recompute):
    def looped(x, w):
        return np.sum(jl.fori_loop(0, trips, lambda i, c: body(c, w), x) * R[:2])

    def unrolled(x, w):
        for _ in range(trips):
            x = body(x, w)
        return np.sum(x * R[:2])

    args = (np.array([0.3, -0.6]), np.array([0.4, 0.2]))
    assert_same_grads(looped, unrolled, args, (0, 1), recompute=recompute)


# -- loops with other bounds, in IR text ----------------------------------------------------------
COUNTDOWN = """func @f(%x: f64[3], %w: f64[3], %hi: i64[]) -> (f64[]) {
  %lo = np.constant() {value = dense<i64[] 1>} : i64[]
  %step = np.constant() {value = dense<i64[] -2>} : i64[]
  %r = scf.for(%hi, %lo, %step, %x, %w) : f64[3] {
  ^bb(%i: i64[], %c: f64[3], %v: f64[3]):
    %f = np.cast(%i) {dtype = f64} : f64[]
    %s = np.sin(%c) : f64[3]
    %m = np.mul(%s, %f) : f64[3]
    %n = np.mul(%m, %v) : f64[3]
    scf.yield(%n)
  }
  %t = np.sum(%r) {axes = [0]} : f64[]
  func.return(%t)
}
"""


@pytest.mark.parametrize("traced", [False, True], ids=["static", "traced"])
@pytest.mark.parametrize("recompute", [False, True], ids=["saved", "recomputed"])
def test_a_loop_counting_down_by_two(recompute, traced):
    """range(7, 1, -2): the rows saved and the induction values replayed follow the step."""
    source = COUNTDOWN if traced else COUNTDOWN.replace(
        "%hi: i64[]) -> (f64[]) {\n", "%k: i64[]) -> (f64[]) {\n  %hi = np.constant() {value = dense<i64[] 7>} : i64[]\n")
    program = jl.parse(source)
    passes = "grad{wrt=x:w" + (",recompute=true}" if recompute else "}")
    x, w, hi = rng.standard_normal(3), rng.standard_normal(3), np.int64(7)
    _, gx, gw = jl.compile(program, level="O0", passes=passes)(x, w, hi)

    def loss(x, w):
        for i in range(7, 1, -2):
            x = np.sin(x) * i * w
        return np.sum(x)

    np.testing.assert_allclose(gx, numeric_grad(loss, [x, w], 0), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(gw, numeric_grad(loss, [x, w], 1), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("recompute", [False, True], ids=["saved", "recomputed"])
def test_second_order_through_a_loop(recompute):
    """A Hessian-vector product: the gradient's own loops (the saving forward loop, the reverse one)
    differentiate again."""
    v, x = rng.standard_normal(3), rng.standard_normal(3)

    def looped(x):
        return np.sum(jl.fori_loop(0, 3, lambda i, c: np.sin(c) * x + c, x) ** 2)

    def unrolled(x):
        c = x
        for _ in range(3):
            c = np.sin(c) * x + c
        return np.sum(c ** 2)

    hvp = jl.grad(lambda x: np.sum(jl.grad(looped, recompute=recompute)(x) * v), recompute=recompute)(x)
    np.testing.assert_allclose(hvp, jl.grad(lambda x: np.sum(jl.grad(unrolled)(x) * v))(x), rtol=1e-10)


# -- jl.grad called inside a loop body or a branch ------------------------------------------------
def bowl(x, a):
    return np.sum((x - a) ** 2 * np.cosh(x))


def test_gradient_descent_inside_a_loop():
    """Its backward ops belong in the loop's body, beside the forward ones (not after the loop)."""
    a = rng.standard_normal(3)
    solve = jl.jit(lambda x: jl.fori_loop(0, 6, lambda i, x: x - 0.05 * jl.grad(bowl)(x, a), x), level="O0")
    x = np.zeros(3)
    for _ in range(6):
        x = x - 0.05 * jl.grad(bowl)(x, a)
    np.testing.assert_allclose(solve(np.zeros(3)), x, rtol=1e-12)


def test_gradient_inside_a_body_of_an_array_from_outside_it():
    a, x = rng.standard_normal(3), rng.standard_normal(3)

    def f(x):
        y = np.sin(x)
        summed = jl.fori_loop(0, 3, lambda i, c: c + jl.grad(bowl)(y, a), np.zeros(3))
        return summed, jl.cond(np.sum(x) > -10, lambda y: jl.grad(bowl)(y, a), lambda y: y, y)

    want = jl.grad(bowl)(np.sin(x), a)
    summed, branch = jl.jit(f, level="O0")(x)
    np.testing.assert_allclose(summed, 3 * want, rtol=1e-12)
    np.testing.assert_allclose(branch, want, rtol=1e-12)


SYMBOLIC = """func @f(%x: f64[B,4], %w: f64[4]) -> (f64[]) {
  %lo = np.constant() {value = dense<i64[] 0>} : i64[]
  %n = np.constant() {value = dense<i64[] 3>} : i64[]
  %one = np.constant() {value = dense<i64[] 1>} : i64[]
  %r = scf.for(%lo, %n, %one, %x, %w) : f64[B,4] {
  ^bb(%i: i64[], %c: f64[B,4], %v: f64[4]):
    %a = np.mul(%c, %v) : f64[B,4]
    %b = np.sin(%a) : f64[B,4]
    scf.yield(%b)
  }
  %t = np.sum(%r) {axes = [0, 1]} : f64[]
  func.return(%t)
}
"""


def test_saved_rows_of_a_symbolic_carry():
    program = jl.opt(jl.parse(SYMBOLIC), "grad{wrt=x:w}")
    forward = next(op for op in program.body.ops if op.name == "scf.for")
    assert str(forward.results[1].type) == "f64[3,B,4]"
    x, w = rng.standard_normal((2, 4)), rng.standard_normal(4)

    def unrolled(x, w):
        for _ in range(3):
            x = np.sin(x * w)
        return np.sum(x)

    got = jl.compile(program, level="O0", passes="verify")(x, w)[1:]
    for g, want in zip(got, jl.grad(unrolled, argnums=(0, 1))(x, w)):
        np.testing.assert_allclose(g, want, rtol=1e-12)


# -- ONNX recurrent ops, imported as loops --------------------------------------------------------
@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_onnx_recurrent_op_gradients_along_random_directions(op):
    """The weights' gradients through the scf.for an ONNX RNN, GRU or LSTM imports as, against central
    differences of the forward program along a random direction (float32: a loose tolerance)."""
    pytest.importorskip("onnx")
    from onnx import helper

    from tests.onnx.models import model, tensor

    gates, hidden, steps = {"RNN": 1, "GRU": 3, "LSTM": 4}[op], 3, 4
    shapes = {"x": (steps, 1, 2), "W": (1, gates * hidden, 2), "R": (1, gates * hidden, hidden)}
    nodes = [helper.make_node(op, ["x", "W", "R"], ["y", "y_h"], hidden_size=hidden),
             helper.make_node("ReduceSum", ["y"], ["s"], keepdims=0)]
    program = jl.onnx.load(model(nodes, [tensor(k, np.float32, list(s)) for k, s in shapes.items()],
                                 [tensor("s", np.float32, [])]))
    x, w, r = (0.5 * rng.standard_normal(s).astype(np.float32) for s in shapes.values())
    _, gw, gr = jl.compile(program, level="O0", passes="grad{wrt=W:R}")(x, w, r)
    forward = jl.compile(program, level="O0")
    eps = 1e-2
    for k, (arg, g) in enumerate([(w, gw), (r, gr)], start=1):
        d = rng.standard_normal(arg.shape).astype(np.float32)
        hi, lo = [x, w, r], [x, w, r]
        hi[k], lo[k] = arg + eps * d, arg - eps * d
        slope = (float(forward(*hi)[0]) - float(forward(*lo)[0])) / (2 * eps)     # a model gives a tuple
        np.testing.assert_allclose(np.sum(g * d), slope, rtol=2e-3, atol=1e-3)

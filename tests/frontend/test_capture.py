"""jl.capture_loops: Python `for i in range(...)` loops traced as one scf.for when their body allows,
else unrolled as before with the reason and line recorded; results always those of plain numpy."""

import inspect

import numpy as np
import pytest

import jitlab as jl


@jl.capture_loops
def heat(u, steps):
    for _ in range(steps):
        u = u + 0.1 * (np.roll(u, 1) - 2 * u + np.roll(u, -1))
    return u


@jl.capture_loops
def recurrence(a, b):
    total = 0.0
    for i in range(1, a.shape[0] - 1):
        tmp = a[i - 1] * 0.5
        a[i] = tmp + b[i] * a[i + 1]
        total += a[i].sum()
    return a, total


@jl.capture_loops
def nested(x, n):
    for _ in range(n):
        for j in range(3):
            x = x * 0.5 + j
        x = np.tanh(x)
    return x


def line_of(fn, text):
    lines, first = inspect.getsourcelines(fn.__wrapped__)
    return first + next(k for k, line in enumerate(lines) if text in line)


def run_levels(fn, args, levels=("O0", "O1", "O2"), static_argnums=()):
    """Checks fn jitted at each level against plain numpy (its results and the arrays it writes into);
    returns its program."""
    plain = getattr(fn, "__wrapped__", fn)
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    expected = plain(*copies)
    expected = expected if isinstance(expected, tuple) else (expected,)
    for level in levels:
        mine = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        got = jl.jit(fn, level=level, static_argnums=static_argnums)(*mine)
        got = got if isinstance(got, tuple) else (got,)
        for g, e in zip(got, expected, strict=True):
            np.testing.assert_allclose(g, e, rtol=1e-5, err_msg=level)
            assert np.asarray(g).dtype == np.asarray(e).dtype, level
        for g, e in zip(mine, copies):
            np.testing.assert_allclose(g, e, rtol=1e-5, err_msg=f"{level}: an argument written into")
    return jl.trace(fn, *args, static_argnums=static_argnums)


def test_a_time_loop_is_one_scf_for_whatever_its_trip_count():
    u = np.sin(np.linspace(0, 3, 32)).astype(np.float32)
    small = run_levels(heat, (u, 10), static_argnums=(1,))
    large = jl.trace(heat, u, 10_000, static_argnums=1)
    assert small.op_counts()["scf.for"] == large.op_counts()["scf.for"] == 1
    assert sum(small.op_counts().values()) == sum(large.op_counts().values())
    assert [(n.line, n.captured) for n in small.loops] == [(line_of(heat, "for _ in"), True)]


def test_a_traced_trip_count():
    u = np.ones(8, np.float32)
    program = run_levels(heat, (u, np.int64(7)), levels=("O0", "O1"))
    assert program.op_counts()["scf.for"] == 1


def test_in_place_writes_and_a_python_number_accumulator_are_carried():
    a, b = np.linspace(0, 1, 7), np.linspace(1, 2, 7)
    program = run_levels(recurrence, (a, b))
    assert program.op_counts()["scf.for"] == 1
    x = np.arange(5, dtype=np.float32)

    @jl.capture_loops
    def acc(x):
        s = 0.0
        for i in range(x.shape[0]):
            s += x[i] * 2           # numpy's weak scalar: s is float32 after the first step
        return s

    run_levels(acc, (x,))


def test_nested_loops_both_captured():
    program = run_levels(nested, (np.linspace(-1, 1, 4), 3), static_argnums=(1,))
    assert program.op_counts()["scf.for"] == 2
    assert all(n.captured for n in program.loops)


@jl.capture_loops
def refused(a):
    outs = []
    for _ in range(3):
        a = a * 2
        outs.append(a)
    for i in range(3):
        a = a + len(a[: i + 1])
    for _ in range(3):
        a = np.concatenate([a, a[:1]])
    for k in range(3):
        if k == 2:
            break
        a = a + 1
    return np.stack(outs), a


def test_loops_that_cannot_be_captured_are_unrolled_with_the_reason_and_line():
    a = np.arange(4.0)
    program = run_levels(refused, (a,), levels=("O0",))
    assert "scf.for" not in program.op_counts()
    notes = {n.line: n.reason for n in program.loops}
    assert not any(n.captured for n in program.loops)
    assert "calls .append()" in notes[line_of(refused, "outs = []") + 1]
    reasons = list(notes.values())
    assert "len() of a slice between traced bounds" in notes[line_of(refused, "a[: i + 1]") - 1]  # needs its extent
    assert "a is f64[4] before the loop and f64[5] after an iteration" in notes[line_of(refused, "concatenate") - 1]
    assert any("uses break" in r for r in reasons)
    warnings = jl.compile(program, level="O0").report.warnings
    assert sum("was unrolled" in w for w in warnings) == 4


def test_outside_a_trace_it_is_the_function():
    u = np.linspace(0, 1, 8)
    np.testing.assert_array_equal(heat(u, 3), heat.__wrapped__(u, 3))


def test_the_loop_index_read_after_the_loop_keeps_the_loop_unrolled():
    @jl.capture_loops
    def f(x):
        for i in range(3):  # noqa: B007  (read after the loop)
            x = x + 1
        return x * i

    program = run_levels(f, (np.ones(2),), levels=("O0",))
    assert "index i is read after the loop" in program.loops[0].reason


@pytest.mark.parametrize("n", [0, 1])
def test_short_loops_stay_unrolled(n):
    program = run_levels(heat, (np.ones(4), n), levels=("O0",), static_argnums=(1,))
    assert "fewer than two iterations" in program.loops[0].reason


def test_an_array_rebound_before_the_writes_leaves_the_callers_array_alone():
    def f(x, y):
        for i in range(1, 4):
            x = np.tanh(x * 0.5 + y)        # a new array: the writes below do not reach the caller's
            x[i] = x[i - 1] * 0.5
        return x

    program = run_levels(f, (np.linspace(0, 1, 5), np.linspace(1, 2, 5)), levels=("O0",))
    assert program.loops[0].captured


def test_a_name_both_written_into_and_rebound_is_refused_with_the_line():
    def f(x, s):
        for i in range(1, 4):
            if s > 1.0:
                x = x * 2.0
            else:
                x[i] = 0.0                  # the caller's array, or the new one: numpy's aliasing decides
        return x

    with pytest.raises(jl.TraceError, match=r"the if at .*test_capture.py:\d+ .*writes into x and also binds x"):
        jl.trace(f, np.ones(5), np.float64(2.0))
    assert run_levels(f, (np.ones(5), 2.0), levels=("O0",)).loops[0].captured is False      # a static s: Python


def test_a_loop_taking_gradients_is_one_loop_with_the_gradient_in_its_body():
    def loss(w, x):
        return ((x @ w) ** 2).sum()

    def train(w, x):
        for _ in range(3):
            w = w - 0.01 * jl.grad(loss)(w, x)
        return w

    w, x = np.ones((3, 2)), np.arange(12.0).reshape(4, 3) / 10
    expected = w.copy()
    for _ in range(3):
        expected = expected - 0.01 * 2 * x.T @ (x @ expected)       # the gradient by hand
    np.testing.assert_allclose(jl.jit(train, level="O0")(w, x), expected)
    program = jl.trace(train, w, x)
    (note,) = program.loops
    assert note.captured, note.reason      # jl.grad builds its backward ops inside the body (it once gave zeros)
    assert [op.name for op in program.body.ops if op.name.startswith("scf.")] == ["scf.for"]


def test_a_jit_cell_captures_its_loop():
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "jitlab")
    u = np.linspace(0, 1, 8)
    ip.user_ns.update(np=np, u=u.copy())
    result = ip.run_cell("%%jit --level O0 --name capture_cell\nfor _ in range(4):\n    u = u * 0.5 + np.roll(u, 1)\n")
    assert result.success, result.error_in_exec
    expected = u.copy()
    for _ in range(4):
        expected = expected * 0.5 + np.roll(expected, 1)
    np.testing.assert_allclose(ip.user_ns["u"], expected)
    jitted = ip.magics_manager.registry["JitMagics"].last.jitted
    assert jitted.last.program.op_counts()["scf.for"] == 1


def test_break_on_a_traced_value_is_refused_naming_its_line():
    def f(x):
        for i in range(4):
            if x[i] > 0.5:
                break
            x = x * 2.0
        return x

    with pytest.raises(jl.TraceError, match="cannot be captured: a branch uses break") as info:
        jl.trace(f, np.linspace(0, 1, 4))
    assert f"test_capture.py:{f.__code__.co_firstlineno + 2}" in str(info.value)


def relax(u, steps):
    for _ in range(steps):
        u = u + 0.1 * (np.roll(u, 1) - 2 * u + np.roll(u, -1))
    return u


def relax_then_clip(u, steps, *, top=1.0):
    def clip(v):
        for j in range(v.shape[0]):
            if v[j] > top:
                v[j] = top
        return v
    return clip(relax(u, steps) * 2.0)


def collect(u):
    outs = []
    for i in range(3):
        outs.append(u[i])
    return np.stack(outs)


def test_loops_in_the_functions_a_traced_function_calls_are_captured_too():
    # a helper called by name, and a nested helper reading the caller's keyword, each a loop of its own
    u = np.sin(np.linspace(0, 3, 16))
    program = run_levels(relax_then_clip, (u, 40), levels=("O0", "O1"), static_argnums=(1,))
    assert program.op_counts()["scf.for"] == 2
    lines = {n.line for n in program.loops if n.captured}
    relax_line = inspect.getsourcelines(relax)[1] + 1
    assert relax_line in lines and len(lines) == 3        # relax's loop, clip's loop and its if


def test_a_helper_s_loop_that_cannot_be_captured_is_unrolled_with_its_own_line():
    def twice(u):
        return collect(u) * 2.0
    program = run_levels(twice, (np.arange(4.0),), levels=("O0",))
    (note,) = program.loops
    assert not note.captured and "calls .append()" in note.reason
    assert note.line == inspect.getsourcelines(collect)[1] + 2


def apply(x, fn, steps):
    for _ in range(steps):
        x = fn(x)
    return x


def test_a_helper_called_with_keywords_gets_them_all_even_one_named_fn():
    def f(x):
        return apply(x, fn=np.tanh, steps=3) + apply(fn=np.cos, x=x, steps=2)

    x = np.linspace(0.0, 1.0, 5)
    np.testing.assert_allclose(jl.jit(f, level="O0")(x), f(x))


def test_library_functions_and_builtins_are_called_as_they_are():
    from jitlab.frontend import capture

    assert capture.converted_call(np.linalg.norm) is np.linalg.norm     # numpy's own Python function
    assert capture.converted_call(inspect.getsource) is inspect.getsource
    assert capture.converted_call(len) is len

    def f(x):
        return np.linalg.norm(x) + len(x) + max(x.shape)
    np.testing.assert_allclose(jl.jit(f, level="O0")(np.arange(3.0)), f(np.arange(3.0)))

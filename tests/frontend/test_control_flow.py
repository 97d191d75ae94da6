"""jl.fori_loop, jl.while_loop, jl.scan and jl.cond: traced once into scf ops, run eagerly on numpy
outside a trace; the traced programs agree with the eager run (plain numpy) at every level."""

import inspect

import numpy as np
import pytest

import jitlab as jl
from jitlab.errors import InputError, ShapeError, TraceError

LEVELS = ["O0", "O1", "O2"]


def heat(u, n):
    def step(i, u):
        return u + 0.25 * (np.roll(u, 1) - 2 * u + np.roll(u, -1))
    return jl.fori_loop(0, n, step, u)


def check_levels(fn, *args, levels=LEVELS, rtol=1e-5):
    expected = fn(*args)        # no trace: jl.* run eagerly on numpy
    flat = expected if isinstance(expected, tuple) else (expected,)
    program = jl.trace(fn, *args)
    for level in levels:
        got = jl.compile(program, level=level)(*args)
        for g, e in zip(got, flat):
            np.testing.assert_allclose(g, e, rtol=rtol, err_msg=level)
            assert np.asarray(g).dtype == np.asarray(e).dtype
    return program


def test_fori_loop_traced_bound_one_op_at_every_level():
    u = np.sin(np.linspace(0, 3, 32)).astype(np.float32)
    program = check_levels(heat, u, np.int64(7))
    assert program.op_counts()["scf.for"] == 1
    exe = jl.compile(program, level="O1")
    for n in (0, 1, 30):        # one compile serves every trip count
        np.testing.assert_allclose(exe(u, np.int64(n))[0], heat(u, n), rtol=1e-5)


def test_the_program_does_not_grow_with_the_trip_count():
    u = np.ones(16, np.float32)
    small = jl.trace(lambda u: heat(u, 10), u)
    large = jl.trace(lambda u: heat(u, 10_000), u)
    assert sum(small.op_counts().values()) == sum(large.op_counts().values())


def test_pytree_carries_and_captured_arrays():
    def f(x, w):
        def body(i, c):
            acc, k = c["acc"], c["k"]
            return {"acc": acc * 0.5 + w * i.astype(np.float32), "k": k + 1}
        out = jl.fori_loop(2, 6, body, {"acc": x, "k": np.int64(0)})
        return out["acc"], out["k"]

    x, w = np.ones((3, 2), np.float32), np.arange(6, dtype=np.float32).reshape(3, 2)
    check_levels(f, x, w)


def test_while_loop_convergence():
    def f(x):
        return jl.while_loop(lambda c: np.abs(c[0] - c[1]).max() > 1e-4,
                             lambda c: (c[1], 0.5 * (c[1] + 2.0 / c[1])), (x, x * 0.5))[1]

    check_levels(f, np.array([1.0, 3.0, 10.0]))


def test_while_loop_max_iterations():
    def f(x):
        return jl.while_loop(lambda c: c.sum() < 100, lambda c: c + 1, x, max_iterations=3)

    with pytest.raises(InputError, match="max_iterations=3"):
        f(np.zeros(2))
    program = jl.trace(f, np.zeros(2))
    for level in LEVELS:
        exe = jl.compile(program, level=level)
        np.testing.assert_array_equal(exe(np.full(2, 48.0))[0], f(np.full(2, 48.0)))
        with pytest.raises(InputError, match="max_iterations=3"):
            exe(np.zeros(2))


def test_cond_takes_one_branch_of_two_traced():
    def f(x, y):
        return jl.cond(x.sum() > 0, lambda a, b: (a * b, a), lambda a, b: (a - b, b * 2), x, y)

    x = np.linspace(-1, 2, 5)
    check_levels(f, x, x + 1)
    check_levels(f, -x - 5, x + 1)
    assert jl.trace(f, x, x).op_counts()["scf.if"] == 1


def test_scan_forward_and_reverse():
    def f(c0, xs):
        def step(c, x):
            c = c * 0.9 + x
            return c, (c.sum(), x * 2)
        fwd = jl.scan(step, c0, xs)
        bwd = jl.scan(step, c0, xs, reverse=True)
        return fwd[0], fwd[1][0], fwd[1][1], bwd[0], bwd[1][0]

    check_levels(f, np.zeros(4, np.float32), np.arange(20, dtype=np.float32).reshape(5, 4))


def test_nested_loops_and_a_branch_in_a_body():
    def f(x):
        def outer(i, c):
            c = jl.fori_loop(0, i, lambda j, d: d * 1.1, c)
            return jl.cond(i % 2 == 0, lambda v: v + 1.0, lambda v: v, c)
        return jl.fori_loop(0, 4, outer, x)

    check_levels(f, np.ones(3))


def test_a_carry_changing_shape_or_dtype_is_a_shape_error_naming_it():
    def grows(x):
        return jl.fori_loop(0, 3, lambda i, c: (c[0], np.concatenate([c[1], c[1]])), (x, x))

    def casts(x):
        return jl.fori_loop(0, 3, lambda i, c: c.astype(np.float64), x)

    line = inspect.getsourcelines(grows)[1] + 1
    with pytest.raises(ShapeError, match=rf"init_val_1 is f32\[3\] on entry .* returns f32\[6\].*:{line}"):
        jl.trace(grows, np.ones(3, np.float32))
    with pytest.raises(ShapeError, match=r"init_val is f32\[3\] on entry .* returns f64\[3\]"):
        jl.trace(casts, np.ones(3, np.float32))


def test_writing_into_an_outer_array_inside_a_body_is_refused():
    def f(x, y):
        def body(i, c):
            y[0] = c[0]
            return c
        jl.fori_loop(0, 2, body, x)
        return y

    with pytest.raises(TraceError, match="writes into an array from outside it"):
        jl.trace(f, np.ones(3), np.ones(3))


def test_eager_forms_are_plain_python():
    assert jl.fori_loop(0, 4, lambda i, c: c + i, 0) == 6
    assert jl.while_loop(lambda c: c < 10, lambda c: c * 2, 1) == 16
    assert jl.cond(False, lambda a: a + 1, lambda a: a - 1, 5) == 4
    carry, ys = jl.scan(lambda c, x: (c + x, c), 0, np.arange(4))
    assert carry == 6
    np.testing.assert_array_equal(ys, [0, 0, 1, 3])

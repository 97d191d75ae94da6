"""Slices whose extent follows a traced bound (`a[:j]`, `a[i:m]`) traced as masked full-extent windows,
against plain numpy: random bounds (negative, past the end, empty), op chains, reductions and writes."""

import warnings

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import jitlab as jl
from jitlab.errors import ShapeError, UnsupportedOp

# -- random window programs ---------------------------------------------------------------------------
# A bound is None, a static int, or the traced argument j plus an offset; at most one bound is traced
# per slice (two traced bounds with a static extent are np.dynamic_slice's, tested in test_dynamic_index).
BOUND = st.one_of(st.none(), st.integers(-8, 8).map(lambda k: ("int", k)),
                  st.integers(-3, 3).map(lambda k: ("j", k)))
OPS = ["add_b", "scale", "negate", "sqrt_abs", "maximum_b", "where", "square", "sub_scalar_b"]
ENDS = ["sum", "dot", "matmul", "write", "add_into", "prod", "flip_dot"]


def _value(bound, j):
    if bound is None:
        return None
    kind, k = bound
    return k if kind == "int" else j + k if k else j


def _program(lo, hi, ops, end):
    def f(a, b, j):
        s = slice(_value(lo, j), _value(hi, j))
        w = a[s]
        for op in ops:
            if op == "add_b":
                w = w + b[s]
            elif op == "scale":
                w = 1.5 * w
            elif op == "negate":
                w = -w
            elif op == "sqrt_abs":
                w = np.sqrt(np.abs(w))
            elif op == "maximum_b":
                w = np.maximum(w, b[s])
            elif op == "where":
                w = np.where(w > 0.25, w, -w)
            elif op == "square":
                w = w ** 2
            else:
                w = b[s] - w * b[0]
        if end == "sum":
            return w.sum()
        if end == "prod":
            return np.prod(w)
        if end == "dot":
            return np.dot(w, b[s])
        if end == "matmul":
            return b[s] @ w
        if end == "flip_dot":
            return np.dot(np.flip(w), b[s])
        out = a.copy()
        if end == "write":
            out[s] = w
        else:
            out[s] += w
        return out
    return f


def _traced(bound):
    return bound is not None and bound[0] == "j"


def check_program(lo, hi, ops, end, level):
    # not a static slice, nor a static extent (np.dynamic_slice's, which raises where numpy clips)
    assume((_traced(lo) or _traced(hi)) and not (_traced(lo) and _traced(hi) and lo[1] <= hi[1]))
    f = _program(lo, hi, ops, end)
    rng = np.random.default_rng(7)
    a, b = rng.random(6) - 0.25, rng.random(6)
    jitted = jl.jit(f, level=level)
    for j in (-8, -3, 0, 2, 5, 6, 9):
        expected = f(a.copy(), b.copy(), j)
        got = jitted(a.copy(), b.copy(), np.int64(j))
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12, err_msg=f"{lo}:{hi} {ops} {end} j={j}")


@settings(max_examples=12)
@given(BOUND, BOUND, st.lists(st.sampled_from(OPS), max_size=3), st.sampled_from(ENDS))
def test_random_window_programs_agree_with_numpy(lo, hi, ops, end):
    check_program(lo, hi, ops, end, "O0")


@pytest.mark.slow
@settings(max_examples=25)
@given(BOUND, BOUND, st.lists(st.sampled_from(OPS), max_size=3), st.sampled_from(ENDS))
def test_random_window_programs_agree_with_numpy_compiled(lo, hi, ops, end):
    check_program(lo, hi, ops, end, "O1")


# -- loops over windows -------------------------------------------------------------------------------
def prefix_sums(a):
    out = np.zeros_like(a)
    for i in range(a.shape[0]):
        out[i] = a[:i + 1].sum() + a[i:].prod()
    return out


def rows_scaled(c):
    for i in range(c.shape[0]):
        c[i, i:] *= 2.0
        c[i + 1:, i] = c[i, i + 1:] - 1.0
    return c


def named_window(a, j):
    w = a[:j]
    w += 1.0            # a view: numpy writes a through it
    w *= w
    return a


def integer_division(a, b):
    out = np.zeros_like(a)
    for i in range(a.shape[0] - 2):     # b's zeros lie outside every window: no lane may divide by them
        out[i] = (a[:i] // b[:i]).sum() + (a[:i + 1] % b[:i + 1]).sum()
    return out


def running_means(a, b, k):
    out = np.zeros(a.shape[0])
    rows = np.zeros(b.shape[0], np.float32)
    for i in range(1, a.shape[0]):
        out[i] = a[:i].mean() + k[i:].mean()             # an integer window's mean is float64
        rows[i] = b[i, i:].mean() + b[:i, :].mean(axis=0).sum()
    return out, rows


@pytest.mark.parametrize("fn, make", [
    (running_means, lambda r: (r.random(6), r.random((6, 4)).astype(np.float32), r.integers(-9, 9, 6))),
    (prefix_sums, lambda r: (r.random(6),)),
    (rows_scaled, lambda r: (r.random((5, 5)),)),
    (integer_division, lambda r: (r.integers(-9, 9, 6), np.array([3, -2, 5, 7, 0, 0]))),
])
def test_loops_over_windows_are_captured_and_agree_with_numpy(fn, make):
    args = make(np.random.default_rng(3))
    expected_args = [x.copy() for x in args]
    expected = fn(*expected_args)
    program = jl.trace(fn, *args)
    assert program.loops and all(n.captured for n in program.loops), [str(n) for n in program.loops]
    mine = [x.copy() for x in args]
    with np.errstate(all="raise"), warnings.catch_warnings():
        warnings.simplefilter("error")
        got = jl.jit(fn, level="O0")(*mine)
    for g, e in zip(got if isinstance(got, tuple) else [got], expected if isinstance(expected, tuple) else [expected]):
        np.testing.assert_allclose(g, e, rtol=1e-6 if e.dtype == np.float32 else 1e-12)
        assert g.dtype == e.dtype
    for m, e in zip(mine, expected_args):
        np.testing.assert_allclose(m, e, rtol=1e-12)


def test_a_named_window_is_a_view_written_through():
    a = np.random.default_rng(4).random(5)
    jitted = jl.jit(named_window, level="O0")
    for j in (-7, -2, 0, 3, 5, 8):
        np.testing.assert_allclose(jitted(a.copy(), np.int64(j)), named_window(a.copy(), j), rtol=1e-12)


# -- bad input: windows that may differ in extent -----------------------------------------------------
def unequal(a, b):
    s = np.zeros(())
    for i in range(1, a.shape[0]):
        s = s + np.dot(a[:i], b[:i + 1])
    return s


def equal_but_unproved(a, b):
    out = np.zeros_like(a)
    for i in range(1, a.shape[0]):
        out[i] = (a[:i] * b[1:i + 1]).sum()
    return out


def test_windows_of_unequal_extents_raise_as_numpy_does():
    a, b = np.ones(4), np.ones(4)
    with pytest.raises(ValueError):
        unequal(a, b)
    with pytest.raises(ShapeError, match=r"contracted dims of f64\[1\] @ f64\[2\].*test_windows.py"):
        jl.jit(unequal, level="O0")(a, b)


def test_windows_whose_extents_are_not_provably_equal_unroll_and_agree_with_numpy():
    a, b = np.random.default_rng(5).random((2, 5))
    program = jl.trace(equal_but_unproved, a, b)
    assert len(program.loops) == 1 and not program.loops[0].captured
    assert "extents may differ" in program.loops[0].reason
    np.testing.assert_allclose(jl.jit(equal_but_unproved, level="O0")(a, b), equal_but_unproved(a, b), rtol=1e-12)


def test_what_needs_the_window_shape_is_refused_naming_the_line():
    with pytest.raises(UnsupportedOp, match=r"the shape of a slice between traced bounds .*test_windows.py:\d+"):
        jl.trace(lambda a, j: a[:j].shape, np.zeros(4), np.int64(2))
    with pytest.raises(UnsupportedOp, match="np.concatenate of a slice between traced bounds"):
        jl.trace(lambda a, j: np.concatenate([a[:j], a]).sum(), np.zeros(4), np.int64(2))


# -- gradients ----------------------------------------------------------------------------------------
def windowed_loss(a, b):
    s = np.zeros(())
    for i in range(a.shape[0]):
        s = s + np.dot(a[:i], b[:i]) * a[i] + (b[i:] ** 2).sum()
    return s


def test_gradients_through_a_loop_over_windows_against_finite_differences():
    a, b = np.random.default_rng(1).random((2, 5))
    notes = jl.trace(windowed_loss, a, b).loops
    assert notes and all(n.captured for n in notes)
    grad_a, grad_b = jl.grad(windowed_loss, argnums=(0, 1))(a, b)
    eps, basis = 1e-6, np.eye(5)
    numeric_a = [(windowed_loss(a + eps * e, b) - windowed_loss(a - eps * e, b)) / (2 * eps) for e in basis]
    numeric_b = [(windowed_loss(a, b + eps * e) - windowed_loss(a, b - eps * e)) / (2 * eps) for e in basis]
    np.testing.assert_allclose(grad_a, numeric_a, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(grad_b, numeric_b, rtol=1e-6, atol=1e-9)

"""Writes (np.update_slice, np.scatter_nd) as fused numba kernels at O1 and O2: every function
is checked against plain numpy (run untraced), results and arguments alike; the memory plan
is checked to update in place where the written array dies at the write, and to copy where
it is still read."""


import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jitlab as jl
from jitlab.errors import InputError
from jitlab.passes.pipelines import pipeline_for
from jitlab.report import CompileReport
from tests.budget import compiled_examples, slow_o2
from tests.strategies import INDEX_KINDS, write_index

LEVELS = ("O0", "O1", "O2")
RNG = np.random.default_rng(0)


pytestmark = pytest.mark.usefixtures("private_cache")


def check(fn, *args, levels=LEVELS):
    """fn jitted agrees with fn on numpy, in its results and in what it leaves in its arguments,
    over two calls (the second with new values: nothing cached wrongly)."""
    for level in levels:
        jitted = jl.jit(fn, level=level)
        for call in range(2):
            given = [a if call == 0 or a.dtype.kind != "f" else RNG.standard_normal(a.shape).astype(a.dtype)
                     for a in args]
            want_args, got_args = [a.copy() for a in given], [a.copy() for a in given]
            want, got = fn(*want_args), jitted(*got_args)
            for g, w in zip(_flat(got), _flat(want)):
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=f"{fn.__name__} at {level}")
            for g, w in zip(got_args, want_args):
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=f"{fn.__name__}'s args at {level}")
    return jitted


def _flat(result):
    return [] if result is None else list(result) if isinstance(result, tuple) else [result]


def fill_rows(x):
    out = np.zeros(x.shape)
    for i in range(x.shape[0]):
        out[i] = np.tanh(x[i]) * i
    return out


def recurrence(x):
    out = np.empty_like(x)
    out[0] = x[0]
    for i in range(1, x.shape[0]):
        out[i] = out[i - 1] * 0.5 + x[i]
    return out


def stencil(u):
    for _ in range(3):
        new = u.copy()
        new[1:-1, 1:-1] = u[1:-1, 1:-1] + 0.1 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]
                                                - 4 * u[1:-1, 1:-1])
        u = new
    return u


def strided_and_broadcast(x):
    out = np.ones((6, 5))
    out[::2, 1:4] = x[:3, :3] * 2
    out[-1:0:-2, 0] = -x[:3, 4]
    out[3] = 7.0
    out[1:, -1] += out[:-1, 0]
    return out


def duplicates(a, idx, c):
    a = a * 1.0
    a[idx] += c                      # numpy's buffered += : the last write of a repeated index wins
    np.add.at(a, idx, c)             # accumulates every repeat
    np.maximum.at(a, idx[::-1], 0.5)
    return a


def masks(a, b):
    a[np.array([True, False, True, False])] = 3.0       # a static mask: a scatter at its nonzeros
    b[b > 0] = 0.0                                       # a traced mask
    return a + 0.0


def into_a_view(a):
    row = a[1]
    row[1:] = 5.0
    t = a.T
    t[0, 2] = -1.0
    a[:, 0] += 1.0
    return row * 1.0


def operand_still_live(x):
    y = x * 2.0
    z = y.copy()                # z and y are one value when traced: the write must copy
    z[0] = 0.0
    return y + 1.0, z


def writes_arguments(u, w):
    u[1:-1] = 0.5 * (u[:-2] + u[2:])       # reads u at other rows: computed from the old u
    w[w.shape[0] // 2:] *= 2.0


@pytest.mark.parametrize("fn, shapes", [
    (fill_rows, [(6, 4)]), (recurrence, [(7, 3)]), (stencil, [(8, 9)]), (strided_and_broadcast, [(4, 5)]),
    (into_a_view, [(3, 4)]), (operand_still_live, [(3, 2)]), (writes_arguments, [(9,), (6, 2)]),
])
def test_imperative_functions_agree_with_numpy_at_every_level(fn, shapes):
    check(fn, *[RNG.standard_normal(s) for s in shapes])


def test_repeated_indices_keep_numpys_order_and_masks_write():
    idx = np.array([1, 3, 1, -2, 0, 1])
    check(duplicates, RNG.standard_normal((5, 3)).astype(np.float32), idx, np.arange(6.0, dtype=np.float32)[:, None])
    check(masks, RNG.standard_normal(4), RNG.standard_normal((3, 3)))


def int_indices_2d(a, rows, cols):
    a = a + 0
    a[rows, cols] = 7
    a[rows] += 1
    np.multiply.at(a, (rows, cols), 3)
    np.minimum.at(a, rows, -2)
    return a


def bools_and_negative_steps(b):
    b = b | False
    b[::-2] = True
    b[1] = b[0]
    return b


def strided_3d_and_scalars(x):
    y = x * 1.0
    y[1, ::2, 1:] = y[0, ::2, :-1] + 1
    y[0, -1::-1, 0] = 5.0
    s = np.float64(0.0) + x[0, 0, 0]
    s += 1
    return y, s


def int32_indices_float32(a, idx):
    a = a * 2
    np.maximum.at(a, idx, np.float32(0.25))
    a[idx[:2]] = a[idx[:2]] * 3
    return a


@pytest.mark.parametrize("level", slow_o2("O1", "O2"))
def test_dtypes_steps_and_multi_dim_indices(level):
    check(int_indices_2d, RNG.integers(-5, 5, (4, 5)), np.array([0, 2, 0, -1]), np.array([1, 1, 1, 4]),
          levels=(level,))
    check(bools_and_negative_steps, RNG.random(7) > 0.5, levels=(level,))
    check(strided_3d_and_scalars, RNG.standard_normal((2, 5, 4)), levels=(level,))
    check(int32_indices_float32, RNG.standard_normal(6).astype(np.float32), np.array([5, 0, 5, -6], np.int32),
          levels=(level,))


def test_writes_become_fused_groups():
    exe = jl.jit(fill_rows, level="O1", capture_loops=False)      # the loop's writes unrolled, as this tests
    exe(np.ones((6, 4)))
    groups = exe.last.report.groups
    assert [g.kind for g in groups] == ["write"]
    assert groups[0].op_names.count("np.update_slice") == 6 and "np.tanh" in groups[0].op_names


@pytest.mark.parametrize("level", slow_o2("O1", "O2"))
def test_an_index_out_of_range_is_an_input_error(level):
    def f(a, idx):
        a = a * 1.0
        a[idx] = 1.0
        return a

    jitted = jl.jit(f, level=level)
    np.testing.assert_allclose(jitted(np.zeros(4), np.array([0, -4])), [1, 0, 0, 0])
    assert not any(r.name == "np.scatter_nd" for r in jitted.last.report.rejected)
    with pytest.raises(InputError, match="np.scatter_nd: an index in the indices is out of range"):
        jitted(np.zeros(4), np.array([1, 4]))
    with pytest.raises(InputError, match="out of range"):
        jitted(np.zeros(4), np.array([-5, 0]))


def fill_rows_100(x):
    out = np.zeros((100, x.shape[1]))
    for i in range(100):
        out[i] = np.tanh(x[i]) + i
    return out


def recurrence_100(x):
    out = np.zeros((100, x.shape[1]))
    for i in range(1, 100):
        out[i] = out[i - 1] * 0.5 + x[i]
    return out


@pytest.mark.parametrize("level", slow_o2("O1", "O2"))
@pytest.mark.parametrize("fn", [fill_rows_100, recurrence_100])
def test_a_fill_loop_updates_one_array_in_place(fn, level):
    x = RNG.standard_normal((100, 64))
    report = CompileReport(program=fn.__name__)
    jl.opt(jl.trace(fn, x, capture_loops=False), pipeline_for(level), report=report)     # the writes unrolled
    plan = report.memory
    # x and out (and the pool's alignment), not an array per row written
    assert plan.peak_bytes < 2.2 * x.nbytes, (plan.peak_bytes, x.nbytes)
    in_place = [b for b in plan.buffers if b.kind == "inplace"]
    assert len(in_place) >= (3 if fn is fill_rows_100 else 98)     # groups of 32 writes, or one per row


def test_a_fill_loop_longer_than_a_group_agrees_with_numpy():
    check(fill_rows, RNG.standard_normal((34, 3)), levels=("O1", "O2"))


def test_the_plan_copies_where_the_written_array_is_read_later():
    def f(x):
        y = x * 2.0
        z = y.copy()
        z[1:] = y[:-1]        # reads y at other rows than it writes: no update in place
        return z

    exe = jl.compile(jl.trace(f, np.ones(5)), level="O1")
    assert not [b for b in exe.report.memory.buffers if b.kind == "inplace"]
    x = np.arange(5.0)
    np.testing.assert_allclose(exe(x)[0], f(x))


def test_written_arguments_are_updated_in_place():
    def f(u):
        for i in range(1, u.shape[0]):
            u[i] += u[i - 1]

    for level in ("O1", "O2"):
        # unrolled: a loop op's result is not yet planned into its carried input (docs/control-flow.md)
        jitted = jl.jit(f, level=level, capture_loops=False)
        u = np.arange(6.0)
        jitted(u)
        np.testing.assert_allclose(u, np.cumsum(np.arange(6.0)))
        (donation,) = jitted.last.report.donations
        assert donation.mode == "in place", level


# -- random sequences of writes at O1 and O2 ------------------------------------------------
NO_NONE = tuple(k for k in INDEX_KINDS if k != "none")


@st.composite
def write_sequences(draw):
    steps = []
    for _ in range(draw(st.integers(1, 5))):
        first = write_index(draw, 4, NO_NONE)
        k = (first, slice(draw(st.integers(0, 2)), None)) if draw(st.booleans()) else (first,)
        if len(k) == 2 and isinstance(k[0], np.ndarray) and k[0].dtype == bool:
            k = (slice(None), k[1])
        how = draw(st.sampled_from(["set", "add", "shift", "at", "view"]))
        steps.append((k, how, draw(st.floats(-2, 2, width=32))))
    return steps


def _apply(steps, local):
    def f(a):
        if local:           # writes into a temporary the plan may update in place, not the argument
            a = a * 1.0
        for key, how, value in steps:
            if how == "set":
                a[key] = value
            elif how == "add":
                a[key] += value * a[key]
            elif how == "shift":            # reads a at other rows than it writes
                a[1:] = a[:-1] * value
                a[key] = a[key] * 0.5
            elif how == "at" and isinstance(key[0], np.ndarray) and key[0].dtype != bool:
                np.add.at(a, key, value)
            else:
                v = a[key]
                a[...] *= 2.0
                a[key] = v + value
        return a * 1.0
    return f


@settings(max_examples=compiled_examples(3), deadline=None)
@given(write_sequences(), st.sampled_from(["O1", "O2"]), st.booleans())
def test_random_write_sequences_agree_with_numpy_at_o1_o2(steps, level, local):
    f = _apply(steps, local)
    a = np.arange(12.0).reshape(4, 3)
    try:
        want_a = a.copy()
        want = f(want_a)
    except IndexError:
        return
    got_a = a.copy()
    got = jl.jit(f, level=level)(got_a)
    np.testing.assert_allclose(got, want)
    np.testing.assert_allclose(got_a, want_a)


def test_autotune_does_not_measure_a_scatter_on_random_indices():
    def f(a, idx):
        a = a * 1.0
        a[idx] = 2.0
        return a

    a, idx = np.zeros(3), np.array([2, 0])
    exe = jl.compile(jl.trace(f, a, idx), level="O1", autotune=True)    # random indices 0..7 would not fit
    np.testing.assert_allclose(exe(a, idx)[0], [2.0, 0.0, 2.0])


def test_gradients_through_writes_and_gathers_agree_with_o0():
    def loss(x, w):
        y = np.tanh(x[np.array([0, 2, 2, -1])] @ w)      # its VJP scatters with repeats (add)
        z = x * 1.0
        z[1:3] = y[:2, :3] * 2
        return (z * z).sum()

    x, w = RNG.random((4, 3)), RNG.random((3, 3))
    want = jl.jit(jl.grad(loss, argnums=(0, 1)), level="O0")(x, w)
    for level in ("O1", "O2"):
        for g, e in zip(jl.jit(jl.grad(loss, argnums=(0, 1)), level=level)(x, w), want):
            np.testing.assert_allclose(g, e, rtol=1e-10, err_msg=level)

"""Imperative numpy: arrays created and filled inside a traced function, in-place writes
of every kind, views that see writes, and arguments written back after the call; each
checked against plain numpy (the function run untraced), results and arguments alike."""

import os

import numpy as np
import numpy as xp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy import zeros as np_zeros

import jitlab as jl
from jitlab.errors import InputError, TraceError, UnsupportedOp
from tests.strategies import write_index

RNG = np.random.default_rng(0)
ALL_LEVELS = ("O0", "O1", "O2")


def rand(*shape):
    return RNG.standard_normal(shape)


def check(fn, *args, levels=("O0",), calls=2):
    """fn jitted agrees with fn on numpy, in its results and in what it leaves in its arguments."""
    for level in levels:
        jitted = jl.jit(fn, level=level)
        for call in range(calls):
            given_args = [a if call == 0 else (rand(*a.shape) if a.dtype.kind == "f" else a)
                          for a in args]
            want_args = [np.array(a, copy=True) for a in given_args]
            got_args = [np.array(a, copy=True) for a in given_args]
            want, got = fn(*want_args), jitted(*got_args)
            _same(got, want, f"{fn.__name__} at {level}, call {call}")
            for i, (g, w) in enumerate(zip(got_args, want_args)):
                np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-9, err_msg=f"argument {i} at {level}")


def _same(got, want, what):
    if want is None:
        assert got is None, what
    elif isinstance(want, (tuple, list)):
        assert len(got) == len(want), what
        for g, w in zip(got, want):
            _same(g, w, what)
    else:
        assert np.asarray(got).dtype == np.asarray(want).dtype, what
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9, err_msg=what)


# -- creation functions ----------------------------------------------------------------------
def filled_by_rows(x):
    out = np.empty((x.shape[0], 2))
    for i in range(x.shape[0]):
        out[i] = x[i, :2] * i
    return out


def every_creation_function(x):
    a = np.zeros(3) + np.ones((3,), np.float32) + np.full(3, 2.5) + np.arange(3) + np.linspace(0, 1, 3)
    b = np.eye(3) + np.identity(3) + np.zeros_like(x) + np.ones_like(x) + np.full_like(x, 3) + np.empty_like(x) * 0
    c = xp.zeros((3, 3)) + np_zeros(3) + np.zeros_like(np.ones((3, 3)))
    return a, b + c + x


def test_arrays_created_inside_are_traced_and_filled():
    check(filled_by_rows, rand(4, 3))
    check(every_creation_function, rand(3, 3))


def test_globals_are_restored_after_tracing_even_on_error():
    def bad(x):
        y = np.zeros(3)
        return y + x.item()

    with pytest.raises(TraceError):
        jl.trace(bad, rand(3))
    assert np is xp and np.zeros is np_zeros and globals()["np"] is xp


def test_creation_refuses_traced_sizes():
    def f(x):
        return np.zeros((x.sum(), 2))

    with pytest.raises(TraceError, match="shape must be Python ints"):
        jl.trace(f, rand(3))


# -- setitem ---------------------------------------------------------------------------------
def basic_writes(a, b):
    a[0] = 1.0
    a[1, 1:3] = b[0, :2]
    a[::-2, 0] = -b[:2, 1]
    a[None, 2, ...] = 4.0
    a[..., -1] = b[:, 2]
    a[1:, :2] = np.float32(7)
    return a.sum()


def advanced_writes(a, idx, b):
    a[[0, 2]] = b[:2]
    a[idx, 1] = 3.0
    a[1, idx] = b[0, :2]
    a[np.array([0, 1]), np.array([2, 0])] = -1.0
    a[a > 0.5] = 0.5
    a[np.array([True, False, True]), :] = b[:2]
    return a


def test_setitem_basic_advanced_and_masks():
    check(basic_writes, rand(3, 4), rand(3, 4))
    check(advanced_writes, rand(3, 3), np.array([2, 0]), rand(3, 3))


def augmented(a, b):
    a += b
    a[1:] -= 2 * b[:1]
    a[np.array([0, 0, 2])] *= 3.0
    t = 0.0
    s = a[0, 0]
    for i in range(3):
        t += np.tanh(a[i, i])
        s += a[i, i]
    return t, s


def out_and_writing_functions(a, b, c):
    np.add(a, b, out=c)
    np.multiply(c, 2, out=c, where=a > 0)
    np.sum(a, axis=0, out=b[0])
    np.copyto(a, b, where=b > 0)
    np.put(a, [0, 5], [9.0, 8.0])
    np.putmask(c, c < 0, 0.0)
    np.fill_diagonal(b, 1.5)
    np.add.at(c, np.array([0, 0, 1]), 1.0)
    np.maximum.at(c, (np.array([2, 2]), np.array([0, 1])), 5.0)
    np.subtract.at(a, (0, slice(None)), 1.0)
    np.negative(a, out=a)


def test_augmented_assignment_and_out():
    check(augmented, rand(3, 3), rand(3, 3))
    check(out_and_writing_functions, rand(3, 3), rand(3, 3), rand(3, 3))


def test_everything_at_every_level():
    def f(a, b):
        out = np.zeros((3, 3))
        row = a[1]
        a[1] += 1.0
        out[0] = row
        out[1:, :] = a[:2] * b[:2]
        out[np.array([2, 0]), 0] += 1.0
        np.add.at(out, (np.array([1, 1]), np.array([2, 2])), 1.0)
        b[b > 0] = 0.0
        return out

    check(f, rand(3, 3), rand(3, 3), levels=ALL_LEVELS)


# -- views -----------------------------------------------------------------------------------
def views(a):
    row, col, t, flat = a[1], a[:, 0], a.T, a.reshape(-1)
    a[1] += 1.0           # row, col, t and flat see this
    first = row * 1
    row[0] = 5.0          # and this writes a
    t[2, 0] = -3.0        # through a transpose
    flat[-1] = 4.0        # through a reshape
    col2 = col[::-1]
    col2[0] = 8.0         # a view of a view
    copied = a.copy()
    copied[0] = 0.0       # a copy is no view
    converted = a.astype(np.float64)
    converted[1] = 0.0
    return first, row, col, t, flat, col2, copied, converted


def test_views_see_writes_and_write_through():
    check(views, rand(3, 3))


def test_scalars_picked_by_integers_are_copies():
    def f(a):
        s = a[0, 0]
        s += 1.0
        return s

    check(f, rand(2, 2))


def test_read_only_views_refuse_writes():
    def f(a):
        v = np.broadcast_to(a, (2, 3))
        v[0] = 1.0
        return v

    with pytest.raises(TraceError, match="read-only view") as info:
        jl.trace(f, rand(3))
    assert "test_functionalize.py" in str(info.value)


# -- arguments written back ------------------------------------------------------------------
def only_mutates(a, params):
    a[0] = params["w"].sum()
    params["w"] *= 2.0


def test_a_function_returning_none_writes_its_arguments_back():
    for level in ALL_LEVELS:
        a, w = rand(3), rand(2)
        jitted = jl.jit(only_mutates, level=level)
        params = {"w": w.copy()}
        assert jitted(a, params) is None
        assert a[0] == pytest.approx(w.sum()) and np.allclose(params["w"], 2 * w)
    program = jl.trace(only_mutates, rand(3), {"w": rand(2)})
    assert "%a_new" in str(program) and "%params.w_new" in str(program)


def test_arguments_sharing_memory_or_read_only_are_refused():
    def f(a, b):
        a += b
        return a.sum()

    x = rand(4)
    jitted = jl.jit(f, level="O0")
    with pytest.raises(InputError, match="shares memory"):
        jitted(x, x)
    with pytest.raises(InputError, match="shares memory"):
        jitted(x[:2], x[1:3])
    ro = rand(4)
    ro.setflags(write=False)
    with pytest.raises(InputError, match="read-only"):
        jitted(ro, rand(4))
    np.testing.assert_allclose(jitted(x[:2].copy(), x[2:]), f(x[:2].copy(), x[2:]))


# -- what is refused -------------------------------------------------------------------------
@pytest.mark.parametrize("fn,error,words", [
    (lambda a: a.__setitem__(a > 0, a), UnsupportedOp, "np.where"),
    (lambda a: np.add(a, 1, out=np.zeros(0) if False else RNG.standard_normal(3)), TraceError, "outside"),
    (lambda a: np.power.at(a, np.array([0, 1]), 2.0), UnsupportedOp, "add, subtract"),
    (lambda a: np.put(a, [0, 1, 2], [1.0, 2.0]), UnsupportedOp, "np.put repeats"),
    (lambda a: np.add(a.astype(np.int64), 1.5, out=a.astype(np.int64)), jl.DTypeError, "same_kind"),
])
def test_what_cannot_be_expressed_is_refused_with_the_line(fn, error, words):
    with pytest.raises(error, match=words) as info:
        jl.trace(fn, rand(3))
    assert "test_functionalize.py" in str(info.value)


# -- random sequences of writes --------------------------------------------------------------
@st.composite
def write_sequences(draw):
    steps = []
    for _ in range(draw(st.integers(1, 4))):
        key = draw(st.sampled_from(["one", "two"]))
        if key == "one":
            k = write_index(draw, 4)
            k = (k,) if k is not None else (None, slice(None))
        else:
            k = (write_index(draw, 4), slice(draw(st.integers(0, 2)), None))
            if any(x is None for x in k) or any(isinstance(x, np.ndarray) and x.dtype == bool for x in k):
                k = (slice(None), k[1])
        steps.append((k, draw(st.sampled_from(["set", "add", "view"])), draw(st.floats(-2, 2, width=32))))
    return steps


@settings(max_examples=int(os.environ.get("JITLAB_HYPOTHESIS_EXAMPLES", 25)), deadline=None)
@given(write_sequences())
def test_random_write_sequences_agree_with_numpy(steps):
    def f(a):
        for key, how, value in steps:
            if how == "set":
                a[key] = value
            elif how == "add":
                a[key] += value * a[key]
            else:
                v = a[key]
                a[...] *= 2.0
                a[key] = v + value
        return a * 1.0

    a = np.arange(12.0).reshape(4, 3)
    try:
        want_a = a.copy()
        want = f(want_a)
    except IndexError:
        return
    got_a = a.copy()
    got = jl.jit(f, level="O0")(got_a)
    np.testing.assert_allclose(got, want)
    np.testing.assert_allclose(got_a, want_a)


# -- gradients -------------------------------------------------------------------------------
def test_gradient_through_update_slice_matches_finite_differences():
    def loss(x, u):
        y = x * 1.0
        y[1:3, ::-1] = u * 2.0
        y[0] += u[0]
        return (y * y).sum()

    x, u = rand(3, 2), rand(2, 2)
    gx, gu = jl.grad(loss, argnums=(0, 1))(x, u)
    eps = 1e-6
    for arg, g, i in ((x, gx, 0), (u, gu, 1)):
        fd = np.zeros_like(arg)
        for k in np.ndindex(arg.shape):
            plus, minus = [x.copy(), u.copy()], [x.copy(), u.copy()]
            plus[i][k] += eps
            minus[i][k] -= eps
            fd[k] = (loss(*plus) - loss(*minus)) / (2 * eps)
        np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-6)


# -- kernels written the imperative way ------------------------------------------------------
def jacobi(u, steps=2):
    for _ in range(steps):
        new = u.copy()
        new[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
        u[:] = new


def gram_schmidt(A):
    n = A.shape[1]
    Q = np.zeros_like(A)
    for j in range(n):
        v = A[:, j].copy()
        for i in range(j):
            v -= np.dot(Q[:, i], A[:, j]) * Q[:, i]
        Q[:, j] = v / np.sqrt(np.dot(v, v))
    return Q


def cholesky(A):
    n = A.shape[0]
    L = np.zeros_like(A)
    for j in range(n):
        s = A[j, j]
        for k in range(j):
            s -= L[j, k] * L[j, k]
        L[j, j] = np.sqrt(s)
        for i in range(j + 1, n):
            t = A[i, j]
            for k in range(j):
                t -= L[i, k] * L[j, k]
            L[i, j] = t / L[j, j]
    return L


def conv_loops(x, w):
    out = np.empty((3, 3))
    for i in range(3):
        for j in range(3):
            out[i, j] = (x[i:i + 2, j:j + 2] * w).sum()
    return np.maximum(out, 0)


def histogram(x):
    counts = np.zeros(4)
    bins = np.clip((x * 4).astype(np.int64), 0, 3)
    np.add.at(counts, bins, 1.0)
    return counts


def test_imperative_kernels():
    spd = rand(3, 3)
    spd = spd @ spd.T + 3 * np.eye(3)
    check(jacobi, rand(4, 4), levels=ALL_LEVELS)
    check(gram_schmidt, rand(3, 3))
    check(cholesky, spd, calls=1)
    check(conv_loops, rand(4, 4), rand(2, 2), levels=("O0", "O1"))
    check(histogram, RNG.random(8), levels=("O0", "O2"))


def test_traced_slice_bounds_say_what_to_write_instead():
    def f(x, i):
        return x[i:]

    def g(x, i):
        return x[i:i + 2]       # a static extent: np.dynamic_slice (tests/frontend/test_dynamic_index.py)

    with pytest.raises(UnsupportedOp, match="slice between traced bounds.*static_argnums") as info:
        jl.trace(f, rand(4), np.int64(1))
    assert "test_functionalize.py" in str(info.value)
    np.testing.assert_allclose(jl.jit(f, level="O0", static_argnums=1)(np.arange(4.0), 1), [1.0, 2.0, 3.0])
    np.testing.assert_allclose(jl.jit(g, level="O0")(np.arange(4.0), np.int64(1)), [1.0, 2.0])


def test_an_argument_written_into_and_donated_keeps_the_other_results_right():
    def f(a, b):
        out = a * 2.0 + b
        a += 1.0
        return out

    for level in ALL_LEVELS:
        a, b = rand(4), rand(4)
        want_a = a.copy()
        want = f(want_a, b)
        got = jl.jit(f, level=level, donate_argnums=(0,))(a, b)
        np.testing.assert_allclose(got, want)
        np.testing.assert_allclose(a, want_a)


def test_other_threads_see_numpy_while_a_function_is_traced():
    import threading

    seen = []

    def other():
        seen.append(type(np.zeros(2)))

    def f(x):
        t = threading.Thread(target=other)
        t.start()
        t.join()
        return x + np.zeros(3)

    jl.trace(f, rand(3))
    assert seen == [np.ndarray]


def test_lists_of_traced_values_and_symbolic_dims():
    def rows(x):
        out = np.zeros((2, 3))
        out[0] = [x[0], x[1] * 2, 3.0]
        out[1] = (x[2], x[0], x[1])
        return out

    check(rows, rand(3))

    def shift(x):
        y = x * 1
        y[1:] = x[:-1]
        y[:-1] += 1
        return y

    for n in (3, 5):
        x = rand(n)
        np.testing.assert_allclose(jl.jit(shift, level="O0", dynamic={"x": {0: "B"}})(x), shift(x))


@pytest.mark.parametrize("fn,error,words", [
    (lambda x: np.zeros(x.argmax()), TraceError, "static_argnums"),
    (lambda x: x.reshape(x.argmax(), -1), TraceError, "static_argnums"),
    (lambda x: x if x[0] > 0 else -x, TraceError, "np.where"),
    (lambda x: x[x.argmax():], UnsupportedOp, "slice between traced bounds.*static_argnums"),    # returned
])
def test_data_dependent_shapes_and_control_flow_say_what_to_write(fn, error, words):
    with pytest.raises(error, match=words) as info:
        jl.trace(fn, rand(4))
    assert "test_functionalize.py" in str(info.value)


def test_helpers_in_other_modules_and_jitted_helpers_create_traced_arrays():
    from tests.frontend import _imperative_helpers as helpers
    from tests.frontend._imperative_helpers import rows_times

    inner = jl.jit(lambda x: helpers.rows_times(x, 3.0))

    def f(x):
        return helpers.rows_times(x, 2.0) + rows_times(x, 1.0) + inner(x)

    check(f, rand(3, 3))
    assert helpers.np is np


class _AnswersAnything:
    """A global whose __getattr__ answers every name (as pattern builders do): routing must not ask it."""

    def __call__(self, *args):
        return args

    def __getattr__(self, name):
        raise AssertionError(f"asked for {name}")


ANSWERS_ANYTHING = _AnswersAnything()


def test_routing_does_not_probe_other_globals():
    def f(x):
        assert ANSWERS_ANYTHING is not None
        return x + np.zeros(3)

    check(f, rand(3))


def test_gradient_of_a_loss_that_writes_into_its_argument():
    def loss(w, x):
        h = np.zeros(3)
        for i in range(3):
            h[i] = np.tanh(w[i] @ x)
        w *= 0.5                      # numpy changes the caller's w; the gradient is w.r.t. w on entry
        return (h ** 2).sum() + (w ** 2).sum()

    w, x = rand(3, 2), rand(2)
    w0 = w.copy()
    g = jl.grad(loss)(w, x)
    np.testing.assert_allclose(w, w0 * 0.5)
    eps, fd = 1e-6, np.zeros_like(w0)
    for k in np.ndindex(w0.shape):
        plus, minus = w0.copy(), w0.copy()
        plus[k] += eps
        minus[k] -= eps
        fd[k] = (loss(plus, x) - loss(minus, x)) / (2 * eps)
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-6)


def nbody_step(pos, vel, mass, dt=0.01):
    n = pos.shape[0]
    acc = np.zeros_like(pos)
    for i in range(n):
        for j in range(n):
            if i != j:
                d = pos[j] - pos[i]
                acc[i] += mass[j] * d / (np.sqrt((d * d).sum()) ** 3 + 1e-3)
    vel += dt * acc
    pos += dt * vel


def lenet_layer(x, w, b):
    c_out, c_in, k, _ = w.shape
    h = x.shape[1] - k + 1
    out = np.empty((c_out, h, h), dtype=x.dtype)
    for o in range(c_out):
        for i in range(h):
            for j in range(h):
                out[o, i, j] = (x[:, i:i + k, j:j + k] * w[o]).sum() + b[o]
    pooled = np.zeros((c_out, h // 2, h // 2), dtype=x.dtype)
    for i in range(h // 2):
        for j in range(h // 2):
            pooled[:, i, j] = out[:, 2 * i:2 * i + 2, 2 * j:2 * j + 2].max(axis=(1, 2))
    return np.maximum(pooled, 0)


def test_nbody_and_lenet_written_with_loops():
    check(nbody_step, rand(3, 2), rand(3, 2), RNG.random(3))
    check(lenet_layer, rand(2, 5, 5), rand(2, 2, 2, 2), rand(2))


def test_threads_compiling_a_function_that_another_trace_calls_do_not_deadlock():
    import threading

    inner = jl.jit(lambda a: a + np.ones(2), level="O0")
    weights = np.ones(2)

    def outer(x):
        return x * inner(weights)         # compiles inner on arrays, inside outer's trace

    threads = [threading.Thread(target=jl.jit(outer, level="O0"), args=(rand(2),)) for _ in range(3)]
    threads += [threading.Thread(target=inner, args=(rand(2),)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)


def test_written_arguments_are_updated_in_place_where_the_plan_allows():
    def step(w, g):
        w -= 0.1 * g

    for level, mode in (("O0", "copy"), ("O1", "in place"), ("O2", "in place")):
        jitted = jl.jit(step, level=level)
        w, g = np.ones(8), np.arange(8.0)
        jitted(w, g)
        np.testing.assert_allclose(w, 1 - 0.1 * np.arange(8.0))
        (donation,) = jitted.last.report.donations
        assert (donation.output_name, donation.input_name, donation.mode) == ("w_new", "w", mode)


# -- np.ndarray(...) and Python's max/min on traced scalars ----------------------------------
def columns_by_ndarray(x):
    out = np.ndarray((x.shape[0], 2), dtype=x.dtype)
    assert isinstance(out, np.ndarray) == isinstance(x, np.ndarray)     # both numpy, or both traced
    out[:, 0] = x.sum(axis=1)
    out[:, 1] = x.max(axis=1)
    return out


def running_best(table):
    n = table.shape[0]
    for i in range(1, n):
        for j in range(n):
            table[i, j] = max(table[i, j], table[i - 1, j] + 1, min(table[i, j] * 2, 3))
    return max(t for t in table[0])


def test_np_ndarray_and_python_max_min_on_traced_scalars():
    check(columns_by_ndarray, rand(4, 3), levels=ALL_LEVELS)
    check(running_best, np.random.default_rng(0).integers(-3, 5, (4, 4)), levels=ALL_LEVELS)
    # Python's max keeps the first of values that do not compare greater: NaN first stays NaN
    pick = jl.jit(lambda a, b: (max(a[0], b[0]), max(b[0], a[0]), min(a[0], b[0])))
    got = pick(np.array([np.nan]), np.array([1.0]))
    want = (max(np.nan, 1.0), max(1.0, np.nan), min(np.nan, 1.0))
    np.testing.assert_array_equal(got, want)


def test_python_max_of_whole_arrays_is_refused_as_numpy_does():
    with pytest.raises(jl.TraceError, match=r"max\(\) of traced arrays of shape \(3,\).*np.maximum"):
        jl.jit(lambda a, b: max(a, b))(np.ones(3), np.zeros(3))


def test_a_module_s_own_max_is_left_alone_and_builtins_come_back():
    import tests.frontend._imperative_helpers as helpers

    assert "max" not in vars(helpers)
    jl.jit(helpers.rows_times)(np.ones((2, 3)), 2.0)
    assert "max" not in vars(helpers) and "min" not in globals()

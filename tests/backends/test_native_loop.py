"""Native loops on the numba CPU backend (backends/numba_cpu/native_loop.py): an scf.for whose body
compiles runs as one numba function at O1 and in O2's program; checked against plain numpy loops."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jitlab as jl
from jitlab.errors import OutOfBoundsError
from tests.budget import slow_o2

# a loop whose bounds and step are inputs: one compile serves every trip count and direction
STEPPED = """\
func @f(%lo: i64[], %hi: i64[], %step: i64[], %w: f64[6], %u: f64[3]) -> (f64[3]) {
  %1 = scf.for(%lo, %hi, %step, %u, %w) : f64[3] {
  ^bb(%2: i64[], %3: f64[3], %4: f64[6]):
    %5 = np.constant() {value = dense<f64[] 2.0>} : f64[]
    %6 = np.mul(%3, %5) : f64[3]
    %7 = np.dynamic_slice(%4, %2) {axes = [0], sizes = [1], index_axes = [0]} : f64[1]
    %8 = np.reshape(%7) {shape = []} : f64[]
    %9 = np.add(%6, %8) : f64[3]
    scf.yield(%9)
  }
  func.return(%1)
}
"""


def stepped_numpy(lo, hi, step, w, u):
    for i in range(lo, hi, step):
        u = u * 2 + w[i]
    return u


def native(exe) -> list[bool]:
    return [record.native for record in exe.report.loops]


def test_a_native_loop_counts_up_down_and_not_at_all_and_leaves_its_operands_alone():
    exe = jl.compile(jl.parse(STEPPED), level="O1")
    assert native(exe) == [True], exe.report.loops
    w, u = np.arange(6.0) + 0.5, np.array([1.0, -2.0, 3.0])
    kept = u.copy()
    for lo, hi, step in [(0, 6, 1), (5, -1, -1), (4, 4, 1), (5, 0, 1), (1, 6, 2), (-1, -7, -2)]:
        (got,) = exe(np.int64(lo), np.int64(hi), np.int64(step), w, u)
        np.testing.assert_allclose(got, stepped_numpy(lo, hi, step, w, u), err_msg=str((lo, hi, step)))
        assert not np.shares_memory(got, u)
    np.testing.assert_array_equal(u, kept)
    with pytest.raises(jl.InputError, match="step is 0"):
        exe(np.int64(0), np.int64(3), np.int64(0), w, u)


def test_an_index_out_of_range_inside_a_native_loop_is_numpys_error_naming_the_iteration():
    exe = jl.compile(jl.parse(STEPPED), level="O1")
    w, u = np.arange(6.0), np.zeros(3)
    with pytest.raises(IndexError, match=r"index 6 is out of bounds for axis 0 with size 6.*iteration 6 "):
        exe(np.int64(0), np.int64(9), np.int64(1), w, u)
    with pytest.raises(OutOfBoundsError, match=r"index -7 is out of bounds.*iteration 2 "):
        exe(np.int64(-5), np.int64(-9), np.int64(-1), w, u)


def heat(u, n):
    return jl.fori_loop(0, n, lambda i, u: u + 0.1 * (np.roll(u, 1) - 2 * u + np.roll(u, -1)), u)


def heat_numpy(u, n):
    for _ in range(n):
        u = u + 0.1 * (np.roll(u, 1) - 2 * u + np.roll(u, -1))
    return u


@pytest.mark.slow        # 17 s with a cold kernel cache; the O1 tests above are its fast twins
def test_o2_runs_the_stencil_as_a_native_loop_with_one_iterations_buffers():
    u = np.random.default_rng(0).random(64)
    exe = jl.compile(jl.trace(lambda u: heat(u, 50), u), level="O2")
    np.testing.assert_allclose(exe(u)[0], heat_numpy(u, 50), rtol=1e-12)
    (record,) = exe.report.loops
    assert record.native and exe.report.stats["native_loops"] == 1
    # the rolls' halves and sums share buffers within the iteration: fewer buffers than values
    assert len(record.buffers) < sum(len(b["values"]) for b in record.buffers)
    assert record.iteration_bytes == sum(b["bytes"] for b in record.buffers)
    assert record.carried_bytes == 2 * u.nbytes


def test_a_branch_in_a_body_runs_inside_the_native_loop_and_so_does_a_while_loop():
    def f(x):
        def body(i, c):
            return jl.cond(c.sum() > 4, lambda a: a * 0.5, lambda a: a + 1.0, c)
        y = jl.fori_loop(0, 6, body, x)
        return jl.while_loop(lambda c: c.max() < 10, lambda c: c * 3, y, max_iterations=20)

    def f_numpy(x):
        for _ in range(6):
            x = x * 0.5 if x.sum() > 4 else x + 1.0
        while x.max() < 10:
            x = x * 3
        return x

    x = np.array([0.5, 1.0, 0.25])
    exe = jl.compile(jl.trace(f, x), level="O1")
    np.testing.assert_allclose(exe(x)[0], f_numpy(x))
    records = {r.op: r for r in exe.report.loops}
    assert records["scf.for"].native, records["scf.for"].reason
    assert records["scf.while"].native, records["scf.while"].reason
    # negative values never reach 10: the bound ends the native loop, the host names the iteration
    with pytest.raises(jl.InputError, match=r"max_iterations=20 .*iteration 20 of the scf.while"):
        exe(-np.full(3, 10.0))


def test_each_side_of_a_branch_in_a_native_loop_keeps_the_values_the_body_reads_after_it():
    def f(x, w, n):
        def body(i, c):
            t = c * 2.0                         # read by both sides and after the branch
            picked = jl.cond(i % 3 == 0, lambda a, b: a[::-1] + b[i], lambda a, b: a * 0.5 - b[i + 1], t, w)
            return picked + t * 0.25
        return jl.fori_loop(0, n, body, x)

    def f_numpy(x, w, n):
        for i in range(n):
            t = x * 2.0
            picked = t[::-1] + w[i] if i % 3 == 0 else t * 0.5 - w[i + 1]
            x = picked + t * 0.25
        return x

    x, w = np.linspace(-1, 1, 5), np.linspace(0, 1, 8)
    for level in ("O1", "O2"):
        exe = jl.compile(jl.trace(f, x, w, np.int64(7)), level=level)
        assert native(exe) == [True], exe.report.loops
        for n in (0, 1, 7):
            np.testing.assert_allclose(exe(x, w, np.int64(n))[0], f_numpy(x, w, n))
        # w[i + 1] past the end at iteration 7, in the side taken then only
        with pytest.raises(OutOfBoundsError, match=r"iteration 7 of the scf.for"):
            exe(x, w, np.int64(8))


def _random_body(ops: list[int], scale: float):
    """A body of elementwise ops on the carry, a capture and the index, drawn by hypothesis."""
    def body(i, c):
        t = c
        for k in ops:
            t = (t * scale, t + i, np.maximum(t, -1.0), t - np.roll(c, 1), np.sin(t) + c)[k]
        return t * 0.5
    return body


@pytest.mark.slow
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(st.integers(0, 4), min_size=1, max_size=4), lo=st.integers(-3, 3), trips=st.integers(-1, 6),
       scale=st.floats(-2, 2), level=st.sampled_from(["O1", "O2"]))
def test_random_loops_agree_with_o0(ops, lo, trips, scale, level):
    x = np.linspace(-1, 1, 5)
    body = _random_body(ops, scale)
    program = jl.trace(lambda x, lo, hi: jl.fori_loop(lo, hi, body, x), x, np.int64(lo), np.int64(lo + trips))
    want = jl.compile(program, level="O0")(x, np.int64(lo), np.int64(lo + trips))[0]
    exe = jl.compile(program, level=level)
    assert native(exe) == [True], exe.report.loops
    np.testing.assert_allclose(exe(x, np.int64(lo), np.int64(lo + trips))[0], want, rtol=1e-9, atol=1e-12)


@pytest.mark.slow
def test_a_product_in_the_body_calls_blas_from_the_native_loop():
    def f(w, c):
        return jl.fori_loop(0, 5, lambda i, c: np.tanh(w @ c) + 0.5 * c, c)

    rng = np.random.default_rng(0)
    w, c = rng.standard_normal((8, 8)), rng.standard_normal((8, 3))
    exe = jl.compile(jl.trace(f, w, c), level="O1")
    assert native(exe) == [True], exe.report.loops
    want = c
    for _ in range(5):
        want = np.tanh(w @ want) + 0.5 * want
    np.testing.assert_allclose(exe(w, c)[0], want, rtol=1e-12)


def nested(x, w, stride):
    return jl.fori_loop(0, 3, lambda i, c: jl.fori_loop(
        0, 4, lambda j, d: d * 0.5 + np.roll(d, 1) + w[i + stride * j], c) + 1.0, x)


def nested_numpy(x, w, stride):
    for i in range(3):
        for j in range(4):
            x = x * 0.5 + np.roll(x, 1) + w[i + stride * j]
        x = x + 1.0
    return x


def test_nested_loops_run_as_one_native_loop():
    x, w = np.arange(5.0), np.linspace(0.0, 1.0, 6)
    exe = jl.compile(jl.trace(lambda x, w: nested(x, w, 1), x, w), level="O1")
    np.testing.assert_allclose(exe(x, w)[0], nested_numpy(x, w, 1))
    # the outer loop's function calls the inner loop's, written beside it: no iteration goes back to Python
    assert native(exe) == [True], exe.report.loops


@pytest.mark.slow        # a second nested compile; the single loop's error test above is its fast twin
def test_an_index_out_of_range_in_an_inner_native_loop_is_numpys_error_naming_the_iteration():
    x, w = np.arange(5.0), np.linspace(0.0, 1.0, 6)
    with pytest.raises(IndexError, match="index 6 is out of bounds for axis 0 with size 6"):
        nested_numpy(x, w, 2)
    bad = jl.compile(jl.trace(lambda x, w: nested(x, w, 2), x, w), level="O1")
    with pytest.raises(IndexError, match=r"index 6 is out of bounds for axis 0 with size 6.*iteration 3 "):
        bad(x, w)


@pytest.mark.parametrize("level", slow_o2("O1", "O2"))     # O2's native loops: the tests above
def test_windows_read_and_written_by_index_rolls_and_branches_agree_with_numpy(level):
    # every copy a native loop writes element by element: a window read and one written back at an
    # offset (2-d, both axes), a concatenate (np.roll), a whole carry, and a branch's yield
    def f(a, b):
        n = a.shape[0]
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                a[i, j] = 0.25 * (a[i - 1, j] + a[i + 1, j] + a[i, j - 1] + a[i, j + 1])
            a[i, 1:n - 1] = np.roll(a[i, 1:n - 1], 1)
            if a[i, 1] > b[i]:
                b = b * 0.5
            else:
                b = b + a[i, :]
        return a, b

    a, b = np.random.default_rng(3).random((6, 6)), np.linspace(0.0, 1.0, 6)
    want = f(a.copy(), b.copy())
    jitted = jl.jit(f, level=level)
    got_a, got_b = jitted(a.copy(), b.copy())
    assert all(native(jitted.last)), jitted.last.report.loops
    np.testing.assert_allclose(got_a, want[0], rtol=1e-12)
    np.testing.assert_allclose(got_b, want[1], rtol=1e-12)


def test_solve_and_inv_in_a_body_run_natively_and_a_singular_matrix_is_numpys_error_naming_the_iteration():
    def f(a, b):
        x = b
        for i in range(4):
            m = a - i * np.eye(3)
            x = np.linalg.solve(m, x) + np.linalg.inv(m) @ b
        return x

    rng = np.random.default_rng(5)
    b = rng.random((3, 2))
    fine, singular = np.diag([10.0, 11.0, 12.0]) + 0.1 * rng.random((3, 3)), np.diag([1.0, 5.0, 7.0])
    for level in ("O1", "O2"):
        jitted = jl.jit(f, level=level)
        np.testing.assert_allclose(jitted(fine, b), f(fine, b), rtol=1e-10)
        assert all(native(jitted.last)), jitted.last.report.loops
        with pytest.raises(np.linalg.LinAlgError) as raised:        # a - 1 * eye is singular
            jitted(singular, b)
        assert isinstance(raised.value, jl.InputError) and "iteration 1" in str(raised.value), str(raised.value)

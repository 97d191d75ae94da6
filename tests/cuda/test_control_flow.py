"""scf.for / scf.while / scf.if on the cuda executor and its device-checked dynamic index kernels, against
plain numpy (jl.fori_loop and friends run eagerly outside a trace) and O0, under the simulator on tiny shapes."""

import numpy as np
import pytest
from hypothesis import given, settings
from numba import cuda

import jitlab as jl
from jitlab.backends.numba_cuda.barriers import violations
from jitlab.backends.numba_cuda.dynamic import INDUCTION_SOURCE, kernel_source
from jitlab.backends.numba_cuda.executor import DeviceExecutor
from jitlab.errors import InputError, OutOfBoundsError
from tests.loop_programs import loop_programs
from tests.programs import assert_same
from tests.runtime.test_control_flow_levels import stencil_loops


def heat(u, n):
    return jl.fori_loop(0, n, lambda i, u: u + 0.25 * (np.roll(u, 1) - 2 * u + np.roll(u, -1)), u)


def compiled(fn, *args, level="O1", **options):
    return jl.compile(jl.trace(fn, *args), level=level, target="cuda", progress=False, **options)


def agrees(exe, fn, *args):
    """exe(*args) equals fn(*args) run eagerly on numpy (dtypes included)."""
    expected = fn(*args)
    expected = expected if isinstance(expected, tuple) else (expected,)
    got = exe(*args)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
        assert np.asarray(g).dtype == np.asarray(e).dtype


def per_call(exe, *args) -> dict:
    runner = exe._runner
    assert isinstance(runner, DeviceExecutor)
    before = dict(runner.stats)
    exe(*args)
    return {k: v - before.get(k, 0) for k, v in runner.stats.items() if v != before.get(k, 0)}


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_heat_stencil_loop_queues_its_body_without_a_sync_per_iteration(level):
    u = np.sin(np.linspace(0, 3, 8)).astype(np.float32)
    exe = compiled(heat, u, np.int64(3), level=level)
    agrees(exe, heat, u, np.int64(5))
    agrees(exe, heat, u, np.int64(0))           # zero trips: the initial value, in a buffer of its own
    counts = per_call(exe, u, np.int64(6))
    # the traced bound read back once, the call's own sync: nothing per iteration
    # (np.roll's concatenates are device copies: no host op between a sync and two transfers either)
    assert counts["syncs"] == 2 and counts["loop_iterations"] == 6 and "host_ops" not in counts
    assert counts["downloads"] == 2 and counts["uploads"] == 2      # u and n; the induction values made on the device
    assert exe.report.stats["device_host_ops"] == 0
    assert not exe.report.cuda_graphs.replay and "scf.for" in exe.report.cuda_graphs.reason


def test_carries_swapped_or_passed_through_never_overwrite_what_the_iteration_reads():
    def f(a, b, c):
        # a, b swap every iteration; c passes through; the sums read both swapped values
        return jl.fori_loop(0, 5, lambda i, t: (t[1] + 1.0, t[0] * 2.0, t[2]), (a, b, c))

    args = [np.arange(3, dtype=np.float32), np.ones(3, np.float32), np.full(3, 7.0, np.float32)]
    exe = compiled(f, *args)
    agrees(exe, f, *args)
    results = exe(*args)
    assert results[2] is not args[2]


def test_results_kept_on_the_device_are_not_overwritten_by_the_next_call():
    u = np.linspace(0, 1, 8).astype(np.float32)
    exe = compiled(heat, u, np.int64(2), device_outputs=True)
    (first,) = exe(u, np.int64(2))
    kept = first.copy_to_host()
    exe(u * 3, np.int64(4))
    np.testing.assert_array_equal(first.copy_to_host(), kept)
    np.testing.assert_allclose(kept, heat(u, 2), rtol=1e-5)


def test_while_loop_reads_its_condition_once_per_iteration_and_honours_max_iterations():
    def f(x):
        return jl.while_loop(lambda c: c[0] + c[1] < 20, lambda c: c + 1, x, max_iterations=6)

    exe = compiled(f, np.zeros(2))
    agrees(exe, f, np.full(2, 5.0))            # 5 bodies, 6 conditions
    counts = per_call(exe, np.full(2, 5.0))
    assert counts["syncs"] == 6 + 1 and counts["loop_iterations"] == 6
    agrees(exe, f, np.full(2, 30.0))           # the condition false on entry: zero trips
    with pytest.raises(InputError, match="max_iterations=6"):
        exe(np.zeros(2))


def test_cond_takes_either_branch_including_one_that_yields_its_input():
    def f(x, y):
        return jl.cond(x.sum() > 0, lambda a, b: (a * b, a), lambda a, b: (a - b, b), x, y)

    x = np.linspace(-1, 2, 5).astype(np.float32)
    exe = compiled(f, x, x)
    agrees(exe, f, x, x + 1)
    agrees(exe, f, -x - 5, x + 1)


def test_scan_reads_and_writes_its_rows_with_dynamic_index_kernels():
    def f(c0, xs):
        return jl.scan(lambda c, x: (c * 0.5 + x, c.sum()), c0, xs)

    args = np.zeros(3, np.float32), np.arange(12, dtype=np.float32).reshape(4, 3)
    exe = compiled(f, *args)
    expected = f(*args)
    got = exe(*args)
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-6)
    np.testing.assert_allclose(got[1], expected[1], rtol=1e-6)


def test_nested_loops_with_a_branch_in_the_body():
    def f(x):
        def outer(i, c):
            c = jl.fori_loop(0, i, lambda j, d: d * 1.5, c)
            return jl.cond(i % 2 == 0, lambda v: v + 1.0, lambda v: v, c)
        return jl.fori_loop(0, 3, outer, x)

    exe = compiled(f, np.ones(2))
    agrees(exe, f, np.array([1.0, -2.0]))


def test_a_nested_loop_with_constant_bounds_syncs_once_per_call_and_names_both_iterations():
    def g(x, n):
        return jl.fori_loop(0, 3, lambda i, c: jl.fori_loop(0, 4, lambda j, d: d * 1.5 + x[j + n], c), x)

    x = np.arange(4, dtype=np.float32)
    program = jl.trace(g, x, np.int64(0))
    exe = jl.compile(program, level="O1", target="cuda", progress=False)
    agrees(exe, g, x, np.int64(0))
    counts = per_call(exe, x, np.int64(0))
    assert counts["syncs"] == 1 and counts["loop_iterations"] == 3 + 3 * 4
    with pytest.raises(OutOfBoundsError) as o0:
        jl.compile(program, level="O0")(x, np.int64(1))
    with pytest.raises(OutOfBoundsError) as device:
        exe(x, np.int64(1))
    assert str(device.value) == str(o0.value) and "(iteration 3 of the scf.for" in str(o0.value)


def test_an_offset_out_of_range_in_a_loop_is_o0s_error_naming_the_iteration():
    def f(x, n):
        return jl.fori_loop(0, n, lambda i, c: c + x[i + 2], np.zeros((), np.float32))

    x = np.arange(5, dtype=np.float32)
    program = jl.trace(f, x, np.int64(2))
    exe = jl.compile(program, level="O1", target="cuda", progress=False)
    agrees(exe, f, x, np.int64(3))
    with pytest.raises(OutOfBoundsError) as o0:
        jl.compile(program, level="O0")(x, np.int64(5))
    with pytest.raises(OutOfBoundsError) as device:
        exe(x, np.int64(5))
    assert str(device.value) == str(o0.value)
    assert "iteration 3 of the scf.for" in str(device.value)
    agrees(exe, f, x, np.int64(3))             # the record was cleared: the next call runs


@pytest.mark.parametrize("start", [-5, -3, -1, 0, 2, 3, 4, 6])
def test_dynamic_slice_and_update_kernels_follow_numpy_rules(start):
    def take(a, s):
        return a[s:s + 2]

    def put(a, v, s):
        a = a.copy()
        a[:, s] = v
        return a

    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    for fn, args in ((take, (a[0], np.int64(start))), (put, (a, np.ones(3, np.float32), np.int64(start)))):
        program = jl.trace(fn, *[args[0], *args[1:-1], np.int64(0)])
        assert {"np.dynamic_slice", "np.dynamic_update_slice"} & set(program.op_counts())
        exe = jl.compile(program, level="O1", target="cuda", progress=False)
        try:
            expected = jl.compile(program, level="O0")(*args)
        except OutOfBoundsError as e:
            with pytest.raises(OutOfBoundsError) as device:
                exe(*args)
            assert str(device.value) == str(e)
        else:
            np.testing.assert_array_equal(exe(*args)[0], expected[0])


def test_dynamic_kernel_source_has_no_unguarded_access_and_passes_the_barrier_check():
    for source in (kernel_source(True, 2, [0, 1], [1, 2], [0]), kernel_source(False, 3, [2], [2], [])):
        assert "cuda.atomic.cas(fault" in source and violations(source) == []
        assert source.index("return") < source.index("for j in range(cuda.grid(1), total, cuda.gridsize(1))")
    assert violations(INDUCTION_SOURCE) == []


def test_device_inputs_drive_the_loop():
    u = np.linspace(0, 1, 8).astype(np.float32)
    exe = compiled(heat, u, np.int64(2))
    (got,) = exe(cuda.to_device(u), cuda.to_device(np.asarray(3, np.int64)))
    np.testing.assert_allclose(got, heat(u, 3), rtol=1e-5)


@pytest.mark.slow
@settings(max_examples=15, deadline=None)
@given(loop_programs(max_ops=5))
def test_random_loop_programs_on_cuda(case):
    # the fixed tests above are its fast twins (each loop kind, carries, branches, zero trips)
    for level in ("O1", "O2"):
        exe = jl.compile(case.program, level=level, target="cuda", progress=False)
        assert_same(exe(*case.inputs), case.expected, rtol=2e-5, atol=1e-5)


@pytest.mark.slow
@settings(max_examples=8, deadline=None)
@given(stencil_loops())
def test_random_loops_with_dynamic_indices_and_branches_on_cuda(case):
    fn, a, b = case
    expected = fn(a.copy(), b)        # outside a trace jl.fori_loop and jl.cond run on numpy
    exe = jl.compile(jl.trace(fn, a, b), level="O1", target="cuda", progress=False)
    assert_same(exe(a.copy(), b), list(expected), rtol=1e-9, atol=1e-12)


def test_a_body_op_without_a_kernel_is_reported_in_the_programs_warnings():
    def f(x):
        return jl.fori_loop(0, 3, lambda i, c: np.cumsum(c) * 0.5, x)

    x = np.arange(4, dtype=np.float32)
    exe = compiled(f, x)
    agrees(exe, f, x)
    assert exe.report.stats["device_host_ops"] == 1
    assert any("scf.for" in w and "np.cumsum on the host" in w for w in exe.report.warnings)


@pytest.mark.slow
def test_loops_over_slices_whose_extent_follows_the_index_run_on_the_device():
    """Masked windows (frontend/windows.py) in a captured loop: where, concatenate, dynamic slices."""
    from tests.frontend import capture_kernels as k

    rng = np.random.default_rng(2)
    lower, b, r = np.tril(rng.random((4, 4))) + 4 * np.eye(4), rng.random(4), rng.random(5) * 0.3
    x = np.zeros(4)
    exe = compiled(k.trisolv, lower, x.copy(), b)
    expected = x.copy()
    k.trisolv(lower, expected, b)
    np.testing.assert_allclose(np.asarray(exe(lower, x.copy(), b)[0]), expected, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(compiled(k.durbin, r)(r)[0]), k.durbin(r.copy()), rtol=1e-12)

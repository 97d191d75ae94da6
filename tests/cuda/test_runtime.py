"""The CUDA executor: levels, data mapping, weights, streams, host fallbacks, memory budget."""

import numpy as np
import pytest
from numba import cuda

import jitlab as jl
from jitlab.backends.numba_cuda.executor import DeviceExecutor
from tests.cuda.helpers import check, on_cuda, rand
from tests.programs import assert_same


def mlp(x, w1, b1, w2, b2):
    return np.maximum(x @ w1 + b1, 0) @ w2 + b2


def mlp_args():
    return rand(4, 6), rand(6, 8), rand(8), rand(8, 3), rand(3)


def stats(exe) -> dict:
    runner = exe._runner
    assert isinstance(runner, DeviceExecutor)
    return dict(runner.stats)


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_levels_run_on_the_device_with_one_sync_per_call(level):
    exe = check(mlp, *mlp_args(), level=level, rtol=1e-4, atol=1e-5)
    before = stats(exe)
    exe(*mlp_args())
    after = stats(exe)
    per_call = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    assert per_call == {"uploads": 5, "launches": len(exe.report.kernels), "syncs": 1, "downloads": 1}
    assert exe.report.stats["device_host_ops"] == 0


def test_numpy_inputs_are_uploaded_once_and_device_arrays_taken_in_place():
    x, w1, b1, w2, b2 = mlp_args()
    exe = check(mlp, x, w1, b1, w2, b2, rtol=1e-4, atol=1e-5)
    on_device = [cuda.to_device(a) for a in (x, w1, b1, w2, b2)]
    uploads = stats(exe).get("uploads", 0)
    got = exe(*on_device)
    assert stats(exe)["uploads"] == uploads
    assert_same(got, jl.compile(jl.trace(mlp, x, w1, b1, w2, b2), level="O0")(x, w1, b1, w2, b2), 1e-4, 1e-5)


def test_jitted_function_takes_device_arrays_and_can_return_them():
    f = jl.jit(target="cuda", device_outputs=True, progress=False)(lambda x, y: np.tanh(x) * y)
    x, y = rand(5, 3), rand(5, 3)
    out = f(cuda.to_device(x), cuda.to_device(y))
    assert hasattr(out, "copy_to_host") and out.shape == (5, 3)
    np.testing.assert_allclose(out.copy_to_host(), np.tanh(x) * y, rtol=1e-6)
    again = f(out, cuda.to_device(y))          # a device result feeds the next call without a copy
    np.testing.assert_allclose(again.copy_to_host(), np.tanh(np.tanh(x) * y) * y, rtol=1e-5)


def test_device_array_calls_skip_the_general_check_once_checked_and_bad_ones_still_get_it(monkeypatch):
    from jitlab.runtime import executable as executable_module

    exe = jl.compile(jl.trace(lambda x: x * 2.0, np.ones(3, np.float32)), target="cuda", device_outputs=True,
                     progress=False)
    f = jl.jit(target="cuda", device_outputs=True, progress=False)(lambda x: x * 2.0)
    d = cuda.to_device(np.arange(3, dtype=np.float32))
    exe(d), f(d)
    general = executable_module.check_inputs
    checked = []
    monkeypatch.setattr(executable_module, "check_inputs", lambda *a: checked.append(a) or general(*a))
    np.testing.assert_array_equal(exe(d)[0].copy_to_host(), [0, 2, 4])
    np.testing.assert_array_equal(f(d).copy_to_host(), [0, 2, 4])
    assert checked == []
    with pytest.raises(jl.InputError, match="input 'x': dim 0"):
        exe(cuda.to_device(np.ones(4, np.float32)))
    with pytest.raises(jl.InputError, match="must have dtype f32, got f64"):
        exe(cuda.to_device(np.ones(3, np.float64)))
    assert len(checked) == 2
    np.testing.assert_array_equal(f(np.arange(3, dtype=np.float32)).copy_to_host(), [0, 2, 4])   # keyed apart


def test_results_held_by_the_caller_are_not_overwritten():
    f = jl.jit(target="cuda", device_outputs=True, progress=False)(lambda x: x * 2.0)
    first = f(np.ones(4, np.float32))
    second = f(np.full(4, 3.0, np.float32))
    np.testing.assert_array_equal(first.copy_to_host(), 2.0)
    np.testing.assert_array_equal(second.copy_to_host(), 6.0)


def test_weights_and_constants_stay_on_the_device_across_calls():
    text = ("func @f(%x: f32[2,3]) -> (f32[2,4]) {\n"
            "  %w = np.weight() {name = \"w\"} : f32[3,4]\n"
            "  %y = np.matmul(%x, %w) : f32[2,4]\n"
            "  func.return(%y)\n}")
    w = rand(3, 4)
    program = jl.parse(text, weights={"w": w})
    x = rand(2, 3)
    exe = on_cuda(program, [x], rtol=1e-4, atol=1e-5)
    for _ in range(2):
        before = stats(exe).get("uploads", 0)
        np.testing.assert_allclose(exe(x)[0], x @ w, rtol=1e-4, atol=1e-5)
        assert stats(exe)["uploads"] - before == 1          # x only: w is resident


def test_an_op_without_a_kernel_runs_on_the_host_and_is_counted():
    exe = check(lambda x: np.cumsum(np.exp(x), axis=1) * 2.0, rand(3, 4))
    assert exe.report.stats["device_host_ops"] == 1
    assert any("np.cumsum" in w for w in exe.report.warnings)
    assert stats(exe)["host_ops"] >= 1


def test_memory_limit_fails_at_compile_time_naming_the_largest_tensors():
    program = jl.trace(mlp, *mlp_args())
    with pytest.raises(jl.OutOfMemoryError, match="largest tensors") as e:
        jl.compile(program, level="O1", target="cuda", memory_limit=256, progress=False)
    assert "memory_limit=256 B" in str(e.value)
    jl.compile(program, level="O1", target="cuda", memory_limit="1MiB", progress=False)


def test_memory_limit_with_symbolic_shapes_fails_at_call_time():
    f = jl.jit(target="cuda", dynamic={"x": {0: "B"}}, memory_limit="4KiB", progress=False)(lambda x: np.exp(x) + 1)
    np.testing.assert_allclose(f(np.zeros((4, 8), np.float32)), 2.0)
    with pytest.raises(jl.OutOfMemoryError, match="needs"):
        f(np.zeros((400, 8), np.float32))


def test_bad_memory_limit_is_a_clear_error():
    with pytest.raises(jl.JitlabError, match="cannot read memory_limit"):
        jl.compile(jl.trace(np.exp, rand(3)), target="cuda", memory_limit="lots", progress=False)


def test_symbolic_shapes_bind_at_call_time():
    f = jl.jit(target="cuda", dynamic={"x": {0: "B"}}, progress=False)(
        lambda x: np.exp(x - x.max(axis=1, keepdims=True)))
    for rows in (1, 3, 5):
        x = rand(rows, 6)
        np.testing.assert_allclose(f(x), np.exp(x - x.max(axis=1, keepdims=True)), rtol=1e-6)


def test_target_auto_picks_cuda_under_the_simulator():
    f = jl.jit(lambda x: x + 1, progress=False)
    f(np.ones(3, np.float32))
    assert f.last.target == "cuda"
    assert jl.compile(jl.trace(np.exp, rand(2)), level="O0").target == "cuda"


def test_non_contiguous_device_input_is_refused_clearly():
    exe = jl.compile(jl.trace(lambda x: x * 2, rand(4, 4)), target="cuda", progress=False)
    strided = cuda.to_device(rand(4, 8))[:, ::2]
    with pytest.raises(jl.InputError, match="C-contiguous"):
        exe(strided)


def test_o0_on_the_cuda_target_downloads_device_inputs():
    exe = jl.compile(jl.trace(lambda x: x * 2, rand(4)), level="O0", target="cuda")
    x = rand(4)
    np.testing.assert_array_equal(exe(cuda.to_device(x))[0], x * 2)


def test_o2_runs_one_generated_launch_sequence():
    exe = check(mlp, *mlp_args(), level="O2", rtol=1e-4, atol=1e-5)
    sequence = exe.report.launch_sequence
    assert sequence.startswith("def launch(v_x, v_w1, v_b1, v_w2, v_b2, bindings):")
    assert sequence.count("    group_") == len(exe.report.kernels)
    assert "host(" not in sequence and "synchronize" not in sequence and "copy_to" not in sequence
    assert jl.compile(jl.trace(mlp, *mlp_args()), level="O1", target="cuda", progress=False).report.launch_sequence == ""


def test_o2_with_a_host_op_shows_it_in_the_sequence():
    exe = check(lambda x: np.cumsum(np.exp(x), axis=1) * 2.0, rand(3, 4), level="O2")
    assert "np.cumsum on the host" in exe.report.launch_sequence


def test_static_plan_arena_places_buffers_at_their_offsets():
    from jitlab.backends.numba_cuda.memory import Arena
    from jitlab.report import BufferRecord, MemoryPlan

    plan = MemoryPlan(peak_bytes=256, lower_bound_bytes=256, naive_bytes=512,
                      buffers=[BufferRecord(name="a", bytes=128, offset=0, first=0, last=1, producer=None),
                               BufferRecord(name="b", bytes=128, offset=128, first=1, last=2, producer=None)])
    arena = Arena(cuda, plan, {0: "a", 1: "b", 2: "c"})
    a = arena.get(0, (4, 8), np.float32, 0)
    b = arena.get(1, (16,), np.float64, 0)
    assert arena.covers(1) and not arena.covers(2)
    a.copy_to_device(np.ones((4, 8), np.float32))
    b.copy_to_device(np.full(16, 2.0))
    raw = arena.base.copy_to_host()
    assert (raw[:128].view(np.float32) == 1).all() and (raw[128:].view(np.float64) == 2).all()


def test_program_with_a_static_memory_plan_runs_in_the_arena():
    from jitlab.report import BufferRecord, MemoryPlan

    program = jl.trace(lambda x: np.exp(x) * 2.0 + x, rand(4, 8))
    exe = jl.compile(program, level="O2", target="cuda", progress=False)
    plan = MemoryPlan(peak_bytes=4096, lower_bound_bytes=128, naive_bytes=128,
                      buffers=[BufferRecord(name=v.name, bytes=128, offset=1024, first=0, last=1, producer=None)
                               for v in exe.program.outputs])
    exe.report.memory = plan
    runner = DeviceExecutor(exe.program, {op.uid: k for op, k in _kernels(exe)}, exe.report, {})
    got = runner([rand(4, 8)], {})
    x = rand(4, 8)
    # Judged in units of float32 rounding against float64: exp, the product and the sum each round
    # (the device's expf within 2 ulps), so the error is bounded by a few eps times the terms' sizes,
    # not by the result's, which the sum can cancel (0.022 from terms near 1: 2.7e-6 relative on a GPU).
    x64 = x.astype(np.float64)
    terms = 2.0 * np.exp(x64) + np.abs(x64)
    error = np.abs(runner([x], {})[0] - (np.exp(x64) * 2.0 + x64))
    assert (error <= 4 * np.finfo(np.float32).eps * terms).all(), (error / terms).max()
    assert len(runner.streams) == 1 and got[0].shape == (4, 8)


def _kernels(exe):
    steps = exe._runner.steps
    return [(s.op, s.kernel) for s in steps if s.kernel is not None]


def test_views_of_results_held_by_the_caller_are_not_overwritten():
    f = jl.jit(target="cuda", device_outputs=True, progress=False)(lambda x: (np.exp(x) * 2.0).reshape(8))
    first = f(np.zeros((2, 4), np.float32))
    second = f(np.ones((2, 4), np.float32))
    np.testing.assert_allclose(first.copy_to_host(), 2.0)
    np.testing.assert_allclose(second.copy_to_host(), 2.0 * np.e, rtol=1e-6)


def test_buffers_nobody_holds_are_reused_across_calls():
    exe = check(mlp, *mlp_args(), rtol=1e-4, atol=1e-5)
    allocator = exe._runner.allocator
    made = allocator.allocations
    for _ in range(2):
        exe(*mlp_args())
    assert allocator.allocations == made



def test_device_results_share_no_memory_with_inputs_or_each_other():
    f = jl.jit(target="cuda", device_outputs=True, progress=False)(lambda x: (x, x * 1.0, np.negative(-x)))
    x = cuda.to_device(np.arange(4, dtype=np.float32))
    results = f(x)
    arrays = [x, *results]
    assert not any(_share(a, b) for i, a in enumerate(arrays) for b in arrays[i + 1:])
    for r in results:
        np.testing.assert_array_equal(r.copy_to_host(), np.arange(4, dtype=np.float32))


def _share(a, b) -> bool:
    """Device arrays over common memory (the simulator keeps theirs in numpy arrays)."""
    if not hasattr(a, "__cuda_array_interface__"):
        return np.may_share_memory(a._ary, b._ary)
    (pa, _), (pb, _) = a.__cuda_array_interface__["data"], b.__cuda_array_interface__["data"]
    return pa < pb + b.nbytes and pb < pa + a.nbytes

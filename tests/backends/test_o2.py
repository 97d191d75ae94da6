"""O2: whole programs as compiled segments over one arena, equal to O0."""

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings

import jitlab as jl
from jitlab.backends.numba_cpu import whole_graph
from jitlab.backends.numba_cpu.whole_graph import Segment
from jitlab.bench import models
from tests.budget import compiled_examples
from tests.programs import assert_same, programs

rng = np.random.default_rng(3)


pytestmark = pytest.mark.usefixtures("private_cache")


def check(program, inputs, rtol=2e-5, atol=1e-5):
    expected = jl.compile(program, level="O0")(*inputs)
    exe = jl.compile(program, level="O2")
    assert_same(exe(*inputs), expected, rtol=rtol, atol=atol)
    assert_same(exe(*inputs), expected, rtol=rtol, atol=atol)        # the arena is reused safely
    return exe


@settings(max_examples=compiled_examples(8))
@given(programs(max_ops=8, special_values=True))
def test_random_programs_match_o0(case):
    check(case.program, case.inputs)


@settings(max_examples=compiled_examples(6))
@given(programs(max_ops=8, special_values=True))
def test_random_programs_match_o0_with_every_group_calling_its_own_kernel(case):
    """Every group heavy: the kernels read and write the arena where the plan put their values."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(whole_graph, "HEAVY_ELEMENTS", 0)
        mp.setattr(whole_graph, "HEAVY_MACS", 0)
        exe = check(case.program, case.inputs)
    static = [op for op in exe.program.body.ops if op.name == "jit.group" and all(r.type.is_static for r in op.results)]
    assert exe.report.stats.get("o2_kernel_calls", 0) == len(static)


def test_heavy_groups_call_their_shared_kernels_between_segments():
    w1 = rng.standard_normal((512, 512)).astype(np.float32) * 0.05
    w2 = rng.standard_normal((512, 512)).astype(np.float32) * 0.05

    def fn(x, y):
        h = np.maximum(x @ w1 + 1.0, 0.0)          # 67M multiply-adds: its own kernel
        g = np.maximum(h @ w2 + 1.0, 0.0)          # the same structure at the same sizes: the same kernel
        small = np.tanh(y) * 2.0                   # 12 elements: stays in a segment
        return g, small, small.sum() + y

    x = rng.standard_normal((256, 512)).astype(np.float32)
    y = rng.standard_normal((3, 4)).astype(np.float32)
    exe = check(jl.trace(fn, x, y), [x, y], rtol=1e-4, atol=1e-4)
    assert exe.report.stats["o2_kernel_calls"] >= 2 and exe.report.stats["o2_segments"] >= 1
    calls = [r for r in exe.report.kernels if r.group is not None]
    assert calls and all("O2 calls it from Python" in r.choice for r in calls)
    assert len({r.code for r in calls}) < exe.report.stats["o2_kernel_calls"]     # one compile served both
    out = exe(x, y)
    assert not any(np.shares_memory(a, b) for i, a in enumerate(out) for b in out[i + 1:])
    assert not any(np.shares_memory(a, b) for a in out for b in (x, y, w1, w2))


def test_kernel_calls_share_kernels_as_o1_does_read_only_operands_apart(monkeypatch):
    """Groups with one key, one reading a weight (read-only) and one reading inputs, need two kernels."""
    monkeypatch.setattr(whole_graph, "HEAVY_ELEMENTS", 0)
    w = rng.standard_normal((64, 64)).astype(np.float32)
    args = [rng.standard_normal((64, 64)).astype(np.float32) for _ in range(3)]

    def fn(x, y, z):
        return np.tanh(y * z) + 1.0, np.tanh(x * w) + 1.0

    exe = check(jl.trace(fn, *args), args)
    keys = {op.attrs["key"] for op in exe.program.body.ops if op.name == "jit.group"}
    calls = [r for r in exe.report.kernels if r.group is not None]
    assert len(keys) == 1 and len(calls) == 2 and exe.report.stats["o2_kernel_calls"] == 2


@pytest.mark.parametrize("name", ["chain", "tanh_gelu", "softmax", "layernorm", "mlp", "tiny_chain"])
def test_bench_programs_are_one_compiled_call(name):
    fn, args = models.build(name, quick=True)
    exe = check(jl.trace(fn, *args), args, rtol=1e-4, atol=1e-4)
    assert exe.report.stats["o2_segments"] == 1 and exe.report.stats["o2_fallbacks"] == 0
    assert exe.report.memory.mode == "static"


def test_fallbacks_are_reported_and_values_cross_the_arena():
    def fn(x):
        a = np.tanh(x) * 2.0
        b = np.cumsum(a, axis=1)           # no compiled kernel: runs between segments
        return np.exp(b - a).sum(axis=1), a.reshape(-1)

    x = rng.standard_normal((6, 5)).astype(np.float32)
    exe = check(jl.trace(fn, x), [x])
    assert exe.report.stats["o2_fallbacks"] == 1 and exe.report.stats["o2_segments"] == 2
    assert any("np.cumsum" in w and "falls back to numpy" in w for w in exe.report.warnings)


def test_symbolic_shapes_replan_per_binding():
    w = rng.standard_normal((8, 4)).astype(np.float32)
    fn = lambda x: np.tanh(x @ w).sum(axis=1) + x.max(axis=1)  # noqa: E731
    exe = jl.compile(jl.trace(fn, jl.spec(("B", 8))), level="O2")
    for b in (3, 1, 17, 0, 3):
        x = rng.standard_normal((b, 8)).astype(np.float32) if b else np.zeros((0, 8), np.float32)
        if b == 0:
            assert exe(x)[0].shape == (0,)
            continue
        np.testing.assert_allclose(exe(x)[0], fn(x), rtol=1e-5, atol=1e-5)
    assert exe.report.stats["o2_segments"] == 1


def test_contractions_inside_segments():
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    w = rng.standard_normal((8, 4)).astype(np.float32)
    b = rng.standard_normal((2, 8, 5)).astype(np.float32)
    check(jl.trace(lambda x, w: np.maximum(x @ w + 1.0, 0), x, w), [x, w], rtol=1e-4)
    check(jl.trace(lambda x, b: np.tanh(x @ b), x, b), [x, b], rtol=1e-4)
    # an epilogue with several outputs: the kernel's parameters order matters
    check(jl.trace(lambda x, w: (np.tanh(x @ w), (x @ w) > 0.5, (x @ w) * 2.0), x, w), [x, w], rtol=1e-4)
    program = jl.parse("""func @conv(%x: f32[1,3,7,7], %k: f32[4,3,3,3]) -> (f32[1,4,4,4]) {
  %0 = np.conv2d(%x, %k) {strides = [2, 2], pads = [1, 1, 1, 1]} : f32[1,4,4,4]
  %1 = np.relu(%0) : f32[1,4,4,4]
  func.return(%1)
}
""")
    img, k = rng.standard_normal((1, 3, 7, 7)).astype(np.float32), rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    check(program, [img, k], rtol=1e-4)


def test_matrix_vector_products_are_gemms_inside_segments():
    a, v, b = (rng.standard_normal(s).astype(np.float32) for s in ((3, 4), (4,), (4, 5)))
    program = jl.trace(lambda a, v, b: (np.tanh(a @ v) + 1.0, v @ b, a.T @ (a @ v)), a, v, b)
    exe = check(program, [a, v, b], rtol=1e-4)
    assert exe.report.stats["o2_fallbacks"] == 0


@pytest.mark.slow       # a 50-layer graph at O2: minutes of numba on CI's 2 cores
def test_resnet_shaped_graph_at_o2():
    fn, args = models.resnet50(width=4, size=32)
    exe = check(jl.trace(fn, *args), list(args), rtol=1e-3, atol=1e-3)
    assert exe.report.stats["o2_fallbacks"] <= 2, exe.report.warnings


def test_outputs_the_user_holds_survive_later_calls():
    f = jl.jit(lambda x: (np.exp(x) + 1.0, x * 2.0), level="O2")
    a, b = f(np.zeros(4, np.float32))
    f(np.ones(4, np.float32))
    assert a.tolist() == [2.0] * 4 and b.tolist() == [0.0] * 4


def test_an_output_a_fallback_computes_can_host_earlier_temporaries():
    # The planner may lend an output's bytes to values that die before it is written; when a
    # numpy fallback writes that output, the runner must still allocate it for the lodgers.
    def fn(x):
        a = np.exp(x[:, :2] * 2.0) + 1.0
        return np.cumsum(x + np.tanh(a).sum(), axis=1)

    x = rng.standard_normal((6, 5)).astype(np.float32)
    exe = check(jl.trace(fn, x), [x])
    out = exe.program.outputs[0].name
    assert any(b.region == out for b in exe.report.memory.buffers), "the case no longer lodges a temporary"


def test_integer_matmul_falls_back_instead_of_failing_to_type():
    def fn(a, b):
        return (a @ b) + 1

    a, b = rng.integers(-5, 5, (4, 3)).astype(np.int32), rng.integers(-5, 5, (3, 2)).astype(np.int32)
    exe = check(jl.trace(fn, a, b), [a, b])
    assert any("int32" in w and "float32 and float64" in w for w in exe.report.warnings)


CONV_SCRIPT = """
import numpy as np, jitlab as jl
program = jl.parse(\'\'\'func @depthwise(%x: f32[2,4,11,1], %k: f32[4,1,4,1]) -> (f32[2,4,8,1]) {
  %0 = np.conv2d(%x, %k) {groups = 4} : f32[2,4,8,1]
  func.return(%0)
}\'\'\')
x = np.ones((2, 4, 11, 1), np.float32); k = np.ones((4, 1, 4, 1), np.float32)
mm = jl.trace(lambda a, b: np.tanh(a @ b), np.ones((3, 5), np.float32), np.ones((5, 2), np.float32))
a = np.full((3, 5), 0.1, np.float32); b = np.ones((5, 2), np.float32)
assert np.allclose(jl.compile(mm, level="O2")(a, b), np.tanh(a @ b))
print(float(jl.compile(program, level="O2")(x, k)[0].sum()))
"""


def test_cached_segment_calling_parallel_conv_runs_in_a_new_process(tmp_path):
    # Run twice: the first process fills the cache, the second loads the segment from it,
    # which once called the threading layer before it was launched and died. The matmul's
    # BLAS address differs between the processes: it must come in as an argument.
    env = {**os.environ, "JITLAB_CACHE_DIR": str(tmp_path)}
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", CONV_SCRIPT], env=env, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr[-2000:]
        assert float(out.stdout) == 2 * 4 * 8 * 4


def test_groups_differing_only_in_shape_share_one_generated_kernel():
    program = jl.parse("""func @convs(%x: f32[1,3,8,8], %k1: f32[4,3,3,3], %k2: f32[6,4,3,3]) -> (f32[1,6,8,8]) {
  %0 = np.conv2d(%x, %k1) {pads = [1, 1, 1, 1]} : f32[1,4,8,8]
  %1 = np.relu(%0) : f32[1,4,8,8]
  %2 = np.conv2d(%1, %k2) {pads = [1, 1, 1, 1]} : f32[1,6,8,8]
  %3 = np.relu(%2) : f32[1,6,8,8]
  func.return(%3)
}
""")
    inputs = [rng.standard_normal(s).astype(np.float32) for s in ((1, 3, 8, 8), (4, 3, 3, 3), (6, 4, 3, 3))]
    exe = check(program, inputs, rtol=1e-4)
    source = exe.report.kernels[-1].source
    assert len({g.attrs["key"] for g in exe.program.body.ops if g.name == "jit.group"}) == 2
    assert source.count("def g0_par(") == 1 and "def g1_par(" not in source


def test_kernels_take_shapes_as_arguments_so_one_compile_serves_every_shape(monkeypatch):
    # numba types a bare literal argument as Literal[int] and compiles the callee once per value.
    monkeypatch.setenv("JITLAB_NATIVE", "0")        # the segment as numba dispatchers, to look into
    def fn(x, y):
        return np.tanh(x) + 1.0, np.tanh(y) + 1.0

    x, y = rng.standard_normal((4, 8)).astype(np.float32), rng.standard_normal((16, 3)).astype(np.float32)
    exe = check(jl.trace(fn, x, y), [x, y])
    segment = next(step for step in exe._runner.steps if isinstance(step, Segment)).fn
    kernels = [v for k, v in segment.py_func.__globals__.items() if k.startswith("g") and k.endswith("_seq")]
    assert len(kernels) == 1 and len(kernels[0].signatures) == 1, [k.signatures for k in kernels]

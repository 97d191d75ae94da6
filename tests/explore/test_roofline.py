"""The roofline's data: FLOPs per op counted against numpy's own shapes, each profiled step's
bytes and FLOPs, its place against the measured bounds, and the bounds' cache."""

import json

import numpy as np
import pytest

import jitlab as jl
from jitlab.explore.roofline import point, roofline_data
from jitlab.ir.opdef import Trait
from jitlab.report import CompileReport
from jitlab.runtime import bounds
from jitlab.runtime.flops import op_flops

RNG = np.random.default_rng(0)


def ops_of(fn, *args):
    program = jl.trace(fn, *args)
    return [op for op in program.body.ops if not op.has(Trait.TERMINATOR)]


def test_a_matmul_counts_two_flops_per_term():
    a, b = RNG.standard_normal((3, 5, 7)).astype(np.float32), RNG.standard_normal((7, 4)).astype(np.float32)
    (op,) = ops_of(np.matmul, a, b)
    out = np.matmul(a, b)
    assert op_flops(op, {}) == 2 * out.size * a.shape[-1]


def test_a_convolution_counts_two_flops_per_filter_tap():
    x = RNG.standard_normal((2, 4, 9, 9)).astype(np.float32)
    w = RNG.standard_normal((6, 2, 3, 3)).astype(np.float32)
    program = jl.parse("""func @c(%x: f32[2,4,9,9], %w: f32[6,2,3,3]) -> (f32[2,6,4,4]) {
  %y = np.conv2d(%x, %w) {strides = [2, 2], groups = 2} : f32[2,6,4,4]
  func.return(%y)
}""")
    op = next(iter(program.body.ops))
    out = jl.compile(program, level="O0")(x, w)[0]
    # each output element sums C/groups x KH x KW products, each a multiply and an add
    assert op_flops(op, {}) == 2 * out.size * (x.shape[1] // 2) * 3 * 3


def test_elementwise_reductions_and_views():
    x = RNG.standard_normal((6, 8)).astype(np.float32)
    mul, total, view = ops_of(lambda v: ((v * 2.0).sum(axis=1), v.reshape(48)), x)[1:]
    assert (mul.name, op_flops(mul, {})) == ("np.mul", x.size)
    assert op_flops(total, {}) == x.size               # one add per element read
    assert op_flops(view, {}) == 0


def mlp(x, w):
    return np.maximum(x @ w + 1.0, 0.0)


def test_profiled_steps_carry_bytes_flops_and_the_bounds():
    x, w = RNG.standard_normal((32, 16)).astype(np.float32), RNG.standard_normal((16, 8)).astype(np.float32)
    exe = jl.compile(jl.trace(mlp, x, w), level="O1", target="cpu")
    record = jl.profile(exe, x, w, repeats=2)
    (step,) = [s for s in record["steps"] if s["group"] is not None]
    assert step["flops"] == 2 * 32 * 8 * 16 + 2 * 32 * 8          # the product, the add and the maximum
    assert step["bytes"] == x.nbytes + w.nbytes + 32 * 8 * 4
    assert record["kernels"][step["kernel"]]["flops"] == step["flops"]
    assert record["bounds"]["bandwidth"] > 0 and record["bounds"]["flops"] > 0
    rf = jl.explore(exe).data["roofline"]
    (placed,) = [s for s in rf["steps"] if s["group"] is not None]
    assert placed["flops"] == step["flops"] and placed["seconds"] == step["median"]


def test_a_point_is_bound_by_the_larger_of_its_memory_and_compute_times():
    b = {"bandwidth": 1e10, "flops": 1e11}
    mem = point(2e-3, 10**7, 10**6, b)               # 1 ms of bytes, 0.01 ms of FLOPs
    assert mem["limit"] == "memory" and mem["bound_seconds"] == pytest.approx(1e-3)
    assert mem["percent"] == pytest.approx(50.0) and mem["bandwidth"] == pytest.approx(5e9)
    comp = point(1e-3, 10**5, 5 * 10**7, b)          # 0.01 ms of bytes, 0.5 ms of FLOPs
    assert comp["limit"] == "compute" and comp["percent"] == pytest.approx(50.0)
    assert comp["intensity"] == pytest.approx(500.0)
    unknown = point(1e-3, 10**6, None, {"bandwidth": 1e10, "flops": None})
    assert unknown["limit"] == "memory" and unknown["flops_per_second"] is None


def test_steps_of_one_kernel_are_summed_and_unprofiled_reports_have_none():
    steps = [{"index": i, "uid": 10 + i, "name": "jit.group", "group": g, "kernel": "k", "median": 1e-3,
              "bytes": 10**6, "flops": 10**6} for i, g in enumerate((3, 7))]
    report = CompileReport(program="p", target="cpu")
    report.profile = {"target": "cpu", "steps": steps, "bounds": {"bandwidth": 1e9, "flops": 1e10, "device": "d",
                                                                   "how": ""}}
    rf = roofline_data(report)
    (k,) = rf["kernels"]
    assert k["groups"] == [3, 7] and k["seconds"] == pytest.approx(2e-3) and k["bytes"] == 2 * 10**6
    assert rf["bound_seconds"] == pytest.approx(2e-3) and k["percent"] == pytest.approx(100.0)
    assert roofline_data(CompileReport(program="p")) is None


def test_bounds_are_measured_once_per_machine_and_kept_in_the_cache_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("JITLAB_CACHE_DIR", str(tmp_path))
    calls = []
    monkeypatch.setattr(bounds, "_measure", lambda target: calls.append(target) or
                        {"device": "d", "bandwidth": 1.0, "flops": 2.0, "how": "test"})
    bounds.for_target.cache_clear()
    try:
        first = bounds.for_target("cpu")
        bounds.for_target.cache_clear()
        assert bounds.for_target("cpu") == first and calls == ["cpu"]
        assert list(json.loads((tmp_path / "bounds.json").read_text()).values()) == [first]
    finally:
        bounds.for_target.cache_clear()

"""fold-weights: ops reading only weights run once at compile time (bit for bit what O0 computes),
per-channel arithmetic after a conv2d folds into its filters and bias (to float rounding), and
nothing is folded that would grow the program without saving work."""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import jitlab as jl
from jitlab.bench import models
from jitlab.ir import Builder, Program, TensorType
from jitlab.passes import pipeline_for
from jitlab.passes.fold_weights import LIMIT_BYTES
from tests.passes.filecheck import assert_identical, check_rewrite
from tests.programs import assert_same, programs

RNG = np.random.default_rng(0)
O1 = pipeline_for("O1").split(",")
UP_TO_FOLDING = ",".join(O1[:O1.index("fold-weights") + 1])


def f32(*shape, low=None, high=None):
    if low is not None:
        return RNG.uniform(low, high, shape).astype(np.float32)
    return RNG.standard_normal(shape).astype(np.float32)


def test_a_transposed_and_scaled_weight_becomes_one_weight():
    _, report = check_rewrite("""
        func @f(%x: f32[4,8]) -> (f32[4,8]) {
          %w = np.weight() {name = "w"} : f32[8,4]
          %t = np.transpose(%w) {perm = [1, 0]} : f32[4,8]
          %c = np.constant() {value = dense<f32[] 2.5>} : f32[]
          %s = np.mul(%t, %c) : f32[4,8]
          %y = np.add(%x, %s) : f32[4,8]
          func.return(%y)
        }""", "fold-weights", """
        func @f(%x: f32[4,8]) -> (f32[4,8]) {
          %s = np.weight() {name = "w.folded"} : f32[4,8]
          %y = np.add(%x, %s) : f32[4,8]
          func.return(%y)
        }""", weights={"w": f32(8, 4)})
    folding = report.folding
    assert [(f.name, f.ops, f.sources) for f in folding.folded] == [("w.folded", ["np.transpose", "np.mul"], ["w"])]
    assert folding.ops_folded == 2 and folding.bytes_before == folding.bytes_after == 128
    assert "2 op(s) computed at compile time" in report.passes[0].notes[0]


def test_a_small_folded_value_becomes_a_constant():
    check_rewrite("""
        func @f(%x: f32[3]) -> (f32[3]) {
          %w = np.weight() {name = "w"} : f32[3]
          %n = np.neg(%w) : f32[3]
          %y = np.mul(%x, %n) : f32[3]
          func.return(%y)
        }""", "fold-weights", """
        CHECK: %n = np.constant() {value = dense<f32[3] [-1.0, 2.0, -0.5]>} : f32[3]
        CHECK-NEXT: np.mul(%x, %n)
        CHECK-NOT: np.weight""", weights={"w": np.array([1, -2, 0.5], np.float32)})


BN_AFTER_CONV = """
    func @f(%x: f32[2,3,6,6]) -> (f32[2,20,6,6]) {
      %w = np.weight() {name = "w"} : f32[20,3,3,3]
      %c = np.conv2d(%x, %w) {pads = [1, 1, 1, 1]} : f32[2,20,6,6]
      %s = np.weight() {name = "scale"} : f32[20]
      %b = np.weight() {name = "bias"} : f32[20]
      %m = np.weight() {name = "mean"} : f32[20]
      %v = np.weight() {name = "var"} : f32[20]
      %y = np.batch_norm(%c, %s, %b, %m, %v) {eps = 1e-05} : f32[2,20,6,6]
      %r = np.relu(%y) : f32[2,20,6,6]
      func.return(%r)
    }"""


def bn_weights():
    return {"w": f32(20, 3, 3, 3), "scale": f32(20, low=0.5, high=2), "bias": f32(20), "mean": f32(20),
            "var": f32(20, low=0.1, high=3)}


def test_batch_norm_after_a_conv_folds_into_its_filters_and_one_bias_add():
    result, report = check_rewrite(BN_AFTER_CONV, "decompose,canonicalize,cse,fold-weights,dce", """
        CHECK: np.weight() {name = "w.folded"} : f32[20,3,3,3]
        CHECK-NEXT: np.conv2d(%x,
        CHECK-NEXT: np.weight() {name = "bias.folded"} : f32[20,1,1]
        CHECK-NEXT: np.add(
        CHECK-NEXT: np.relu(
        CHECK-NOT: np.sub
        CHECK-NOT: np.mul
        CHECK-NOT: np.sqrt""", weights=bn_weights(), exact=False)
    folding = report.folding
    assert len(folding.into_conv) == 1 and sorted(result.weights) == ["bias.folded", "w.folded"]
    assert folding.bytes_before == 4 * (540 + 80) and folding.bytes_after == 4 * (540 + 20)


CHAIN_OPS = ["add", "sub", "mul", "div", "radd", "rsub", "rmul"]


@pytest.mark.parametrize("chain", ["sub,mul,add", "add,div", "mul,mul", "rsub,add", "add,add"])
@pytest.mark.parametrize("channels", [4, 1])
def test_per_channel_chains_fold_into_the_conv(chain, channels):
    check_chain(chain.split(","), [(channels, 1, 1)] * len(chain.split(",")))


@given(chain=st.lists(st.tuples(st.sampled_from(CHAIN_OPS), st.sampled_from([(4, 1, 1), (1, 4, 1, 1), (1, 1, 1), (1,)])),
                      min_size=1, max_size=4))
def test_random_per_channel_chains_fold_into_the_conv(chain):
    """Any order of add/sub/mul/div, the conv on either side, by weights of shape [C,1,1], [1,C,1,1] or one value."""
    ops, shapes = zip(*chain)
    check_chain(list(ops), list(shapes))


def check_chain(ops: list[str], shapes: list[tuple]) -> None:
    program = _conv_chain(ops, shapes)
    report = jl.CompileReport()
    out = jl.opt(program, "fold-weights", report=report)
    if len(ops) > 1 or ops[0] in ("mul", "div", "rmul"):      # one add or sub saves nothing: kept
        assert report.folding.into_conv and out.op_counts()["np.conv2d"] == 1
        assert sum(out.op_counts()[n] for n in ("np.sub", "np.mul", "np.div")) == 0
        assert out.op_counts()["np.add"] <= 1
    x = f32(2, 3, 5, 5)
    assert_same(jl.compile(out, level="O0")(x), jl.compile(program, level="O0")(x), rtol=1e-4, atol=1e-4)


def _conv_chain(ops: list[str], shapes: list[tuple]) -> Program:
    program = Program("chain", [TensorType((2, 3, 5, 5), np.float32)], ["x"])
    b = Builder(program.body, constraints=program.constraints)

    def weight(name, array):
        program.weights[name] = array
        return b.create("np.weight", attrs={"name": name}, result_types=[TensorType(array.shape, array.dtype)]).result

    y = b("np.conv2d", program.inputs[0], weight("w", f32(4, 3, 3, 3)), pads=(1, 1, 1, 1))
    for i, (op, shape) in enumerate(zip(ops, shapes)):
        c = weight(f"c{i}", f32(*shape, low=0.5, high=2))
        y = b(f"np.{op[1:]}", c, y) if op.startswith("r") else b(f"np.{op}", y, c)
    program.set_outputs([y])
    return program


def test_a_scalar_broadcast_into_a_large_tensor_is_not_folded():
    check_rewrite("""
        func @f(%x: f32[128,64]) -> (f32[128,64]) {
          %w = np.weight() {name = "w"} : f32[]
          %b = np.broadcast_to(%w) {shape = [128, 64]} : f32[128,64]
          %y = np.add(%x, %b) : f32[128,64]
          func.return(%y)
        }""", "fold-weights", None, weights={"w": np.float32(3.0).reshape(())},
        misses=[("fold-weight-op", "is larger than its operands")])


def test_the_limit_caps_each_folded_value():
    text = """
        func @f(%x: f32[32,32]) -> (f32[32,32]) {
          %w = np.weight() {name = "w"} : f32[32,32]
          %t = np.transpose(%w) {perm = [1, 0]} : f32[32,32]
          %y = np.add(%x, %t) : f32[32,32]
          func.return(%y)
        }"""
    _, report = check_rewrite(text, "fold-weights{limit=100}", None, weights={"w": f32(32, 32)},
                              misses=[("fold-weight-op", "its result holds 4096 bytes, over the folding limit of 100")])
    assert [s.op_name for s in report.folding.skipped] == ["np.transpose"]
    result, _ = check_rewrite(text, "fold-weights{limit=4096}", "CHECK-NOT: np.transpose", weights={"w": f32(32, 32)})
    assert sorted(result.weights) == ["w.folded"]


def test_the_limit_caps_the_bytes_all_folded_weights_hold():
    """Each transposed copy holds 1024 bytes; the originals it replaces still live in the source program."""
    text = """
        func @f(%x: f32[16,16]) -> (f32[16,16]) {
          %a = np.weight() {name = "a"} : f32[16,16]
          %b = np.weight() {name = "b"} : f32[16,16]
          %ta = np.transpose(%a) {perm = [1, 0]} : f32[16,16]
          %tb = np.transpose(%b) {perm = [1, 0]} : f32[16,16]
          %s = np.add(%x, %ta) : f32[16,16]
          %y = np.add(%s, %tb) : f32[16,16]
          func.return(%y)
        }"""
    weights = {"a": f32(16, 16), "b": f32(16, 16)}
    result, _ = check_rewrite(text, "fold-weights{limit=1500}", "CHECK: np.transpose(%b)", weights=weights,
                              misses=[("fold-weight-op", "bring the bytes of folded weights to 2048, over the limit")])
    assert sorted(result.weights) == ["a.folded", "b"]
    result, _ = check_rewrite(text, "fold-weights{limit=2048}", "CHECK-NOT: np.transpose", weights=weights)
    assert sorted(result.weights) == ["a.folded", "b.folded"]


def test_a_folded_value_a_later_fold_consumes_leaves_the_budget():
    """transpose then scale: the transposed copy is dropped once scaled, so 1024 bytes stay held."""
    check_rewrite("""
        func @f(%x: f32[16,16]) -> (f32[16,16]) {
          %a = np.weight() {name = "a"} : f32[16,16]
          %t = np.transpose(%a) {perm = [1, 0]} : f32[16,16]
          %c = np.constant() {value = dense<f32[] 2.0>} : f32[]
          %s = np.mul(%t, %c) : f32[16,16]
          %y = np.add(%x, %s) : f32[16,16]
          func.return(%y)
        }""", "fold-weights{limit=1024}", "CHECK-NOT: np.mul", weights={"a": f32(16, 16)})


def test_a_conv_whose_result_is_used_twice_keeps_its_batch_norm():
    check_rewrite("""
        func @f(%x: f32[1,2,4,4]) -> (f32[1,2,4,4], f32[1,2,4,4]) {
          %w = np.weight() {name = "w"} : f32[2,2,1,1]
          %c = np.conv2d(%x, %w) : f32[1,2,4,4]
          %s = np.weight() {name = "s"} : f32[2,1,1]
          %y = np.mul(%c, %s) : f32[1,2,4,4]
          func.return(%y, %c)
        }""", "fold-weights", None, weights={"w": f32(2, 2, 1, 1), "s": f32(2, 1, 1)},
        misses=[("fold-into-conv", "has 2 uses: folding would compute it twice")])


def test_a_weight_varying_along_the_image_does_not_fold_into_the_conv():
    check_rewrite("""
        func @f(%x: f32[1,2,4,4]) -> (f32[1,2,4,4]) {
          %w = np.weight() {name = "w"} : f32[2,2,1,1]
          %c = np.conv2d(%x, %w) : f32[1,2,4,4]
          %s = np.weight() {name = "s"} : f32[2,1,4]
          %y = np.mul(%c, %s) : f32[1,2,4,4]
          func.return(%y)
        }""", "fold-weights", None, weights={"w": f32(2, 2, 1, 1), "s": f32(2, 1, 4)},
        misses=[("fold-into-conv", "does not vary along channels only")])


def test_bad_weights_leave_the_op_to_fail_at_run_time_as_at_o0():
    """An index weight out of range (the reference raises) and a weight with no data: not folded,
    the reason recorded, and the call raises what O0 raises."""
    text = """
        func @f(%x: f32[4]) -> (f32[4]) {
          %w = np.weight() {name = "w"} : f32[20]
          %i = np.weight() {name = "i"} : i64[4]
          %g = np.take(%w, %i) {axis = 0} : f32[4]
          %y = np.add(%x, %g) : f32[4]
          func.return(%y)
        }"""
    program = jl.parse(text, weights={"w": np.arange(20, dtype=np.float32), "i": np.array([0, 3, 25, 1])})
    for level in ("O0", "O1"):
        exe = jl.compile(program, level=level, progress=False)
        with pytest.raises(jl.errors.InputError, match="index is out of range for axis 0 of size 20"):
            exe(np.ones(4, np.float32))
    assert "raised InputError" in exe.report.folding.skipped[0].reason
    report = jl.CompileReport()
    kept = jl.opt(jl.parse(text), "fold-weights", report=report)
    assert "weight 'w' has no data" in report.folding.skipped[0].reason
    for level in ("O0", "O1", "O2"):       # O1 and O2 raised a bare KeyError
        with pytest.raises(jl.errors.InputError, match="weight 'w' has no data"):
            jl.compile(kept, level=level, progress=False)(np.ones(4, np.float32))
    with pytest.raises(jl.errors.PassError, match="limit is a number of bytes >= 0, got -1"):
        jl.opt(program, "fold-weights{limit=-1}")


def test_the_pass_runs_at_o1_and_o2_and_is_timed_in_the_report():
    program = jl.parse(BN_AFTER_CONV, weights=bn_weights())
    assert "fold-weights" not in [r.name for r in jl.compile(program, level="O0").report.passes]
    for level in ("O1", "O2"):
        report = jl.compile(program, level=level, progress=False).report
        record = next(r for r in report.passes if r.name == "fold-weights")
        assert record.changed and record.seconds > 0
        assert report.folding.limit_bytes == LIMIT_BYTES and len(report.folding.into_conv) == 1
        assert jl.CompileReport.from_dict(report.to_dict()).folding == report.folding


def test_batch_norm_over_weights_a_traced_function_captures_folds_into_its_convs():
    fn, args = models.build("resnet50", quick=True)
    program = jl.trace(fn, *args)
    report = jl.CompileReport()
    out = jl.opt(program, UP_TO_FOLDING, report=report)
    convs = program.op_counts()["np.conv2d"]
    assert convs == program.op_counts()["np.batch_norm"] == len(report.folding.into_conv) == 53
    assert not any(out.op_counts()[n] for n in ("np.sub", "np.mul", "np.div", "np.sqrt"))
    assert_same(o0(out, args), o0(program, args), rtol=1e-4, atol=1e-4)


def test_batch_norm_parameters_given_as_static_arguments_are_folded():
    mean, var, bias = f32(20), f32(20, low=0.5, high=2), f32(20)

    def f(x, scale):
        return models.batch_norm(x, {"scale": scale, "bias": bias, "mean": mean, "var": var})

    x, scale = f32(2, 20, 3, 3), f32(20, low=0.5, high=2)
    report = jl.CompileReport()
    out = jl.opt(jl.trace(f, x, scale, static_argnums=(1,)), UP_TO_FOLDING, report=report)
    assert out.op_counts()["np.sqrt"] == 0 and report.folding.ops_folded >= 3
    assert any({"bn.scale", "bn.var"} <= set(f.sources) for f in report.folding.folded)
    np.testing.assert_allclose(jl.jit(f, static_argnums=(1,))(x, scale), f(x, scale), rtol=1e-5, atol=1e-6)


def with_weights(program: Program, inputs: list[np.ndarray], k: int) -> Program:
    """`program` with its first `k` inputs turned into weights holding those inputs."""
    new = Program(program.name, [a.type for a in program.inputs[k:]], [a.name for a in program.inputs[k:]],
                  constraints=program.constraints.copy())
    b = Builder(new.body, constraints=new.constraints)
    mapping = dict(zip(program.inputs[k:], new.inputs))
    for arg, array in zip(program.inputs[:k], inputs[:k]):
        new.weights[arg.name] = array
        mapping[arg] = b.create("np.weight", attrs={"name": arg.name}, result_types=[arg.type]).result
    for op in program.body.ops:
        new.body.append(op.clone(mapping))
    return new


@given(case=programs(special_values=True), k=st.integers(1, 3))
def test_folding_random_programs_over_weights_keeps_o0_results_bit_for_bit(case, k):
    k = min(k, len(case.inputs))
    assume(all(a.type.is_static for a in case.program.inputs[:k]))
    program = with_weights(case.program, case.inputs, k)
    folded = jl.opt(program, "fold-weights{into_conv=false}")
    for i, (a, e) in enumerate(zip(o0(folded, case.inputs[k:]), o0(program, case.inputs[k:]))):
        assert a.shape == e.shape and a.dtype == e.dtype, f"output {i}"
        assert_identical(a, e, f"output {i}")


def o0(program, inputs):
    return jl.compile(program, level="O0")(*inputs)


@settings(max_examples=max(settings.default.max_examples // 4, 1))      # each compiles kernels
@given(case=programs(special_values=True, max_ops=6))
def test_random_programs_over_weights_at_o1_equal_o0(case):
    assume(all(a.type.is_static for a in case.program.inputs[:1]))
    program = with_weights(case.program, case.inputs, 1)
    exe = jl.compile(program, level="O1", progress=False)
    assert_same(exe(*case.inputs[1:]), o0(program, case.inputs[1:]))

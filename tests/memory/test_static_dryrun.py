"""Dry runs of statically traced programs at other input sizes: the shapes are re-inferred
(runtime/reinfer.py) and the plan equals the plan of the program compiled at that size."""

import numpy as np
import pytest

import jitlab as jl
from jitlab.explore import from_object
from jitlab.explore.sizes import sizes
from tests.budget import slow_o2
from tests.explore.resnet import example
from tests.explore.samples import train_step


def mlp(x, w1, w2):
    h = np.maximum(x.reshape(x.shape[0], -1) @ w1 + 1.0, 0)
    return np.tanh(h @ w2)[:, 1:]


W1 = np.ones((784, 32), np.float32)
W2 = np.ones((32, 10), np.float32)


def x_of(batch):
    return np.ones((batch, 28, 28), np.float32)


def peak_at(fn, level, *args):
    """The oracle: the plan of the program traced and compiled at that size."""
    return jl.dry_run(jl.trace(fn, *args), level=level, target="cpu").peak_bytes


@pytest.mark.parametrize("level", ["O0", "O1", "O2"])
def test_a_static_program_dry_runs_at_other_batch_sizes(level):
    exe = jl.compile(jl.trace(mlp, x_of(512), W1, W2), level=level, target="cpu")
    for batch in (1, 64, 3000):
        plan = exe.dry_run({"x": (batch, 28, 28)})
        assert plan.peak_bytes == peak_at(mlp, level, x_of(batch), W1, W2), batch
    assert exe.dry_run({"x": (512, 28, 28)}).peak_bytes == exe.dry_run().peak_bytes


def test_dry_run_of_a_program_re_infers_static_dims_too():
    program = jl.trace(mlp, x_of(512), W1, W2)
    got = jl.dry_run(program, {"x": (64, 28, 28)}, level="O1", target="cpu").peak_bytes
    assert got == peak_at(mlp, "O1", x_of(64), W1, W2)


@pytest.mark.slow      # a ResNet's O1 compile (a minute on CI, cold); the small programs below are its fast twins
def test_a_resnet_with_pads_slices_and_concatenations_dry_runs():
    f, x = example()
    exe = jl.compile(jl.trace(f, x), level="O1", target="cpu", progress=False)
    big = np.concatenate([x] * 4)
    assert exe.dry_run({"x": big.shape}).peak_bytes == peak_at(f, "O1", big)


def flat(x):
    return np.tanh(x.reshape(-1))           # traced as a reshape to [401408]


def test_a_size_baked_into_an_op_is_traced_again():
    exe = jl.compile(jl.trace(flat, x_of(512)), level="O1", target="cpu")
    assert exe.dry_run({"x": (64, 28, 28)}).peak_bytes == peak_at(flat, "O1", x_of(64))


def test_a_size_baked_into_an_op_of_a_program_without_its_function_is_an_input_error_naming_it():
    exe = jl.compile(jl.parse(str(jl.trace(flat, x_of(512)))), level="O1", target="cpu")
    with pytest.raises(jl.InputError, match=r"np\.reshape: element count of f32\[d512,28,28\] reshaped to \[401408\]"):
        exe.dry_run({"x": (64, 28, 28)})


def test_one_peak_everywhere_and_plans_for_the_slider():
    exe = jl.compile(jl.trace(mlp, x_of(512), W1, W2), level="O1", target="cpu")
    plan = exe.report.memory
    data = from_object(exe).build()
    memory = data["memory"]
    assert memory["peak_bytes"] == plan.peak_bytes and memory["peak_step"] == plan.peak_step()
    assert memory["overhead_bytes"] == plan.peak_bytes - plan.live_bytes[plan.peak_step()]
    assert plan.peak_step() == int(np.argmax(plan.live_bytes))
    dry = data["dry_run"]
    assert dry["error"] is None and [d["name"] for d in dry["dims"]] == ["x.0"]
    assert [p["values"]["x.0"] for p in dry["plans"]] == sizes(512) == [1, 32, 64, 128, 256, 512, 1024, 2048, 4096]
    at_512 = next(p for p in dry["plans"] if p["values"]["x.0"] == 512)
    assert at_512["peak_bytes"] == plan.peak_bytes and at_512["live_bytes"] == plan.live_bytes
    at_64 = next(p for p in dry["plans"] if p["values"]["x.0"] == 64)
    assert at_64["peak_bytes"] == peak_at(mlp, "O1", x_of(64), W1, W2)
    peaks = [p["peak_bytes"] for p in dry["plans"]]
    assert peaks == sorted(peaks)
    # the live widget's slider covers the static dim too, and asks for the same plans
    session = from_object(exe)
    session.build()
    assert session.dims() == {"x.0": [1, 512, 2048]}
    assert session.dry_run({"x.0": 64})["peak_bytes"] == at_64["peak_bytes"]
    assert session.static_data()["dry_run"]["plans"] == dry["plans"]


def test_sizes_go_below_and_above_the_compiled_one():
    assert sizes(1) == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert sizes(3) == [1, 3, 6, 12, 24, 48, 96, 192, 384]
    assert len(sizes(48)) == 9 and 48 in sizes(48) and 3 in sizes(48)


def test_a_symbolic_program_dry_runs_with_a_static_dim_changed_too():
    def f(x, y):
        return np.tanh(x @ y).sum(0)

    exe = jl.compile(jl.trace(f, jl.spec(("B", 784)), np.ones((784, 16), np.float32)), level="O1", target="cpu")
    got = exe.dry_run({"x": (8, 784), "y": (784, 32)})
    oracle = jl.dry_run(jl.trace(f, jl.spec(("B", 784)), np.ones((784, 32), np.float32)), {"x": (8, 784)},
                        level="O1", target="cpu")
    assert got.peak_bytes == oracle.peak_bytes and got.bindings == {"B": 8, "d16": 32}


def test_o2_plans_at_other_sizes_are_static_ones_that_borrow_outputs_as_a_compile_would():
    import os

    import onnx

    from jitlab.passes import PassContext, PassManager, pipeline_for
    from jitlab.runtime.dryrun import plan_for_level
    from jitlab.runtime.reinfer import concretize, reinfer

    path = os.path.join(os.path.dirname(onnx.__file__), "backend/test/data/light/light_resnet50.onnx")
    if not os.path.exists(path):
        pytest.skip("the onnx package ships no light ResNet-50")
    # without fold-weights: after it, no temporary of ResNet-50 borrows an output's bytes at the peak
    pipeline = ",".join(p for p in pipeline_for("O2").split(",") if p != "fold-weights")
    compiled = PassManager.parse(pipeline, verify_each=False, snapshots=False).run(
        jl.onnx.load(path), PassContext(target="cpu"))
    symbolic = reinfer(compiled, {(compiled.input_names[0], 0): "d1"}, compiled.input_names)
    static = plan_for_level(compiled, "O2")
    assert plan_for_level(concretize(symbolic, {"d1": 1}), "O2").peak_bytes == static.peak_bytes
    # a symbolic plan lends no output's bytes to temporaries: it needs a little more
    assert plan_for_level(symbolic, "O2", {"d1": 1}).peak_bytes > static.peak_bytes


PARAMS = {"w1": np.full((16, 32), 0.1, np.float32), "b1": np.zeros(32, np.float32),
          "w2": np.full((32, 3), 0.1, np.float32), "b2": np.zeros(3, np.float32)}


def batch(n):
    return np.ones((n, 16), np.float32)


@pytest.mark.parametrize("level", slow_o2("O1", "O2"))
def test_a_training_step_dry_runs_at_other_batch_sizes(level):
    # the mean's gradient is a constant of the traced batch's shape: re-inferring the compiled program
    # meets it, so the dry run traces the step again and runs the passes
    donate = tuple(f"p.{k}" for k in PARAMS)        # the new weights go into the old ones' arrays
    exe = jl.compile(jl.trace(train_step, PARAMS, batch(64)), level=level, target="cpu", progress=False, donate=donate)
    # one peak: at the compiled size the dry run plans the donations as the compile did
    assert exe.dry_run().peak_bytes == exe.report.memory.peak_bytes
    plan = exe.dry_run({"x": (200, 16)})
    oracle = jl.compile(jl.trace(train_step, PARAMS, batch(200)), level=level, target="cpu", progress=False,
                        donate=donate)
    assert plan.peak_bytes == oracle.report.memory.peak_bytes and plan.live_bytes == oracle.report.memory.live_bytes
    assert plan.bindings == {"d64": 200}
    assert exe.dry_run({"x": (64, 16)}).peak_bytes == exe.report.memory.peak_bytes
    # jl.dry_run of the program (no donations given) traces again too
    assert jl.dry_run(jl.trace(train_step, PARAMS, batch(64)), {"x": (8, 16)}, level=level,
                      target="cpu").peak_bytes == peak_at(train_step, level, PARAMS, batch(8))


def test_a_jitted_training_step_dry_runs_with_its_donations_and_recomputation():
    kw = dict(level="O1", donate_argnums=(0,), recompute=True, memory_limit=6000)
    step = jl.jit(train_step, **kw)
    step({k: v.copy() for k, v in PARAMS.items()}, batch(64))
    other = jl.jit(train_step, **kw)
    other({k: v.copy() for k, v in PARAMS.items()}, batch(256))
    assert other.last.report.donations and other.last.report.recompute
    assert step.last.dry_run({"x": (256, 16)}).peak_bytes == other.last.report.memory.peak_bytes


def test_a_dry_run_names_a_wrong_shape_before_tracing_again():
    exe = jl.compile(jl.trace(train_step, PARAMS, batch(64)), level="O1", target="cpu", progress=False)
    with pytest.raises(jl.InputError, match="input 'x' is f32\\[64,16\\], got shape \\[8\\]"):
        exe.dry_run({"x": (8,)})
    with pytest.raises(jl.InputError, match="no input named 'y'"):
        exe.dry_run({"y": (8, 16)})


def test_the_slider_varies_the_batch_of_step_params_x_not_the_first_parameter():
    # batch 16 is also x's width and w1's rows: only x's leading dim can take another size alone
    exe = jl.compile(jl.trace(train_step, PARAMS, batch(16)), level="O1", target="cpu", progress=False)
    dry = from_object(exe).build()["dry_run"]
    assert dry["error"] is None
    assert [(d["name"], d["base"], d["positions"]) for d in dry["dims"]] == [("x.0", 16, [["x", 0]])]
    at_64 = next(p for p in dry["plans"] if p["values"]["x.0"] == 64)
    assert at_64["shapes"]["p.w1"] == [16, 32] and at_64["shapes"]["x"] == [64, 16]
    oracle = jl.compile(jl.trace(train_step, PARAMS, batch(64)), level="O1", target="cpu", progress=False)
    assert at_64["peak_bytes"] == oracle.report.memory.peak_bytes


def test_inputs_that_share_the_batch_move_together():
    def fit(p, x, y):
        return jl.grad(lambda p: np.mean((x @ p["w1"] @ p["w2"] - y) ** 2))(p)

    exe = jl.compile(jl.trace(fit, PARAMS, batch(64), np.ones((64, 3), np.float32)), level="O1", target="cpu")
    (dim,) = from_object(exe).build()["dry_run"]["dims"]
    assert dim["name"] == "x.0" and dim["positions"] == [["x", 0], ["y", 0]]

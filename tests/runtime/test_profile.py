"""jl.profile / exe.profile: per step and per kernel times, launches and bytes at O0, O1 and O2."""

import numpy as np
import pytest

import jitlab as jl
from jitlab.explore import from_object


def mlp(x, w1, w2):
    h = np.maximum(x @ w1 + 1.0, 0)
    h = np.tanh(h @ w2)
    return np.exp(h).sum(axis=1)


def twins(x, y):
    return np.tanh(x) + 1.0, np.tanh(y) + 1.0


RNG = np.random.default_rng(0)
ARGS = [RNG.standard_normal(s).astype(np.float32) for s in ((64, 32), (32, 32), (32, 16))]


def nbytes(types) -> int:
    return sum(int(np.prod(t.shape)) * t.dtype.itemsize for t in types)


def groups_of(exe):
    return [op for op in exe.program.body.ops if op.name == "jit.group"]


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_each_group_is_timed_with_its_launches_and_bytes(level):
    exe = jl.compile(jl.trace(mlp, *ARGS), level=level, target="cpu")
    record = jl.profile(exe, *ARGS, repeats=3)
    assert exe.report.profile is record
    assert record["mode"] == ("steps" if level == "O1" else "instrumented") and record["repeats"] == 3
    timed = {s["group"]: s for s in record["steps"] if s["group"] is not None}
    groups = groups_of(exe)
    assert sorted(timed) == sorted(g.attrs["id"] for g in groups)
    for g in groups:
        step = timed[g.attrs["id"]]
        assert step["uid"] == g.uid and step["launches"] == 1 and step["kernel"] == g.attrs["key"]
        assert step["bytes"] == nbytes([v.type for v in (*g.operands, *g.results)])
        assert 0 < step["min"] <= step["median"] <= step["max"] and step["spread"] == step["max"] - step["min"]
    starts = [s["start"] for s in record["steps"]]
    assert starts == sorted(starts)
    # profiling leaves the executable as it was
    np.testing.assert_allclose(exe(*ARGS)[0], jl.compile(jl.trace(mlp, *ARGS), level="O0")(*ARGS)[0], rtol=1e-4)


def test_o0_times_every_op():
    exe = jl.compile(jl.trace(mlp, *ARGS), level="O0")
    record = exe.profile(*ARGS, repeats=2)
    ops = [op for op in exe.program.body.ops if op.name != "func.return"]
    assert [s["uid"] for s in record["steps"]] == [op.uid for op in ops]
    assert record["kernels"] == {}


def test_a_kernel_shared_by_two_groups_lists_both():
    x = np.ones((8, 8), np.float32)
    exe = jl.compile(jl.trace(twins, x, x), level="O1", target="cpu")
    record = exe.profile(x, x, repeats=2)
    ids = sorted(g.attrs["id"] for g in groups_of(exe))
    assert len(ids) == 2 and len(record["kernels"]) == 1
    (kernel,) = record["kernels"].values()
    assert sorted(kernel["groups"]) == ids and kernel["launches"] == 2


def test_o2_program_kernel_gets_the_whole_call():
    exe = jl.compile(jl.trace(mlp, *ARGS), level="O2", target="cpu")
    record = exe.profile(*ARGS, repeats=2)
    (program,) = [k for k in exe.report.kernels if k.group is None]
    assert record["kernels"][program.key]["groups"] == [s["group"] for s in record["steps"] if s["group"] is not None]


def test_a_jitted_function_is_profiled_and_explored_with_times():
    f = jl.jit(mlp, target="cpu")
    record = jl.profile(f, *ARGS, repeats=2)
    data = from_object(f).build()
    assert data["profile"]["total"]["median"] == record["total"]["median"]
    assert data["scopes"][""]["seconds"] == pytest.approx(sum(s["median"] for s in record["steps"]))
    timed = [k for k in data["kernels"] if k["per_call_seconds"] is not None]
    assert timed and all(k["profile"]["groups"] for k in timed)
    group_op = next(o for o in data["ops"].values() if o["name"] == "jit.group")
    assert group_op["seconds"] is not None


def test_inputs_may_be_given_by_name():
    exe = jl.compile(jl.trace(mlp, *ARGS), level="O1", target="cpu")
    record = exe.profile(ARGS[0], w2=ARGS[2], w1=ARGS[1], repeats=1)
    assert record["repeats"] == 1 and len(record["steps"]) == len(groups_of(exe))


def test_bad_arguments_are_jitlab_errors():
    exe = jl.compile(jl.trace(mlp, *ARGS), level="O1", target="cpu")
    with pytest.raises(jl.JitlabError, match="repeats"):
        exe.profile(*ARGS, repeats=0)
    with pytest.raises(jl.JitlabError, match="jitted function or an Executable"):
        jl.profile(mlp, *ARGS)
    with pytest.raises(jl.InputError):
        exe.profile(ARGS[0])


CUDA_SCRIPT = """
import numpy as np, jitlab as jl
def f(x, w):
    return np.tanh(x @ w + 1.0)
x, w = np.ones((4, 3), np.float32), np.ones((3, 2), np.float32)
for level in ("O1", "O2"):
    exe = jl.compile(jl.trace(f, x, w), level=level, target="cuda")
    record = exe.profile(x, w, repeats=2)
    groups = [op.attrs["id"] for op in exe.program.body.ops if op.name == "jit.group"]
    assert record["mode"] == "events", record["mode"]
    assert [s["group"] for s in record["steps"] if s["group"] is not None] == groups
    assert all(s["stream"] == 0 and s["launches"] == 1 for s in record["steps"] if s["group"] is not None)
    assert exe.report.launch_sequence == "" or level == "O2"
    np.testing.assert_allclose(exe(x, w)[0], np.tanh(x @ w + 1.0), rtol=1e-5)
print("ok")
"""


def test_cuda_steps_are_timed_with_events_under_the_simulator(tmp_path):
    """The simulator's events hold no times: this checks the code path and the record's shape."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", JITLAB_CACHE_DIR=str(tmp_path))
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    done = subprocess.run([sys.executable, "-c", CUDA_SCRIPT], cwd=root, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


def test_o2_numpy_fallbacks_between_segments_are_steps_too():
    def f(x):
        return np.cumsum(np.tanh(x), axis=-1) * 2.0

    x = ARGS[0]
    exe = jl.compile(jl.trace(f, x), level="O2", target="cpu")
    record = exe.profile(x, repeats=2)
    assert [s["name"] for s in record["steps"]] == ["jit.group", "np.cumsum", "jit.group"]
    assert all(s["bytes"] == 2 * x.nbytes and s["median"] > 0 for s in record["steps"])


def test_the_timeline_starts_at_the_first_step():
    exe = jl.compile(jl.trace(mlp, *ARGS), level="O1", target="cpu")
    steps = exe.profile(*ARGS, repeats=3)["steps"]
    assert steps[0]["start"] == 0.0
    # in every call each step starts after the one before it ends, so the medians keep that order
    for a, b in zip(steps, steps[1:]):
        assert b["start"] >= a["start"] + a["min"] - 1e-9

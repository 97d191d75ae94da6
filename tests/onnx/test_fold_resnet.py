"""fold-weights on onnx's light ResNet-50: its 53 batch norms fold into the convolutions, so no
kernel of batch-norm arithmetic on weights is left to run at each call, and the model still
agrees with onnxruntime.

The light model's filters are all 0.02 (its logits are equal and its softmax uniform), which
would hide a wrong fold: the numeric checks give it random filters and batch-norm statistics
and compare the logits too."""

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import jitlab as jl
from jitlab.passes import pipeline_for
from tests.onnx.models import onnxruntime_run

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light", "light_resnet50.onnx")
# onnx's backend test runner compares with rtol 1e-3, atol 1e-7; the bench with rtol 1e-3, atol 1e-5
RTOL, ATOL = 1e-3, 1e-5


def feed() -> dict[str, np.ndarray]:
    return {"gpu_0/data_0": np.random.default_rng(1).random((1, 3, 224, 224), dtype=np.float32)}


def random_resnet(seed: int = 0) -> onnx.ModelProto:
    """The light ResNet-50 with random weights in place of its ConstantOfShape fills, and its logits as an output."""
    m = onnx.load(LIGHT)
    rng = np.random.default_rng(seed)
    shapes = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    fills = [n for n in m.graph.node if n.op_type == "ConstantOfShape" and n.input[0] in shapes]
    for n in fills:
        name, shape = n.output[0], [int(d) for d in shapes[n.input[0]]]
        if name.endswith("_w_0"):
            a = rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))
        elif name.endswith(("_riv_0", "_s_0")):
            a = rng.uniform(0.5, 1.5, shape)
        else:
            a = rng.standard_normal(shape) * 0.1
        m.graph.initializer.append(numpy_helper.from_array(a.astype(np.float32), name))
        m.graph.input.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, shape))
        m.graph.node.remove(n)
    m.graph.output.append(helper.make_tensor_value_info("r174", TensorProto.FLOAT, [1, 1000]))
    return m


def weight_only_groups(program: jl.Program) -> int:
    """Groups whose operands are all weights or constants: work that is the same at every call."""
    def known(v):
        return getattr(v, "op", None) is not None and v.op.name in ("np.weight", "np.constant")

    return sum(1 for op in program.body.ops if op.name == "jit.group" and all(map(known, op.operands)))


def without_folding(level: str) -> str:
    return ",".join(p for p in pipeline_for(level).split(",") if p != "fold-weights")


def test_no_batch_norm_arithmetic_is_left_to_run_at_each_call():
    program = jl.onnx.load(LIGHT)
    before = jl.opt(program, without_folding("O1"), verify_each=False)
    report = jl.CompileReport()
    after = jl.opt(program, pipeline_for("O1"), verify_each=False, report=report)
    groups = [sum(op.name == "jit.group" for op in p.body.ops) for p in (before, after)]
    assert weight_only_groups(before) >= 106 and weight_only_groups(after) == 0
    assert groups[1] <= groups[0] - 106, groups
    assert len(report.folding.into_conv) == 53 and len(report.folding.folded) == 2 * 53
    assert report.folding.bytes_after < report.folding.bytes_before
    counts = after.op_counts()        # ops inside the groups included
    assert counts["np.sqrt"] == counts["np.mul"] == 0 and counts["np.sub"] == 1     # softmax's x - max(x)


def test_folded_resnet_matches_onnxruntime():
    """Folding reorders float rounding; the folded model stays within the ONNX tests' tolerances."""
    m = random_resnet()
    x = feed()
    expected = onnxruntime_run(m, x)
    program = jl.onnx.load(m)
    o1 = pipeline_for("O1").split(",")
    folded = jl.opt(program, ",".join(o1[:o1.index("fold-weights") + 1]), verify_each=False)
    assert folded.op_counts()["np.sqrt"] == 0
    outputs = jl.compile(folded, level="O0")(*x.values())
    assert np.abs(expected[1]).max() > 1, "the logits are too small to show a wrong fold"
    for out, ref in zip(outputs, expected):
        np.testing.assert_allclose(out, ref, rtol=RTOL, atol=ATOL)


@pytest.mark.slow
@pytest.mark.parametrize("level", ["O1", "O2"])
def test_folded_resnet_compiled_matches_onnxruntime(level):
    m = random_resnet()
    x = feed()
    exe = jl.compile(jl.onnx.load(m), level=level, progress=False)
    assert weight_only_groups(exe.program) == 0
    for out, ref in zip(exe(*x.values()), onnxruntime_run(m, x)):
        np.testing.assert_allclose(out, ref, rtol=RTOL, atol=ATOL)

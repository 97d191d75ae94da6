"""Every light model in the onnx package (ResNet-50, SqueezeNet, VGG-19 ... with their
weights replaced) through onnx's own backend test runner: the runner feeds its dummy input
and compares with the expected outputs stored beside the model, as it does for any backend.

The tests are parametrized by level; O1 and O2 compile every model's kernels, so they are
marked slow.
"""

import io
import os
import unittest

import numpy as np
import onnx
import pytest
from onnx.backend.test import BackendTest

import jitlab as jl
from jitlab.onnx import JitlabBackend

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
MODELS = sorted(f[len("light_"):-len(".onnx")] for f in os.listdir(LIGHT) if f.endswith(".onnx"))
# The numpy oracle's conv2d spends ~35 s on VGG-19's 20 GFLOP; the rest take a few seconds.
SLOW_MODELS = {"vgg19"}
LEVELS = ["O0", pytest.param("O1", marks=pytest.mark.slow), pytest.param("O2", marks=pytest.mark.slow)]
# onnx's ReferenceEvaluator is wrong on two of them: it runs BatchNormalization-9 in training
# mode (densenet121) and Dropout-7 at random (squeezenet); ORT and the stored outputs agree with jitlab.
REFERENCE_BUGS = {"densenet121", "squeezenet"}


def backend_at(level: str) -> type[JitlabBackend]:
    return type(f"Jitlab{level}", (JitlabBackend,), {"level": level})


# SqueezeNet's logits on the dummy input are all 9.4757e9 (its weights are random), where a float32
# ulp is 1024: a softmax over them turns each ulp of summation-order rounding into a factor e**-1024.
# The stored outputs (uniform 0.001) are what one order gives; O1 and O2 reduce in another and give
# 1/984 and 16 zeros. test_squeezenet_logits_match_onnxruntime checks what comes before the softmax.
ILL_CONDITIONED = {"squeezenet"}


def model_params(names):
    return [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_MODELS else n for n in names]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("name", model_params(MODELS))
def test_light_model_through_onnx_runner(name, level, tmp_path, monkeypatch, request):
    if name in ILL_CONDITIONED and level != "O0":
        request.applymarker(pytest.mark.xfail(reason="a softmax of equal logits near 1e10 (ILL_CONDITIONED)"))
    monkeypatch.setenv("ONNX_HOME", str(tmp_path))
    runner = BackendTest(backend_at(level), __name__).include(f"^test_{name}_cpu$")
    result = unittest.TextTestRunner(stream=io.StringIO(), verbosity=0).run(runner.test_suite)
    ran = result.testsRun - len(result.skipped)
    assert ran == 1, f"the runner ran {ran} tests for {name}"
    problems = result.failures + result.errors
    assert not problems, problems[0][1]


def dummy_feed(m: onnx.ModelProto) -> dict:
    """The runner's dummy input rule, from the runner itself."""
    from onnx.backend.test.runner import Runner

    initializers = {t.name for t in m.graph.initializer}
    return {vi.name: Runner.generate_dummy_data(vi) for vi in m.graph.input if vi.name not in initializers}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(MODELS) - REFERENCE_BUGS))
def test_light_model_matches_the_reference_evaluator(name):
    from onnx.reference import ReferenceEvaluator

    m = onnx.load(os.path.join(LIGHT, f"light_{name}.onnx"))
    feed = dummy_feed(m)
    expected = ReferenceEvaluator(m).run(None, feed)
    outputs = jl.compile(jl.onnx.load(m), level="O0")(*feed.values())
    for out, ref in zip(outputs, expected):
        np.testing.assert_allclose(out, ref, rtol=2e-3, atol=1e-7)


def with_dynamic_batch(name: str) -> onnx.ModelProto:
    m = onnx.load(os.path.join(LIGHT, f"light_{name}.onnx"))
    initializers = {t.name for t in m.graph.initializer}
    for vi in [vi for vi in m.graph.input if vi.name not in initializers] + list(m.graph.output):
        vi.type.tensor_type.shape.dim[0].dim_param = "N"
    return m


def test_a_dynamic_batch_gives_each_sample_what_the_static_model_gives():
    static = jl.compile(jl.onnx.load(os.path.join(LIGHT, "light_squeezenet.onnx")), level="O0")
    program = jl.onnx.load(with_dynamic_batch("squeezenet"))
    assert str(program.inputs[0].type) == "f32[N,3,224,224]"
    x = np.random.default_rng(0).random((2, 3, 224, 224), dtype=np.float32)
    out, = jl.compile(program, level="O0")(x)
    expected = np.concatenate([static(x[i:i + 1])[0] for i in range(2)])
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-7)


def test_a_batch_size_the_model_hard_codes_is_an_input_error():
    """ResNet-50's Reshape to [1, 2048] only holds for N = 1: the program records it and checks it."""
    exe = jl.compile(jl.onnx.load(with_dynamic_batch("resnet50")), level="O0")
    with pytest.raises(jl.InputError, match=r"requires 2048\*N == 2048"):
        exe(np.zeros((2, 3, 224, 224), np.float32))


@pytest.mark.slow
@pytest.mark.parametrize("level", ["O1", "O2"])
def test_squeezenet_logits_match_onnxruntime(level):
    import onnxruntime as ort
    from onnx import TensorProto, helper

    m = onnx.load(os.path.join(LIGHT, "light_squeezenet.onnx"))
    softmax = next(n for n in m.graph.node if n.op_type == "Softmax")
    m.graph.output.append(helper.make_tensor_value_info(softmax.input[0], TensorProto.FLOAT, [1, 1000, 1, 1]))
    feed = dummy_feed(m)
    session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, feed)[1]
    logits = jl.compile(jl.onnx.load(m), level=level)(*feed.values())[1]
    assert expected.min() > 1e9             # the ill-conditioning ILL_CONDITIONED describes
    np.testing.assert_allclose(logits, expected, rtol=1e-5)

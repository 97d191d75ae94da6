"""jitlab as an onnx.backend.base.Backend: onnx's own runner drives it, inputs that fix
shapes are compiled in per value, dynamic dims per shape, and bad calls are errors."""

import io
import unittest

import numpy as np
import pytest
from onnx import helper
from onnx.backend.test import BackendTest

from jitlab.errors import InputError, UnsupportedOp
from jitlab.onnx import JitlabBackend
from tests.onnx.models import model, tensor

NODE_TESTS = ["test_relu", "test_add_bcast", "test_reshape_negative_dim", "test_slice_neg_steps",
              "test_resize_upsample_scales_linear", "test_softmax_axis_0", "test_conv_with_strides_padding",
              "test_attention_4d_gqa_causal", "test_gathernd_example_int32_batch_dim1", "test_einsum_batch_diagonal"]


def test_onnx_runner_drives_jitlab_on_node_tests():
    runner = BackendTest(JitlabBackend, __name__)
    for name in NODE_TESTS:
        runner.include(f"^{name}_cpu$")
    result = unittest.TextTestRunner(stream=io.StringIO(), verbosity=0).run(runner.test_suite)
    assert result.testsRun - len(result.skipped) == len(NODE_TESTS)
    problems = result.failures + result.errors
    assert not problems, problems[0][1]


def reshape_model():
    return model([helper.make_node("Reshape", ["x", "shape"], ["y"])],
                 [tensor("x", np.float32, [2, 6]), tensor("shape", np.int64, [2])], [tensor("y", np.float32, [None, None])])


def test_a_shape_input_is_compiled_in_once_per_value():
    rep = JitlabBackend.prepare(reshape_model())
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    for shape in ([3, 4], [4, -1], [3, 4]):
        y, = rep.run([x, np.array(shape)])
        np.testing.assert_array_equal(y, x.reshape(shape))
    assert rep.static_inputs == ["shape"] and len(rep._cache) == 2


def test_dynamic_dims_are_compiled_per_shape():
    m = model([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], [tensor("x", np.float32, ["N", 3])],
              [tensor("y", np.float32, ["N", 3])])
    rep = JitlabBackend.prepare(m)
    for n in (1, 4):
        x = np.random.default_rng(n).standard_normal((n, 3)).astype(np.float32)
        y, = rep.run({"x": x})
        np.testing.assert_allclose(y, np.exp(x) / np.exp(x).sum(axis=1, keepdims=True), rtol=1e-6)


def test_run_node_runs_one_node():
    a, b = np.ones((2, 3), np.float32), np.arange(3, dtype=np.float32)
    out, = JitlabBackend.run_node(helper.make_node("Add", ["a", "b"], ["c"]), [a, b])
    np.testing.assert_array_equal(out, a + b)


def test_prepare_refuses_unsupported_models_up_front():
    m = model([helper.make_node("Unique", ["x"], ["y"])], [tensor("x", np.float32, [4])],
              [tensor("y", np.float32, [None])])
    with pytest.raises(UnsupportedOp, match="Unique"):
        JitlabBackend.prepare(m)


def test_bad_calls_are_input_errors():
    rep = JitlabBackend.prepare(reshape_model())
    x = np.zeros((2, 6), np.float32)
    with pytest.raises(InputError, match=r"takes 2 input\(s\)"):
        rep.run([x])
    with pytest.raises(InputError, match=r"missing \['shape'\], unknown \['z'\]"):
        rep.run({"x": x, "z": x})
    with pytest.raises(InputError, match="runs on CPU"):
        JitlabBackend.prepare(reshape_model(), "CUDA")
    assert JitlabBackend.supports_device("CPU") and not JitlabBackend.supports_device("CUDA")


def test_groups_with_one_key_but_read_only_weights_in_other_places_each_get_their_kernel():
    """A bidirectional RNN repeats one step kernel per direction: in one the recurrence weight
    is a weight (read-only), in the other a computed slice; sharing one compiled kernel crashed."""
    from jitlab.onnx.conformance import node_cases, run_case

    case = next(c for c in node_cases() if c.name == "test_simple_rnn_bidirectional")
    result = run_case(case, level="O1")
    assert result.status == "pass", result.detail

"""The handler registry: keyed by (domain, op type, since_version), every key a real ONNX
schema version, every newer schema version of a handled op vetted, lookup by opset."""

import collections

import onnx.defs
import pytest

from jitlab.errors import UnsupportedOp
from jitlab.onnx import ops  # noqa: F401  (registers the handlers)
from jitlab.onnx.registry import HANDLERS, lookup, onnx_op, versions_of

# The issue's op list (the tensor subset jitlab promises to cover).
ISSUE_OPS = """Abs Acos Acosh Add And Asin Asinh Atan Atanh BitShift BitwiseAnd BitwiseNot BitwiseOr BitwiseXor
Ceil Cos Cosh Div Elu Equal Erf Exp Floor Greater GreaterOrEqual IsInf IsNaN Less LessOrEqual Log Max Mean Min
Mod Mul Neg Not Or Pow Reciprocal Round Sign Sin Sinh Sqrt Sub Sum Tan Tanh Where Xor Cast CastLike Reshape
Flatten Squeeze Unsqueeze Transpose Expand Concat Split Slice Gather GatherElements GatherND ScatterElements Tile
Pad Shape Size ConstantOfShape Range OneHot Trilu DepthToSpace SpaceToDepth ReduceSum ReduceMean ReduceMax
ReduceMin ReduceProd ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp ReduceSumSquare ArgMax ArgMin TopK CumSum
Einsum MatMul Gemm Conv ConvTranspose MaxPool AveragePool LpPool GlobalAveragePool GlobalMaxPool GlobalLpPool
BatchNormalization InstanceNormalization LayerNormalization GroupNormalization RMSNormalization LRN
MeanVarianceNormalization Softmax LogSoftmax Hardmax Relu LeakyRelu PRelu Selu Celu Gelu Sigmoid HardSigmoid
HardSwish Softplus Softsign Mish ThresholdedRelu Swish Clip Shrink Resize Dropout Identity Attention""".split()


def schema_versions() -> dict[tuple[str, str], list[int]]:
    history = collections.defaultdict(list)
    for s in onnx.defs.get_all_schemas_with_history():
        history[("" if s.domain == "ai.onnx" else s.domain, s.name)].append(s.since_version)
    return {k: sorted(v) for k, v in history.items()}


def test_every_key_is_a_real_schema_version():
    history = schema_versions()
    for domain, op_type, version in HANDLERS:
        assert version in history[(domain, op_type)], f"{op_type} has no schema version {version}"


def test_every_schema_version_after_the_oldest_handler_is_vetted():
    """A newer schema version may change semantics: each must be registered on purpose."""
    history = schema_versions()
    for domain, op_type in {(d, t) for d, t, _ in HANDLERS}:
        mine = versions_of(op_type, domain)
        newer = [v for v in history[(domain, op_type)] if v >= mine[0]]
        assert mine == newer, f"{op_type}: handlers at {mine}, schema versions {newer}"


@pytest.mark.parametrize("op_type", ISSUE_OPS)
def test_the_issue_op_list_has_handlers_at_the_newest_opset(op_type):
    assert lookup(op_type, "", onnx.defs.onnx_opset_version()) is not None


def test_lookup_takes_the_newest_handler_not_newer_than_the_opset():
    assert lookup("Softmax", "", 12) is HANDLERS[("", "Softmax", 11)]
    assert lookup("Softmax", "", 13) is HANDLERS[("", "Softmax", 13)]
    assert lookup("Softmax", "ai.onnx", 20) is HANDLERS[("", "Softmax", 13)]


def test_lookup_refuses_what_it_cannot_handle():
    with pytest.raises(UnsupportedOp, match="Squeeze at opset 0"):
        lookup("Squeeze", "", 0)
    with pytest.raises(UnsupportedOp, match="NoSuchOp is not supported"):
        lookup("NoSuchOp", "", 21)


def test_registering_a_version_twice_is_an_error():
    with pytest.raises(ValueError, match="ONNX handler Relu version 14 is registered twice"):
        onnx_op("Relu", 14)(lambda n: None)

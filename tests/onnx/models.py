"""Building small ONNX models for the tests, and running them through onnx's reference."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

ONNX_DTYPES = {np.dtype(np.float32): onnx.TensorProto.FLOAT, np.dtype(np.float64): onnx.TensorProto.DOUBLE,
               np.dtype(np.int64): onnx.TensorProto.INT64, np.dtype(np.int32): onnx.TensorProto.INT32,
               np.dtype(np.bool_): onnx.TensorProto.BOOL, np.dtype(np.float16): onnx.TensorProto.FLOAT16}


def tensor(name: str, dtype, shape) -> onnx.ValueInfoProto:
    """A graph input or output; str dims are symbolic, None is an unknown dim."""
    return helper.make_tensor_value_info(name, ONNX_DTYPES[np.dtype(dtype)], shape)


def model(nodes, inputs, outputs, initializers=None, opset: int = 21, name: str = "test") -> onnx.ModelProto:
    """A checked model from nodes, value infos and {name: array} initializers."""
    inits = [numpy_helper.from_array(np.asarray(a), n) for n, a in (initializers or {}).items()]
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(m)
    return m


def reference(m: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    from onnx.reference import ReferenceEvaluator

    return ReferenceEvaluator(m).run(None, feeds)


def onnxruntime_run(m: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    """onnxruntime as an independent oracle (it follows the spec where onnx's reference does not)."""
    import onnxruntime

    m = onnx.ModelProto.FromString(m.SerializeToString())
    m.ir_version = min(m.ir_version, 10)
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(m.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def jitlab_run(m: onnx.ModelProto, feeds: dict) -> tuple[np.ndarray, ...]:
    import jitlab as jl

    return jl.compile(jl.onnx.load(m), level="O0")(*feeds.values())


def onnxruntime_worker(conn) -> None:
    """Runs models sent over `conn` in onnxruntime, answering ("ok", outputs) or ("error", message)."""
    while True:
        try:
            data, feeds = conn.recv()
        except EOFError:
            return
        try:
            conn.send(("ok", onnxruntime_run(onnx.ModelProto.FromString(data), feeds)))
        except Exception as e:
            conn.send(("error", f"{type(e).__name__}: {e}"))

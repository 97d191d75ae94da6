"""ONNX import fuzzing: small valid models, mutated (bytes truncated, flipped, inserted or
replaced; dims negative, zero or huge; names dangling, duplicated or cyclic; attributes of
the wrong type or absurd value; element types, opsets, domains and op types changed;
external data pointing outside the model's folder, past its file's end or nowhere), are
loaded by jl.onnx.load. Every outcome is a JitlabError, or a program that (when its values
are small) runs at O0 to onnxruntime's answer, or to a JitlabError, where onnxruntime runs
it: never another exception, never a hang, and never a read of a file outside the folder.

CI runs a couple of hundred examples; JITLAB_ONNX_FUZZ_EXAMPLES=3000 runs a long one, and
`pytest -s` prints what the examples came to."""

from __future__ import annotations

import contextlib
import functools
import os
import tempfile
from collections import Counter
from unittest import mock

import numpy as np
import onnx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import AttributeProto, TensorProto, helper, numpy_helper

import jitlab as jl
from jitlab.errors import JitlabError
from tests.limits import time_limit
from tests.onnx.models import onnxruntime_worker

EXAMPLES = int(os.environ.get("JITLAB_ONNX_FUZZ_EXAMPLES", "200"))
SECONDS = 30                   # one example's load, compile, O0 run and onnxruntime run; a hang fails
MEMORY = 4 << 30              # what one example may add to the process's address space
RUN_ELEMENTS = 1 << 16         # programs whose values all hold at most this many elements are run
OUTCOMES: Counter = Counter()  # what the examples came to, printed by a long run
REFUSED: list = []             # (onnxruntime's error, model) where jitlab ran what onnxruntime refused
SECRET = b"SECRET-OUTSIDE-THE-FOLDER"
F32 = TensorProto.FLOAT
rng = np.random.default_rng(0)


def _init(name: str, array) -> TensorProto:
    return numpy_helper.from_array(np.asarray(array), name)


def _model(nodes, inputs, outputs, inits=(), opset: int = 21) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "fuzz", inputs, outputs, list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    onnx.checker.check_model(m)
    return m


def _vi(name: str, elem: int, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def seed_models() -> list[onnx.ModelProto]:
    """Small valid models over the kinds of ops a model is made of."""
    n = helper.make_node
    w = rng.standard_normal((4, 3)).astype(np.float32)
    mlp = _model([n("MatMul", ["x", "w"], ["h"], name="mm"), n("Add", ["h", "b"], ["h1"], name="bias"),
                  n("Relu", ["h1"], ["h2"], name="act"), n("Softmax", ["h2"], ["y"], name="sm", axis=-1)],
                 [_vi("x", F32, [2, 4])], [_vi("y", F32, [2, 3])],
                 [_init("w", w), _init("b", rng.standard_normal(3).astype(np.float32))])
    conv = _model([n("Conv", ["x", "cw", "cb"], ["c"], name="conv", pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
                   n("BatchNormalization", ["c", "s", "o", "m", "v"], ["bn"], name="bn", epsilon=1e-3),
                   n("MaxPool", ["bn"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
                   n("Flatten", ["p"], ["y"], name="flat", axis=1)],
                  [_vi("x", F32, [1, 2, 5, 5])], [_vi("y", F32, [1, 12])],
                  [_init("cw", rng.standard_normal((3, 2, 3, 3)).astype(np.float32)),
                   _init("cb", rng.standard_normal(3).astype(np.float32))]
                  + [_init(k, rng.random(3).astype(np.float32) + 0.5) for k in "somv"])
    shapes = _model([n("Shape", ["x"], ["sh"], name="shape"),
                     n("Gather", ["sh", "zero"], ["d0"], name="first", axis=0),
                     n("Unsqueeze", ["d0", "zero1"], ["d0v"], name="unsq"),
                     n("Concat", ["d0v", "minus1"], ["target"], name="cat", axis=0),
                     n("Reshape", ["x", "target"], ["r"], name="reshape"),
                     n("Transpose", ["r"], ["t"], name="tr", perm=[1, 0]),
                     n("ReduceMean", ["t", "axes"], ["y"], name="mean", keepdims=1)],
                    [_vi("x", F32, ["N", 3, 4])], [_vi("y", F32, [12, 1])],
                    [_init("zero", np.array(0, np.int64)), _init("zero1", np.array([0], np.int64)),
                     _init("minus1", np.array([-1], np.int64)), _init("axes", np.array([1], np.int64))])
    fill = _model([n("ConstantOfShape", ["shape"], ["c"], name="fill",
                     value=helper.make_tensor("v", F32, [1], [1.5])),
                   n("Greater", ["x", "c"], ["g"], name="gt"),
                   n("Where", ["g", "x", "c"], ["wh"], name="where"),
                   n("Cast", ["wh"], ["y"], name="cast", to=TensorProto.INT64),
                   n("Expand", ["x", "shape"], ["y2"], name="expand")],
                  [_vi("x", F32, [2, 3])], [_vi("y", TensorProto.INT64, [2, 3]), _vi("y2", F32, [2, 3])],
                  [_init("shape", np.array([2, 3], np.int64))])
    index = _model([n("Gather", ["x", "idx"], ["g"], name="gather", axis=1),
                    n("Slice", ["g", "starts", "ends", "sl_axes"], ["s"], name="slice"),
                    n("Pad", ["s", "pads"], ["p"], name="pad", mode="constant"),
                    n("Concat", ["p", "p"], ["y"], name="cat", axis=0)],
                   [_vi("x", F32, [3, 5])], [_vi("y", F32, [8, 3])],
                   [_init("idx", np.array([4, 0, 2, 1], np.int64)), _init("starts", np.array([1], np.int64)),
                    _init("ends", np.array([4], np.int64)), _init("sl_axes", np.array([1], np.int64)),
                    _init("pads", np.array([1, 0, 0, 0], np.int64))])
    norm = _model([n("LayerNormalization", ["x", "g", "beta"], ["ln"], name="ln", axis=-1, epsilon=1e-5),
                   n("Gelu", ["ln"], ["ge"], name="gelu"),
                   n("Clip", ["ge", "lo", "hi"], ["cl"], name="clip"),
                   n("Pow", ["cl", "two"], ["y"], name="pow")],
                  [_vi("x", F32, [2, 3, 4])], [_vi("y", F32, [2, 3, 4])],
                  [_init("g", rng.standard_normal(4).astype(np.float32)), _init("beta", np.zeros(4, np.float32)),
                   _init("lo", np.array(-1, np.float32)), _init("hi", np.array(2, np.float32)),
                   _init("two", np.array(2, np.float32))])
    i64 = TensorProto.INT64
    reduce = _model([n("TopK", ["x", "k"], ["top", "top_i"], name="topk", axis=1),
                     n("ArgMax", ["x"], ["am"], name="argmax", axis=0, keepdims=0),
                     n("CumSum", ["top", "cs_axis"], ["cs"], name="cumsum"),
                     n("Split", ["x", "split"], ["sa", "sb"], name="split", axis=1),
                     n("Tile", ["sa", "reps"], ["ti"], name="tile"),
                     n("Squeeze", ["ti", "sq_axes"], ["y"], name="squeeze")],
                    [_vi("x", F32, [3, 4])],
                    [_vi("cs", F32, [3, 2]), _vi("top_i", i64, [3, 2]), _vi("am", i64, [4]),
                     _vi("sb", F32, [3, 3]), _vi("y", F32, [6])],
                    [_init("k", np.array([2], np.int64)), _init("cs_axis", np.array(1, np.int64)),
                     _init("split", np.array([1, 3], np.int64)), _init("reps", np.array([2, 1], np.int64)),
                     _init("sq_axes", np.array([1], np.int64))])
    pools = _model([n("Gemm", ["x", "gw", "gc"], ["ge"], name="gemm", alpha=0.5, beta=2.0, transB=1),
                    n("Reshape", ["ge", "img"], ["im"], name="reshape"),
                    n("AveragePool", ["im"], ["ap"], name="avg", kernel_shape=[2, 2], pads=[1, 1, 0, 0],
                      count_include_pad=1),
                    n("LRN", ["ap"], ["lrn"], name="lrn", size=3),
                    n("InstanceNormalization", ["lrn", "isc", "ib"], ["inn"], name="inorm"),
                    n("GlobalAveragePool", ["inn"], ["y"], name="gap")],
                   [_vi("x", F32, [2, 5])], [_vi("y", F32, [2, 2, 1, 1])],
                   [_init("gw", rng.standard_normal((8, 5)).astype(np.float32)),
                    _init("gc", rng.standard_normal(8).astype(np.float32)),
                    _init("img", np.array([2, 2, 2, 2], np.int64)),
                    _init("isc", np.ones(2, np.float32)), _init("ib", np.zeros(2, np.float32))])
    misc = _model([n("Einsum", ["x", "x"], ["es"], name="einsum", equation="ij,kj->ik"),
                   n("Trilu", ["es", "diag"], ["tr"], name="trilu", upper=1),
                   n("OneHot", ["idx", "depth", "onoff"], ["oh"], name="onehot", axis=-1),
                   n("Range", ["start", "limit", "delta"], ["rg"], name="range"),
                   n("GatherElements", ["x", "ge_idx"], ["gel"], name="gather_elements", axis=1),
                   n("DepthToSpace", ["d2s_in"], ["d2s"], name="d2s", blocksize=2),
                   n("Resize", ["d2s", "", "scales"], ["y"], name="resize", mode="linear")],
                  [_vi("x", F32, [3, 4]), _vi("d2s_in", F32, [1, 4, 2, 2])],
                  [_vi("tr", F32, [3, 3]), _vi("oh", F32, [2, 5]), _vi("rg", i64, [4]),
                   _vi("gel", F32, [3, 2]), _vi("y", F32, [1, 1, 8, 8])],
                  [_init("diag", np.array(0, np.int64)), _init("idx", np.array([1, 4], np.int64)),
                   _init("depth", np.array(5, np.int64)), _init("onoff", np.array([0, 1], np.float32)),
                   _init("start", np.array(1, np.int64)), _init("limit", np.array(9, np.int64)),
                   _init("delta", np.array(2, np.int64)), _init("ge_idx", np.array([[0, 3]] * 3, np.int64)),
                   _init("scales", np.array([1, 1, 2, 2], np.float32))])
    return [mlp, conv, shapes, fill, index, norm, reduce, pools, misc]


def node_case_seeds() -> list[onnx.ModelProto]:
    """onnx's node test cases (one per op type) whose integer and bool inputs (shapes, axes, pads,
    indices ...) are made initializers holding the case's values, so mutating them reaches every
    handler's checks of what it must know at compile time."""
    from jitlab.onnx.conformance import node_cases

    seeds, seen = [], set()
    for case in node_cases():
        if case.excluded or case.op_type in seen or "_expanded" in case.name:
            continue
        m = onnx.ModelProto.FromString(case.model.SerializeToString())
        if len(m.graph.node) != 1 or any(a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS)
                                         for a in m.graph.node[0].attribute):
            continue
        arrays = [numpy_helper.to_array(x) if isinstance(x, TensorProto) else np.asarray(x) for x in case.inputs]
        for vi, array in zip(list(m.graph.input), arrays):
            if array.dtype.kind in "biu" and array.size <= 64:
                m.graph.input.remove(vi)
                m.graph.initializer.append(numpy_helper.from_array(array, vi.name))
        m.ir_version = min(m.ir_version, 10)
        seen.add(case.op_type)
        seeds.append(m)
    return seeds


@functools.cache
def all_seeds() -> tuple[onnx.ModelProto, ...]:
    """Built on first use: collecting onnx's node cases takes seconds."""
    return tuple(seed_models() + node_case_seeds())


SEEDS = st.deferred(lambda: st.sampled_from(all_seeds()))
ABSURD_DIMS = [-1, -60, 0, 1, 10**6, 10**12, 2**62, 2**63 - 1]
ABSURD_INTS = [-(2**63), -100, -1, 0, 1, 2, 7, 10**12, 2**62]
ABSURD_FLOATS = [0.0, -1.0, 1e-30, 1e30, float("inf"), float("-inf"), float("nan")]
OP_TYPES = ["Relu", "Add", "Identity", "Reshape", "Transpose", "Softmax", "Conv", "MaxPool", "Concat", "Gather",
            "Cast", "Neg", "Where", "Unknown", "", "If", "Loop", "Sum", "MatMul"]
LOCATIONS = ["../secret.bin", "sub/../../secret.bin", "/etc/passwd", "link.bin", "missing.bin", "", ".",
             "sub", "weights.bin"]


def _names(m: onnx.ModelProto) -> list[str]:
    g = m.graph
    return [vi.name for vi in g.input] + [t.name for t in g.initializer] + [o for node in g.node for o in node.output]


def _value_infos(m: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    return list(m.graph.input) + list(m.graph.output) + list(m.graph.value_info)


def _dims(m: onnx.ModelProto):
    return [d for vi in _value_infos(m) for d in vi.type.tensor_type.shape.dim]


def _attributes(m: onnx.ModelProto) -> list[AttributeProto]:
    return [a for node in m.graph.node for a in node.attribute]


def _mutate_dim(draw, m):
    dims = _dims(m)
    if dims:
        d = draw(st.sampled_from(dims))
        choice = draw(st.sampled_from(ABSURD_DIMS + ["param", "clear"]))
        if choice == "param":
            d.dim_param = draw(st.sampled_from(["N", "", "2N", "x y"]))
        elif choice == "clear":
            d.Clear()
        else:
            d.dim_value = choice


def _mutate_initializer(draw, m):
    inits = m.graph.initializer
    if not inits:
        return
    t = draw(st.sampled_from(list(inits)))
    kind = draw(st.sampled_from(["values", "values", "values", "dims", "type", "truncate", "rank"]))
    if kind == "values":
        with contextlib.suppress(Exception):       # earlier mutations may have broken it
            array = numpy_helper.to_array(t).copy()
            if array.size:
                absurd = ABSURD_INTS if array.dtype.kind in "iu" else ABSURD_FLOATS
                with np.errstate(all="ignore"):
                    array.reshape(-1)[draw(st.integers(0, array.size - 1))] = draw(st.sampled_from(absurd))
                t.CopyFrom(numpy_helper.from_array(array, t.name))
    elif kind == "dims" and t.dims:
        t.dims[draw(st.integers(0, len(t.dims) - 1))] = draw(st.sampled_from(ABSURD_DIMS))
    elif kind == "type":
        t.data_type = draw(st.sampled_from([0, TensorProto.DOUBLE, TensorProto.INT32, TensorProto.STRING,
                                            TensorProto.BFLOAT16, TensorProto.BOOL, 99]))
    elif kind == "truncate":
        if t.raw_data:
            t.raw_data = t.raw_data[:draw(st.integers(0, len(t.raw_data)))]
    else:
        t.dims.append(draw(st.sampled_from([0, 1, 2])))


def _mutate_names(draw, m):
    g = m.graph
    nodes = list(g.node)
    if not nodes:
        return
    kind = draw(st.sampled_from(["dangling", "cycle", "dup_output", "dup_graph_output", "empty_input",
                                 "graph_output_name", "reorder"]))
    node = draw(st.sampled_from(nodes))
    if kind == "dangling" and node.input:
        node.input[draw(st.integers(0, len(node.input) - 1))] = "nowhere"
    elif kind == "cycle" and node.input:
        later = nodes[nodes.index(node):]
        node.input[draw(st.integers(0, len(node.input) - 1))] = draw(st.sampled_from(later)).output[0]
    elif kind == "dup_output":
        node.output[0] = draw(st.sampled_from(_names(m)))
    elif kind == "dup_graph_output" and g.output:
        g.output.append(g.output[0])
    elif kind == "empty_input" and node.input:
        node.input[draw(st.integers(0, len(node.input) - 1))] = ""
    elif kind == "graph_output_name" and g.output:
        g.output[0].name = draw(st.sampled_from(_names(m) + ["nowhere", ""]))
    elif kind == "reorder":
        order = draw(st.permutations(range(len(nodes))))
        copies = [onnx.NodeProto.FromString(nodes[i].SerializeToString()) for i in order]
        del g.node[:]
        g.node.extend(copies)


def _mutate_attribute(draw, m):
    attrs = _attributes(m)
    if not attrs:
        return
    a = draw(st.sampled_from(attrs))
    kind = draw(st.sampled_from(["value", "value", "value", "type", "int", "ints", "float", "string", "drop",
                                 "unknown"]))
    if kind == "value":
        if a.type == AttributeProto.INT:
            a.i = draw(st.sampled_from(ABSURD_INTS))
        elif a.type == AttributeProto.INTS and a.ints:
            a.ints[draw(st.integers(0, len(a.ints) - 1))] = draw(st.sampled_from(ABSURD_INTS))
        elif a.type == AttributeProto.INTS:
            a.ints.append(draw(st.sampled_from(ABSURD_INTS)))
        elif a.type == AttributeProto.FLOAT:
            a.f = draw(st.sampled_from(ABSURD_FLOATS))
        elif a.type == AttributeProto.TENSOR:
            a.t.dims.extend([draw(st.sampled_from([0, 2, 10**12]))])
    elif kind == "type":
        a.type = draw(st.sampled_from(list(AttributeProto.AttributeType.values())))
    elif kind == "int":
        a.ClearField("ints")
        a.i, a.type = draw(st.sampled_from(ABSURD_INTS)), AttributeProto.INT
    elif kind == "ints":
        del a.ints[:]
        a.ints.extend(draw(st.lists(st.sampled_from(ABSURD_INTS), max_size=5)))
        a.type = AttributeProto.INTS
    elif kind == "float":
        a.f, a.type = draw(st.sampled_from(ABSURD_FLOATS)), AttributeProto.FLOAT
    elif kind == "string":
        a.s, a.type = draw(st.sampled_from([b"", b"\xff\xfe", b"nearest", b"x" * 100])), AttributeProto.STRING
    else:
        node = next(node for node in m.graph.node if any(x is a for x in node.attribute))
        if kind == "drop":
            node.attribute.remove(a)
        else:
            node.attribute.append(helper.make_attribute(draw(st.sampled_from(["bogus", "axis", "perm"])), 3))


def _mutate_types(draw, m):
    kind = draw(st.sampled_from(["elem", "opset", "domain", "op_type", "drop_node", "drop_output", "drop_input"]))
    g = m.graph
    if (kind in ("domain", "op_type", "drop_node") and not g.node) or (kind == "elem" and not _value_infos(m)):
        return
    if kind == "elem":
        vi = draw(st.sampled_from(_value_infos(m)))
        vi.type.tensor_type.elem_type = draw(st.sampled_from([0, TensorProto.DOUBLE, TensorProto.INT64,
                                                              TensorProto.STRING, TensorProto.FLOAT16,
                                                              TensorProto.BFLOAT16, TensorProto.FLOAT8E4M3FN, 77]))
    elif kind == "opset":
        m.opset_import[0].version = draw(st.sampled_from([0, 1, 6, 13, 17, 28, 29, 999]))
    elif kind == "domain":
        node = draw(st.sampled_from(list(g.node)))
        node.domain = draw(st.sampled_from(["com.example", "ai.onnx.ml", "ai.onnx", "com.microsoft"]))
        if draw(st.booleans()):
            m.opset_import.append(helper.make_opsetid(node.domain, draw(st.sampled_from([1, 3, 999]))))
    elif kind == "op_type":
        draw(st.sampled_from(list(g.node))).op_type = draw(st.sampled_from(OP_TYPES))
    elif kind == "drop_node":
        g.node.remove(draw(st.sampled_from(list(g.node))))
    elif kind == "drop_output" and g.output:
        g.output.remove(draw(st.sampled_from(list(g.output))))
    elif kind == "drop_input" and g.input:
        g.input.remove(draw(st.sampled_from(list(g.input))))


def _mutate_external(draw, m):
    """Moves an initializer's data to an external file entry; the test writes the files."""
    inits = [t for t in m.graph.initializer if t.raw_data or t.float_data or t.int64_data]
    if not inits:
        return
    t = draw(st.sampled_from(inits))
    raw = t.raw_data
    if not raw:
        with contextlib.suppress(Exception):       # earlier mutations may have broken it: then no data
            raw = numpy_helper.to_array(t).tobytes()
    t.ClearField("raw_data"), t.ClearField("float_data"), t.ClearField("int64_data")
    t.data_location = TensorProto.EXTERNAL
    entries = {"location": draw(st.sampled_from(LOCATIONS)), "offset": "0", "length": str(len(raw))}
    if draw(st.booleans()):
        key = draw(st.sampled_from(["offset", "length"]))
        entries[key] = str(draw(st.sampled_from([-8, -1, 3, 10**12, 2**63, "x"])))
    if draw(st.booleans()):
        del entries[draw(st.sampled_from(["offset", "length"]))]
    for key, value in entries.items():
        t.external_data.add(key=key, value=value)
    m.metadata_props.add(key="fuzz:weights", value=raw.hex())


MUTATIONS = [_mutate_dim, _mutate_initializer, _mutate_names, _mutate_attribute, _mutate_types, _mutate_external]


def _mutate_bytes(draw, data: bytes) -> bytes:
    kind = draw(st.sampled_from(["truncate", "flip", "insert", "random", "splice"]))
    if kind == "truncate":
        return data[:draw(st.integers(0, len(data)))]
    if kind == "flip":
        out = bytearray(data)
        for _ in range(draw(st.integers(1, 8))):
            at = draw(st.integers(0, len(out) - 1))
            out[at] ^= 1 << draw(st.integers(0, 7))
        return bytes(out)
    if kind == "insert":
        at = draw(st.integers(0, len(data)))
        return data[:at] + draw(st.binary(min_size=1, max_size=16)) + data[at:]
    if kind == "random":
        return draw(st.binary(max_size=200))
    other = draw(SEEDS).SerializeToString()
    return data[:draw(st.integers(0, len(data)))] + other[draw(st.integers(0, len(other))):]


@st.composite
def mutated_models(draw) -> bytes:
    m = onnx.ModelProto.FromString(draw(SEEDS).SerializeToString())
    for _ in range(draw(st.integers(1, 3))):
        draw(st.sampled_from(MUTATIONS))(draw, m)
    data = m.SerializeToString()
    if draw(st.integers(0, 3)) == 0:
        data = _mutate_bytes(draw, data)
    return data


@contextlib.contextmanager
def memory_cap(extra: int):
    """The address space capped at what the process uses now plus `extra` bytes, so a mutated
    model that asks for terabytes gets a MemoryError (an OutOfMemoryError from jitlab) instead
    of swapping the machine to a halt."""
    try:
        import resource

        with open("/proc/self/statm") as f:
            used = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError):
        yield
        return
    cap = used + extra if hard == resource.RLIM_INFINITY else min(used + extra, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def write_folder(root: str, data: bytes) -> str:
    """The model file in root/model/, its external weights beside it, a secret outside it and a
    link to the secret inside; returns the model's path."""
    folder = os.path.join(root, "model")
    os.makedirs(os.path.join(folder, "sub"))
    with open(os.path.join(root, "secret.bin"), "wb") as f:
        f.write(SECRET * 64)
    os.symlink(os.path.join(root, "secret.bin"), os.path.join(folder, "link.bin"))
    weights = b""
    with contextlib.suppress(Exception):
        props = {p.key: p.value for p in onnx.ModelProto.FromString(data).metadata_props}
        weights = bytes.fromhex(props.get("fuzz:weights", ""))
    with open(os.path.join(folder, "weights.bin"), "wb") as f:
        f.write(weights)
    path = os.path.join(folder, "m.onnx")
    with open(path, "wb") as f:
        f.write(data)
    return path


@contextlib.contextmanager
def reads_recorded(opened: list[str]):
    """Records every file Python opens (onnx's C++ checker reads only the model file itself)."""
    real_open, real_os_open = open, os.open

    def record_open(file, *args, **kwargs):
        if isinstance(file, (str, bytes, os.PathLike)):
            opened.append(os.path.realpath(file))
        return real_open(file, *args, **kwargs)

    def record_os_open(path, *args, **kwargs):
        opened.append(os.path.realpath(path))
        return real_os_open(path, *args, **kwargs)

    with mock.patch("builtins.open", record_open), mock.patch("os.open", record_os_open):
        yield


class Onnxruntime:
    """onnxruntime in a child process: some mutated models crash it (a segfault on Min with an
    empty optional input) where it should refuse them, and that must not end the test run."""

    def __init__(self):
        self.process = self.conn = None

    def run(self, data: bytes, feeds: dict) -> tuple[str, object]:
        """("ok", outputs), ("error", message) or ("crashed", exit code)."""
        import multiprocessing

        if self.process is None or not self.process.is_alive():
            context = multiprocessing.get_context("spawn")
            self.conn, child = context.Pipe()
            self.process = context.Process(target=onnxruntime_worker, args=(child,), daemon=True)
            self.process.start()
            child.close()       # so that the child's death reads as EOF here
        self.conn.send((data, feeds))
        try:
            return self.conn.recv()
        except EOFError:
            self.process.join()
            code, self.process = self.process.exitcode, None
            return "crashed", code


ORT = Onnxruntime()


def small(program: jl.Program) -> bool:
    values = list(program.inputs) + [r for op in program.walk() for r in op.results]
    return all(v.type.is_static and v.type.size <= RUN_ELEMENTS for v in values)


def feeds_for(program: jl.Program) -> dict[str, np.ndarray]:
    r = np.random.default_rng(1)
    return {v.name: np.asarray((r.standard_normal(v.type.shape) * 2).astype(v.type.dtype) if v.type.dtype.kind == "f"
                               else r.integers(0, 3, v.type.shape).astype(v.type.dtype)) for v in program.inputs}


def extreme_constants(program: jl.Program) -> bool:
    """Whether a weight or constant holds inf, NaN or a float past 1e20."""
    arrays = list(program.weights.values()) + [op.attrs["value"].array for op in program.walk()
                                               if op.name == "np.constant"]
    with np.errstate(all="ignore"):
        return any(a.dtype.kind == "f" and not (np.abs(a) < 1e20).all() for a in map(np.asarray, arrays))


def agree(ours, theirs, extreme: bool) -> None:
    """Same outputs, shapes and dtypes, values within float32 tolerance. Where a result is not
    finite, the two may differ between NaN and inf (a different order of the same formula gives
    inf - inf in one and inf in the other); with extreme constants only the positions both make
    finite are compared: where NaN meets max/min, onnxruntime's pooling skips it and numpy's
    (jitlab's) propagates it, and overflow depends on the order of sums."""
    assert len(ours) == len(theirs), f"{len(ours)} outputs, onnxruntime gives {len(theirs)}"
    for k, (a, b) in enumerate(zip(ours, theirs)):
        b = np.asarray(b)
        assert a.shape == b.shape and a.dtype == b.dtype, f"output {k}: {a.dtype}{a.shape} vs {b.dtype}{b.shape}"
        if a.dtype.kind == "f":
            finite = np.isfinite(a), np.isfinite(b)
            if not extreme:
                assert (finite[0] == finite[1]).all(), f"output {k}: not finite in different places\n{a}\n{b}"
                infinite = np.isinf(a) & np.isinf(b)
                assert (a[infinite] == b[infinite]).all(), f"output {k}: infinities of different signs\n{a}\n{b}"
            a, b = a[finite[0] & finite[1]], b[finite[0] & finite[1]]
        # float32 rounding of sums (a DFT, a matmul) scales with the largest value, not each one
        scale = max(1.0, float(np.abs(b).max())) if b.size and b.dtype.kind == "f" else 1.0
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5 * scale, err_msg=f"output {k}")


def load(data: bytes, path: str | None) -> jl.Program | None:
    """The program, with 2 for each dynamic input dim, or None after a JitlabError (counted)."""
    try:
        program = jl.onnx.load(path if path is not None else data)
        shapes = {v.name: tuple(d if isinstance(d, int) else 2 for d in v.type.shape)
                  for v in program.inputs if not v.type.is_static}
        if shapes:
            program = jl.onnx.load(path if path is not None else data, shapes=shapes)
        OUTCOMES["loaded"] += 1
        return program
    except JitlabError as e:
        assert "internal error" not in str(e), str(e)      # a handler's crash, caught by the importer
        OUTCOMES[type(e).__name__] += 1
        return None


def check(data: bytes) -> None:
    """One example: load it (from a folder when it has external data), run it, compare."""
    with tempfile.TemporaryDirectory() as root, time_limit(SECONDS), memory_cap(MEMORY):
        path = write_folder(root, data) if b"fuzz:weights" in data else None
        opened: list[str] = []
        with reads_recorded(opened):
            program = load(data, path)
        secret = os.path.realpath(os.path.join(root, "secret.bin"))
        assert secret not in opened and "/etc/passwd" not in opened, opened
        if program is None:
            return
        if not small(program):
            OUTCOMES["loaded, too large to run"] += 1
            return
        feeds = feeds_for(program)
        try:
            with np.errstate(all="ignore"):
                ours = jl.compile(program, level="O0")(*feeds.values())
        except JitlabError as e:
            OUTCOMES[f"O0: {type(e).__name__}"] += 1
            return
        status, theirs = ORT.run(data if path is None else onnx.load(path).SerializeToString(), feeds)
        if status != "ok":      # onnxruntime refuses (or crashes on) what jitlab runs: nothing to compare with
            OUTCOMES[f"ran; onnxruntime {'refuses' if status == 'error' else 'crashes on'} it"] += 1
            REFUSED.append((str(theirs), data))
            return
        agree(ours, theirs, extreme_constants(program))
        OUTCOMES["ran; agrees with onnxruntime"] += 1


def test_every_seed_runs_and_agrees_with_onnxruntime():
    for m in seed_models():
        before = OUTCOMES["ran; agrees with onnxruntime"]
        check(m.SerializeToString())
        assert OUTCOMES["ran; agrees with onnxruntime"] == before + 1, m.graph.node[0].op_type


@settings(max_examples=EXAMPLES, deadline=None, derandomize=EXAMPLES <= 200,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutated_models())
def test_mutated_models_load_and_run_or_give_a_jitlab_error(data):
    check(data)


def teardown_module():
    if os.environ.get("JITLAB_ONNX_FUZZ_EXAMPLES"):
        print("\nONNX fuzz outcomes:", ", ".join(f"{k} {v}" for k, v in OUTCOMES.most_common()))

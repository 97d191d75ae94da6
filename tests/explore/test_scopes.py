"""Scope paths: from the Python call stack while tracing, from ONNX node names, and the
explorer's hierarchy built on them (groups as a level, bookkeeping marked)."""

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import jitlab as jl
from jitlab.explore import from_object
from jitlab.explore.scopes import scope_tree
from jitlab.onnx.scopes import labels, node_scopes
from jitlab.report import snapshot


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def attn(x):
    return softmax(x @ x.T)


def block(x):
    return attn(x) + x


def model(x):
    for _ in range(2):
        x = block(x)
    return np.tanh(x)


X = np.ones((4, 4), np.float32)


def scopes_of(program):
    return [(op.name, op.loc.scope) for op in program.body.ops if op.loc is not None]


def test_tracing_records_the_call_stack_inside_the_traced_function():
    got = scopes_of(jl.trace(model, X, capture_loops=False))      # the loop unrolled: one scope per call
    assert ("np.exp", ("block", "attn", "softmax")) in got
    assert ("np.matmul", ("block", "attn")) in got and ("np.add", ("block",)) in got
    # the second call of block is a scope of its own, and ops of the traced function itself are at the top
    assert ("np.exp", ("block_1", "attn", "softmax")) in got and ("np.add", ("block_1",)) in got
    assert ("np.tanh", ()) in got
    assert [s for n, s in got if n == "np.exp"] == [("block", "attn", "softmax"), ("block_1", "attn", "softmax")]


def test_a_captured_loop_body_records_the_call_stack_without_the_converted_code():
    program = jl.trace(model, X)
    (loop,) = [op for op in program.body.ops if op.name == "scf.for"]
    assert loop.loc.scope == () and loop.loc.line == model.__code__.co_firstlineno + 1
    body = [(op.name, op.loc.scope) for op in loop.regions[0].blocks[0].ops if op.loc is not None]
    assert ("np.exp", ("block", "attn", "softmax")) in body and ("np.add", ("block",)) in body


def stencil_rows(x):
    out = np.zeros((3, 4), np.float32)
    for i in range(3):
        for j in range(2):
            out[i, j] = 0.0                     # one instruction per iteration
            out[i] = out[i] + x[j]
    k = 0
    while k < 2:
        out = out * 2
        k += 1
    return out + sum(np.tanh(out[r]) for r in range(2))


def only_inner_loop(x):
    for _ in range(2):
        for j in range(3):
            x = x + j
    return x


def test_loop_iterations_are_scopes_of_the_ops_their_body_records():
    line = stencil_rows.__code__.co_firstlineno
    outer, inner, loop = f"for L{line + 2}", f"for L{line + 3}", f"while L{line + 7}"
    got = scopes_of(jl.trace(stencil_rows, X, capture_loops=False))      # scopes of unrolled loops
    writes = [s for n, s in got if n == "np.update_slice"]
    assert writes == [(outer, f"#{i}", inner, f"#{j}") for i in range(3) for j in range(2) for _ in range(2)]
    assert [s for n, s in got if n == "np.mul"] == [(loop, "#0"), (loop, "#1")]
    assert [s for n, s in got if n == "np.tanh"] == [(f"for L{line + 10}", "#0"), (f"for L{line + 10}", "#1")]
    line = only_inner_loop.__code__.co_firstlineno
    adds = [s for n, s in scopes_of(jl.trace(only_inner_loop, X, capture_loops=False)) if n == "np.add"]
    assert adds == [(f"for L{line + 1}", f"#{i}", f"for L{line + 2}", f"#{j}") for i in range(2) for j in range(3)]


def test_a_call_inside_a_loop_is_its_own_numbered_scope():
    got = scopes_of(jl.trace(model, X, capture_loops=False))
    assert not any(s and s[0].startswith("for ") for _, s in got)


def test_scopes_print_and_parse_back():
    program = jl.trace(model, X, capture_loops=False)
    text = jl.ir.print_program(program, locs=True)
    assert 'scope ["block_1", "attn", "softmax"]' in text
    again = jl.parse(text)
    assert jl.ir.print_program(again, locs=True) == text
    assert scopes_of(again) == [(n, s) for n, s in scopes_of(program)]


def test_a_jitted_function_called_inside_a_trace_keeps_the_caller_scopes():
    inner = jl.jit(softmax)

    def f(x):
        return inner(x) * 2.0

    got = scopes_of(jl.trace(f, X))
    assert ("np.exp", ("softmax",)) in got and ("np.mul", ()) in got


def _conv_model(names: list[str], weights: list[str]) -> onnx.ModelProto:
    """A chain of Conv (with weights named `weights`) then Relu, nodes named `names`."""
    nodes, inits, prev = [], [], "x"
    for i, (name, w) in enumerate(zip(names, weights)):
        inits.append(helper.make_tensor(w, TensorProto.FLOAT, [2, 2, 1, 1], np.ones(4, np.float32)))
        nodes.append(helper.make_node("Conv", [prev, w], [f"c{i}"], name=name))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=""))
        prev = f"r{i}"
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3, 3])],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [1, 2, 3, 3])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_onnx_node_names_with_namespaces_give_the_scope():
    m = _conv_model(["res5_0/branch2a/conv", "res5_0/branch2b/conv"], ["wa", "wb"])
    assert node_scopes(m.graph)[0] == ("res5_0", "branch2a")
    program = jl.onnx.load(m)
    convs = [op.loc for op in program.body.ops if op.name == "np.conv2d"]
    assert [loc.scope for loc in convs] == [("res5_0", "branch2a"), ("res5_0", "branch2b")]
    assert convs[0].function == "Conv node 'res5_0/branch2a/conv'"


def test_onnx_scopes_are_recovered_from_weight_name_prefixes():
    blocks = [f"res{s}_{b}_branch2{c}" for s in (2, 3) for b in (0, 1) for c in "abc"]
    m = _conv_model([f"n{i}" for i in range(len(blocks))], [f"gpu_0/{b}_w_0" for b in blocks])
    scopes = node_scopes(m.graph)
    # gpu_0 (every stem's) is dropped; a Relu takes its producer's scope; numbers stay with their level;
    # a block of two nodes per branch is split into branches (one of at most onnx.scopes.SMALL would not be)
    assert scopes[0] == scopes[1] == ("res2_0", "branch2a")
    assert scopes[-2] == ("res3_1", "branch2c")
    assert labels("gpu_0/res2_0_branch2a_w_0") == ["gpu_0", "res2_0", "branch2a", "w_0"]


def test_a_node_named_after_part_of_its_producer_follows_it():
    # caffe2's stem: conv1, then its batch norm `res_conv1_bn`, then the blocks; no scope `res` for the norm
    blocks = ["conv1", "res_conv1_bn"] + [f"res2_{b}_branch2{c}" for b in (0, 1) for c in "abc"]
    m = _conv_model([f"n{i}" for i in range(len(blocks))], [f"gpu_0/{b}_w_0" for b in blocks])
    scopes = node_scopes(m.graph)
    assert scopes[:4] == [("conv1",)] * 4 and scopes[4] == ("res2_0", "branch2a")


def test_light_resnet50_opens_at_its_stages_and_blocks():
    path = os.path.join(os.path.dirname(onnx.__file__), "backend/test/data/light/light_resnet50.onnx")
    if not os.path.exists(path):
        pytest.skip("the onnx package ships no light ResNet-50")
    program = jl.onnx.load(path)
    tree, _ = scope_tree(snapshot(program))
    top = tree[""]["children"]
    assert "res2_0" in top and "res5_2" in top and len(top) <= 30
    assert "res" not in top and tree["conv1"]["op_count"] >= 3        # the stem: conv, its norm, relu, pool
    assert "res5_0/branch2b" in tree and tree["res5_0"]["op_count"] > 10
    # weights (initializers, no scope of their own) sit where they are read, not all at the root
    assert len(tree[""]["ops"]) < 10


def test_the_explorer_model_has_paths_groups_and_bookkeeping():
    exe = jl.compile(jl.trace(model, X, capture_loops=False), level="O1", target="cpu")   # the explorer draws no region yet
    data = from_object(exe).build()
    ops, tree = data["ops"], data["scopes"]
    grouped = [o for o in ops.values() if o["group"] is not None and o["name"] != "jit.group"]
    assert grouped and all(o["path"].split("/")[-1] == f"group {o['group']}" for o in grouped)
    exp = next(o for o in ops.values() if o["name"] == "np.exp")
    assert exp["scope"] == ["block", "attn", "softmax"]
    assert tree[exp["path"]]["kind"] == "group" and exp["path"].startswith("block/")
    mem = [o for o in ops.values() if o["name"].startswith("mem.")]
    assert mem and all(o["bookkeeping"] for o in mem) and not exp["bookkeeping"]
    # counts add up: every counted op is in exactly one leaf, each scope sums its children and own ops
    for path, node in tree.items():
        own = sum(1 for uid in node["ops"] if not ops[str(uid)]["bookkeeping"]
                  and ops[str(uid)]["name"] not in ("jit.group", "np.weight", "np.constant"))
        assert node["op_count"] == own + sum(tree[c]["op_count"] for c in node["children"]), path
    # buffers say which op's scope and line made them
    exp_buffer = next(b for b in data["memory"]["buffers"] if b["producer"] == exp["uid"] or
                      b["producer"] == next(int(u) for u, o in ops.items() if o["name"] == "jit.group"
                                            and o["group"] == exp["group"]))
    assert exp_buffer["path"] == exp["path"] and "test_scopes.py" in exp_buffer["loc"]
    # bytes of the buffers each scope made: the root holds every owning buffer of the plan
    plan = exe.report.memory
    assert tree[""]["bytes"] == sum(b.bytes for b in plan.buffers if b.alias_of is None and b.producer is not None)


def test_the_drawable_graph_is_data_the_hierarchy_can_collapse():
    exe = jl.compile(jl.trace(model, X, capture_loops=False), level="O1", target="cpu")   # the explorer draws no region yet
    data = from_object(exe).build()
    view = data["graph"]["view"]
    nodes = {i: {"kind": kind, "uid": int(i[3:]) if kind == "op" else None}
             for i, _label, kind, _group, _classes, _region in view["nodes"]}
    assert all(str(n["uid"]) in data["ops"] for n in nodes.values() if n["kind"] == "op")
    assert all(a in nodes and b in nodes for a, b in view["edges"])
    # collapsed to the top level, block feeds block_1 and block_1 feeds the tanh at the top
    top = {i: (data["ops"][str(n["uid"])]["path"].split("/")[0] if n["kind"] == "op" else i) for i, n in nodes.items()}
    edges = {(top[a], top[b]) for a, b in view["edges"] if top[a] != top[b]}
    assert ("block", "block_1") in edges and ("in_x", "block") in edges


def layer_norm(x):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5)


def attention(x, w):
    q, k, v = x @ w[0], x @ w[1], x @ w[2]
    return softmax(q @ k.T) @ v


def mlp(x, w):
    return np.maximum(x @ w[3], 0) @ w[4]


def layer(x, w):
    x = x + attention(layer_norm(x), w)
    return x + mlp(layer_norm(x), w)


def test_a_twelve_layer_transformer_opens_at_its_layers():
    rng = np.random.default_rng(0)
    weights = [rng.standard_normal((5, 8, 8)).astype(np.float32) for _ in range(12)]

    def encoder(x):
        for w in weights:
            x = layer(x, w)
        return layer_norm(x)

    tree, _ = scope_tree(snapshot(jl.trace(encoder, np.ones((4, 8), np.float32))))
    top = tree[""]["children"]
    assert top == ["layer"] + [f"layer_{i}" for i in range(1, 12)] + ["layer_norm"]
    assert tree["layer_3"]["children"] == ["layer_3/layer_norm", "layer_3/attention", "layer_3/layer_norm_1",
                                           "layer_3/mlp"]
    assert tree["layer_3/attention"]["children"] == ["layer_3/attention/softmax"]


def test_compare_columns_carry_per_scope_figures_and_profiled_time():
    program = jl.trace(model, X, capture_loops=False)       # scopes per unrolled call of block
    o1 = jl.compile(program, level="O1", target="cpu")
    o0 = jl.compile(program, level="O0")
    record = jl.profile(o1, X, repeats=2)
    columns = jl.explore.compare(o0, o1).data["compare"]["columns"]
    assert columns[1]["run_seconds"] == record["total"]["median"] and columns[0]["run_seconds"] is None
    assert "args=" in columns[0]["time_note"] and columns[1]["time_note"] is None
    blocks = columns[1]["scopes"]
    assert blocks["block"]["groups"] >= 1 and blocks["block"]["seconds"] > 0
    assert columns[0]["scopes"]["block"]["groups"] == 0
    # O0 plans no memory: its bytes are unknown ("–" on the page), not zero
    assert columns[0]["scopes"]["block"]["peak_bytes"] is None and columns[0]["scopes"][""]["bytes"] is None
    assert blocks["block"]["peak_bytes"] is not None
    assert blocks["block"]["op_count"] > 0 and "block/attn" in blocks


def test_compare_given_inputs_profiles_each_side_jitted_functions_with_their_pytrees_too():
    def step(p, x):
        return np.tanh(x @ p["w"]).sum()

    p, x = {"w": np.ones((16, 8), np.float32)}, np.ones((4, 16), np.float32)
    a, b = jl.jit(step, level="O0"), jl.jit(step, level="O1")
    a(p, x), b(p, x)
    columns = jl.explore.compare(a, b, args=(p, x), repeats=2).data["compare"]["columns"]
    for c, f in zip(columns, (a, b)):
        assert c["run_seconds"] == f.last.report.profile["total"]["median"] > 0 and c["time_note"] is None
    assert columns[1]["scopes"][""]["seconds"] > 0
    program = jl.trace(step, p, x)
    columns = jl.explore.compare(program, b, args=(p, x), repeats=1).data["compare"]["columns"]
    assert "a Program does not run" in columns[0]["time_note"] and columns[1]["run_seconds"] > 0


def _exp_helper(x):
    return np.exp(x)


def test_a_group_holding_a_top_level_op_sits_at_the_top():
    exe = jl.compile(jl.trace(lambda x: _exp_helper(x) + 1.0, np.ones((4, 4), np.float32)), level="O1")
    tree = scope_tree(exe.report.graph, exe.report.memory)[0]
    assert "group 0" in tree and not any(k.startswith("_exp_helper/group") for k in tree)

"""Loops and branches in the explorer's data: a control-flow op is one box holding its regions' ops,
each drawn once, with its trip count; its regions' ops are its sub-steps, and its time per iteration is
its profiled time over its trips. Checked against the compiled program's own regions (the IR), on a
traced heat stencil and an imported ONNX Loop holding an If (tests/onnx builders)."""

import numpy as np
import pytest

import jitlab as jl
from jitlab.explore import model
from jitlab.report import LoopRecord
from tests.onnx.test_control_flow import early_exit_loop, nested_if_in_loop


def heat(u, n):
    return jl.fori_loop(0, n, lambda i, u: u + 0.1 * (np.roll(u, 1) - 2 * u + np.roll(u, -1)), u)


def nested(x, n):
    """An outer loop whose body runs an inner 3-step loop and a branch."""
    def outer(i, x):
        x = jl.fori_loop(0, 3, lambda j, y: y * 0.5 + 1.0, x)
        return jl.cond(x.sum() > 0, lambda a: a - 1.0, lambda a: -a, x)
    return jl.fori_loop(0, n, outer, x)


def compiled(fn, *args, level="O0"):
    f = jl.jit(fn, level=level)
    np.testing.assert_allclose(f(*args), jl.jit(fn, level="O0")(*args) if level != "O0" else fn(*args), rtol=1e-6)
    return f.last


def region_ops(program, name):
    """{op uid: [uids of the ops of each region]} for every `name` op of the program, from its IR."""
    skip = ("np.constant", "np.weight", "scf.yield", "scf.condition")
    return {op.uid: [[o.uid for o in region.blocks[0].ops if o.name not in skip and not o.name.startswith("mem.")]
                     for region in op.regions] for op in program.walk() if op.name == name}


def boxes(data):
    """{box id: [node ids drawn in it]} of the graph view."""
    out = {}
    for node_id, _label, _kind, _group, _classes, region in data["graph"]["view"]["nodes"]:
        out.setdefault(region, []).append(node_id)
    return out


def test_a_loop_is_one_box_with_its_trip_count_holding_its_body_once():
    u = np.random.default_rng(0).standard_normal(32).astype(np.float32)
    exe = compiled(heat, u, 7)
    data = model.build(exe.report)
    (uid, (body,)), = region_ops(exe.program, "scf.for").items()
    box = f"lp_{uid}"
    assert data["graph"]["view"]["regions"][box] == {"uid": uid, "op": "scf.for", "kind": "loop", "label": "for × 7",
                                                     "parent": None, "trips": 7}
    drawn = boxes(data)[box]
    assert sorted(drawn) == sorted([f"op_{uid}", f"end_{uid}_0"] + [f"op_{u}" for u in body])
    assert data["loops"][str(uid)]["regions"] == [{"name": "body", "steps": body}]
    edges = set(map(tuple, data["graph"]["view"]["edges"]))
    assert ("in_u", f"op_{uid}") in edges and (f"end_{uid}_0", "out_0") in edges


def test_a_traced_trip_count_is_named_by_its_value():
    exe = compiled(lambda u, n: heat(u, n[()]), np.ones(8, np.float32), np.array(4))
    (loop,) = model.build(exe.report)["loops"].values()
    assert loop["trips"] == "%n" and loop["label"] == "for × %n" and loop["seconds_per_iteration"] is None


def test_nested_loops_and_a_branch_nest_as_boxes():
    exe = compiled(nested, np.linspace(-1, 1, 6).astype(np.float32), 4)
    regions = model.build(exe.report)["graph"]["view"]["regions"]
    loops = region_ops(exe.program, "scf.for")
    (branch, (then, other)), = region_ops(exe.program, "scf.if").items()
    outer = next(u for u, (body,) in loops.items() if branch in body)
    inner = next(u for u in loops if u != outer)
    assert regions[f"lp_{inner}"]["parent"] == regions[f"lp_{branch}"]["parent"] == f"lp_{outer}"
    assert (regions[f"lp_{outer}"]["trips"], regions[f"lp_{inner}"]["trips"]) == (4, 3)
    assert {k: regions[f"rg_{branch}_{r}"]["label"] for r, k in enumerate(("then", "else"))} == {"then": "then",
                                                                                             "else": "else"}
    drawn = boxes(model.build(exe.report))
    assert {f"op_{u}" for u in then} <= set(drawn[f"rg_{branch}_0"])
    assert {f"op_{u}" for u in other} <= set(drawn[f"rg_{branch}_1"])


def test_an_onnx_loop_holding_an_if_draws_the_if_inside_the_loop_with_both_branches():
    program = jl.onnx.load(nested_if_in_loop())
    exe = jl.compile(program, level="O0")
    regions = model.build(exe.report)["graph"]["view"]["regions"]
    (loop,) = [b for b in regions.values() if b["op"] == "scf.for"]
    (branch,) = [b for b in regions.values() if b["kind"] == "branch"]
    assert loop["trips"] == "%M" and branch["parent"] == f"lp_{loop['uid']}"
    (uid, (then, other)), = region_ops(exe.program, "scf.if").items()
    drawn = boxes(model.build(exe.report))
    assert [regions[f"rg_{uid}_{r}"]["label"] for r in (0, 1)] == ["then", "else"]
    assert {f"op_{u}" for u in then} | {f"end_{uid}_0"} == set(drawn[f"rg_{uid}_0"])
    assert {f"op_{u}" for u in other} | {f"end_{uid}_1"} == set(drawn[f"rg_{uid}_1"])


def test_a_pass_that_rewrites_a_body_shows_it_in_the_loop_box_of_its_diff_and_time_per_iteration():
    u = np.random.default_rng(1).standard_normal(16).astype(np.float32)
    exe = jl.compile(jl.trace(heat, u, 5), level="O0", passes="canonicalize")
    np.testing.assert_allclose(exe(u)[0], heat(u, 5), rtol=1e-6)
    jl.profile(exe, u, repeats=2)
    data = model.build(exe.report)
    (uid, (body,)), = region_ops(exe.program, "scf.for").items()
    (record,) = exe.report.passes
    made = {u for rw in record.rewrites for u in rw.created} & set(body)
    marked = {node[0]: (node[4], node[5]) for node in data["passes"][0]["view"]["nodes"]}
    assert made and all(marked[f"op_{u}"] == (["added"], f"lp_{uid}") for u in made)
    loop = data["loops"][str(uid)]
    assert loop["seconds"] == pytest.approx(sum(s["median"] for s in exe.report.profile["steps"] if s["uid"] == uid))
    assert loop["seconds_per_iteration"] == pytest.approx(loop["seconds"] / 5)


@pytest.mark.slow
def test_at_o1_the_schedule_runs_the_loop_as_one_step_and_lists_its_body_as_sub_steps():
    u = np.random.default_rng(1).standard_normal(16).astype(np.float32)
    exe = compiled(heat, u, 5, level="O1")
    data = model.build(exe.report)
    (uid, (body,)), = region_ops(exe.program, "scf.for").items()
    assert uid in data["schedule"]["order"] and not set(body) & set(data["schedule"]["order"])
    assert data["loops"][str(uid)]["regions"] == [{"name": "body", "steps": body}]
    made = [r.type.nbytes() for op in exe.program.walk() if op.uid in body for r in op.results]
    assert data["loops"][str(uid)]["iteration_values"] == len(made)
    assert data["loops"][str(uid)]["iteration_bytes"] == sum(made)
    (record,) = exe.report.loops                      # the native loop's own buffers, exact
    assert record.native and data["loops"][str(uid)]["runs"] == "native"
    assert data["loops"][str(uid)]["buffer_bytes"] == record.iteration_bytes == sum(b["bytes"] for b in record.buffers)
    assert 0 < record.iteration_bytes <= sum(made) + 2 * u.nbytes


def test_each_loop_says_how_the_backend_runs_it():
    u = np.random.default_rng(1).standard_normal(16).astype(np.float32)
    exe = compiled(heat, u, 5)
    (uid, _), = region_ops(exe.program, "scf.for").items()
    assert model.build(exe.report)["loops"][str(uid)]["runs"] is None        # O0 keeps no record
    exe.report.loops = [LoopRecord(uid=uid, op="scf.for", native=False, reason="np.sort (%12) runs on the host")]
    loop = model.build(exe.report)["loops"][str(uid)]
    assert (loop["runs"], loop["buffer_bytes"], loop["buffer_count"]) == ("np.sort (%12) runs on the host", None, None)
    exe.report.loops = [LoopRecord(uid=uid, op="scf.for", native=True, iteration_bytes=192,
                                   buffers=[{"values": ["%3"], "bytes": 64}] * 3)]
    loop = model.build(exe.report)["loops"][str(uid)]
    assert (loop["runs"], loop["buffer_bytes"], loop["buffer_count"]) == ("native", 192, 3)


def test_a_while_loop_opens_onto_its_condition_and_body():
    exe = jl.compile(jl.onnx.load(early_exit_loop()), level="O0")
    data = model.build(exe.report)
    (uid, (before, after)), = region_ops(exe.program, "scf.while").items()
    regions, drawn = data["graph"]["view"]["regions"], boxes(data)
    assert regions[f"lp_{uid}"]["label"] == "while" and regions[f"lp_{uid}"]["trips"] is None
    assert [regions[f"rg_{uid}_{r}"]["label"] for r in (0, 1)] == ["condition", "body"]
    assert {f"op_{u}" for u in before} | {f"end_{uid}_0"} == set(drawn[f"rg_{uid}_0"])
    assert {f"op_{u}" for u in after} | {f"end_{uid}_1"} == set(drawn[f"rg_{uid}_1"])
    assert data["loops"][str(uid)]["regions"] == [{"name": "condition", "steps": before}, {"name": "body", "steps": after}]

"""jl.explore.session(): every compile of the process in order, with its reason, time, cache state
and its own page, written beside a saved index."""

import gc

import numpy as np

import jitlab as jl
from jitlab.explore.html import read_state
from jitlab.runtime import compile_log
from tests.explore.test_schema import SCHEMA, errors


def scaled(x):
    return np.tanh(x) * 3.0


def session_errors(rows) -> list[str]:
    """What the schema's `session` part finds wrong in an index's rows."""
    # imported here, not at collection (tests/test_notebooks.py says why)
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(SCHEMA["properties"]["session"])
    return [e.message for e in validator.iter_errors({"compiles": rows})]


def ours(rows, start):
    return [r for r in rows if r["index"] >= start]


def test_the_index_lists_each_compile_and_recompile_with_why():
    start = len(compile_log.entries()) and compile_log.entries()[-1].index + 1
    f = jl.jit(scaled, target="cpu")
    f(np.ones((4,), np.float32))
    f(np.ones((6,), np.float32))
    f(np.ones((4,), np.float32))                   # cached: no compile
    exe = jl.compile(jl.trace(np.exp, np.ones(3, np.float32)), level="O2", target="cpu")
    rows = ours(jl.explore.session().data["session"]["compiles"], start)
    assert [(r["name"], r["reason"]) for r in rows] == [
        ("scaled", "first call"), ("scaled", "x: shape f32[4] -> f32[6]"), ("@exp", "jl.compile")]
    # numbered by function over the whole process: other tests in this worker may have compiled a `scaled`
    assert rows[1]["nth"] == rows[0]["nth"] + 1 and rows[2]["nth"] >= 1
    assert [r["level"] for r in rows] == ["O1", "O1", "O2"] and rows[1]["signature"] == {"x": "f32[6]"}
    assert [r["seconds"] for r in rows[:2]] == [c.seconds for c in f.compiles]
    assert rows[2]["seconds"] == exe.report.timing.total
    assert rows[0]["started"] <= rows[1]["started"] <= rows[2]["started"]
    hits = sum(k.cache_hit for k in exe.report.kernels)
    assert rows[2]["cache"]["kernel_hits"] == hits and rows[2]["cache"]["kernels"] == len(exe.report.kernels)
    assert session_errors(rows) == []


def test_a_saved_index_links_each_living_compile_to_its_page(tmp_path):
    start = len(compile_log.entries()) and compile_log.entries()[-1].index + 1
    f = jl.jit(scaled, target="cpu")
    f(np.ones((2, 2), np.float32))
    jl.compile(jl.trace(np.exp, np.ones(3, np.float32)), level="O1", target="cpu")    # dropped at once
    gc.collect()
    index = tmp_path / "session.html"
    jl.explore.session().save(index)
    rows = ours(read_state(index.read_text())["data"]["session"]["compiles"], start)
    kept, dropped = rows
    assert dropped["page"] is None and not dropped["alive"]
    page = read_state((tmp_path / kept["page"]).read_text())["data"]
    assert page["title"] == f"#{kept['index']} scaled O1 cpu" and page["static"]
    assert page["ops"] and errors(page) == []
    assert session_errors(rows) == []


def test_a_notebook_index_builds_a_compile_s_page_on_request():
    f = jl.jit(scaled, target="cpu")
    f(np.ones((3,), np.float32))
    widget = jl.explore.session()
    index = widget.data["session"]["compiles"][-1]["index"]
    reply = widget.session.handle({"type": "page", "index": index})
    assert reply["index"] == index and reply["data"]["title"].startswith(f"#{index} scaled")
    assert reply["data"]["groups"] and reply["data"]["static"]
    missing = widget.session.handle({"type": "page", "index": -5})
    assert "no compile #-5" in missing["error"]

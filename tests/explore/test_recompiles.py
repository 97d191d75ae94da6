"""jl.explore(jitted_fn) lists every signature the function compiled and why each recompile happened."""

import numpy as np

import jitlab as jl
from jitlab.frontend.recompiles import differences


def scaled(x, k):
    return np.tanh(x) * k


def test_each_recompile_names_the_input_that_changed():
    f = jl.jit(scaled, target="cpu", static_argnums=(1,))
    f(np.ones((4, 3), np.float32), 2)
    f(np.ones((8, 3), np.float32), 2)
    f(np.ones((8, 3), np.float64), 2)
    f(np.ones((8, 3), np.float64), 3)
    f(np.ones((4, 3), np.float32), 2)            # cached: no new compile, but the one shown is the first
    got = jl.explore(f).data["recompiles"]
    assert [r["index"] for r in got] == [0, 1, 2, 3] and len(got) == f.cache_size
    assert [r["reason"] for r in got] == ["first call", "x: shape f32[4,3] -> f32[8,3]",
                                          "x: dtype f32[8,3] -> f64[8,3]", "k: value 2 -> 3"]
    assert got[0]["signature"] == {"x": "f32[4,3]", "k": "2"}
    assert [r["current"] for r in got] == [True, False, False, False]
    assert all(r["seconds"] > 0 for r in got)
    assert got[1]["changed"] == [{"input": "x", "what": "shape", "before": "f32[4,3]", "after": "f32[8,3]"}]


def test_an_executable_has_no_recompiles():
    exe = jl.compile(jl.trace(np.tanh, np.ones(3, np.float32)), level="O1", target="cpu")
    assert jl.explore(exe).data["recompiles"] == []


def test_differences_between_signatures():
    f32 = jl.TensorType((2, 3), "float32")
    f64 = jl.TensorType((4, 3), "float64")
    assert differences({"x": f32}, {"x": f64}) == [
        {"input": "x", "what": "dtype and shape", "before": "f32[2,3]", "after": "f64[4,3]"}]
    assert differences({"x": f32}, {"x": f32, "y": f32})[0]["what"] == "added"
    assert differences({"x": f32, "y": f32}, {"x": f32})[0]["what"] == "removed"

"""ONNX models in the bench: onnx's light ResNet-50 (batch 1, float32, the backend test
runner's dummy input) at jitlab's levels and with onnxruntime, side by side.

Latency is the median of interleaved repeats in this process. Compile time is measured in
fresh processes so that nothing compiled earlier in this one helps: cold with an empty
JITLAB_CACHE_DIR, then warm with the same folder, which the cold run filled (onnx import,
the passes' result from the executable cache, loading the cached kernels). With --quick the
workload is a small generated convnet of the same op types, so the tests can run the whole
path in seconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np

from ..timing import interleaved_medians
from .startup import BREAKDOWN_HELP, breakdown, breakdown_line

NAMES = ("resnet50",)
RTOL, ATOL = 1e-3, 1e-5


def light_model_path(name: str) -> str:
    """Where the onnx package keeps its light model `name`."""
    import onnx

    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light", f"light_{name}.onnx")


def tiny_convnet(path: str) -> str:
    """Writes a small Conv-BatchNorm-Relu-pool-Gemm-Softmax model (ResNet's op types) to `path`."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = {"w": rng.standard_normal((8, 3, 3, 3)), "scale": rng.random(8) + 0.5, "bias": rng.standard_normal(8),
               "mean": rng.standard_normal(8), "var": rng.random(8) + 0.5, "fc": rng.standard_normal((8, 10)),
               "fcb": rng.standard_normal(10)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["n"]),
             helper.make_node("Relu", ["n"], ["r"]), helper.make_node("GlobalAveragePool", ["r"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]), helper.make_node("Gemm", ["f", "fc", "fcb"], ["g"]),
             helper.make_node("Softmax", ["g"], ["y"])]
    graph = helper.make_graph(nodes, "tiny_convnet",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
                              [numpy_helper.from_array(a.astype(np.float32), n) for n, a in weights.items()])
    # IR version 8 (onnx 1.10): every onnxruntime still in use reads it.
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return path


def dummy_feed(path: str) -> dict[str, np.ndarray]:
    """The inputs onnx's backend test runner feeds the model: its dummy input rule."""
    import onnx
    from onnx.backend.test.runner import Runner

    m = onnx.load(path)
    initializers = {t.name for t in m.graph.initializer}
    return {vi.name: Runner.generate_dummy_data(vi) for vi in m.graph.input if vi.name not in initializers}


def compile_in_fresh_process(path: str, level: str, cache_dir: str) -> dict:
    """Seconds a new process takes to load `path` and compile it at `level` with this cache folder
    ({"seconds": s, "hit": whether the executable cache gave the passes' result})."""
    env = {**os.environ, "JITLAB_CACHE_DIR": cache_dir}
    code = "from jitlab.bench.onnx_models import _compile_main; _compile_main()"
    done = subprocess.run([sys.executable, "-c", code, path, level], env=env, capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"compiling {os.path.basename(path)} at {level} failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _compile_main() -> None:
    """The child of compile_in_fresh_process: prints {"seconds": ..., "hit", "breakdown"} as its last line."""
    import jitlab as jl

    path, level = sys.argv[1], sys.argv[2]
    start = time.perf_counter()
    exe = jl.compile(jl.onnx.load(path), level=level)
    cache = exe.report.executable_cache
    print(json.dumps({"seconds": time.perf_counter() - start, "hit": None if cache is None else cache.hit,
                      "breakdown": breakdown(exe.report)}))


def _jitlab(path: str, level: str, feed: dict, cache_dir: str) -> tuple[Callable, dict]:
    """A call of the model compiled at `level` (from the warm cache) and its compile figures."""
    import jitlab as jl

    cold = compile_in_fresh_process(path, level, cache_dir)
    warm = compile_in_fresh_process(path, level, cache_dir)
    previous = os.environ.get("JITLAB_CACHE_DIR")
    os.environ["JITLAB_CACHE_DIR"] = cache_dir
    try:
        exe = jl.compile(jl.onnx.load(path), level=level)
    finally:
        os.environ.pop("JITLAB_CACHE_DIR") if previous is None else os.environ.update(JITLAB_CACHE_DIR=previous)
    args = list(feed.values())
    memory = exe.report.memory
    info = {"compile_cold_s": cold["seconds"], "compile_warm_s": warm["seconds"], "warm_hit": warm["hit"],
            "cold_breakdown": cold.get("breakdown", {}), "warm_breakdown": warm.get("breakdown", {}),
            "peak_bytes": memory.peak_bytes if memory is not None else None}
    return (lambda: exe(*args)[0]), info


def _onnxruntime(path: str, feed: dict) -> Callable:
    """onnxruntime's session, its idle threads told not to spin: by default they spin on after each
    run and take the cores from the runner timed next in the interleaved rounds (jitlab O1 on
    ResNet-50 took 167 ms median after a spinning session, 148 ms after one that does not spin,
    while onnxruntime's own time stayed 66-67 ms either way: docs/performance.md)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    return lambda: session.run(None, feed)[0]


def _reference(path: str, feed: dict) -> np.ndarray:
    from onnx.reference import ReferenceEvaluator

    return np.asarray(ReferenceEvaluator(path).run(None, feed)[0])


def _check(call: Callable, expected: np.ndarray) -> dict:
    """Runs the call once (timed) and compares it with onnx's reference evaluator."""
    try:
        start = time.perf_counter()
        out = np.asarray(call())
        first = time.perf_counter() - start
    except Exception as e:  # a runner failing must not stop the bench; its error is reported
        return {"status": "error", "error": f"{type(e).__name__}: {e}"}
    if out.shape != expected.shape or not np.allclose(out, expected, rtol=RTOL, atol=ATOL):
        return {"status": "mismatch", "error": "differs from onnx's reference evaluator"}
    return {"status": "ok", "first_call_s": first}


def run_model(name: str, levels: list[str], repeats: int, quick: bool) -> dict:
    """Latency of `name` on onnxruntime and at each jitlab level, with compile times."""
    import importlib.util

    with tempfile.TemporaryDirectory(prefix="jitlab-bench-onnx-") as tmp:
        path = tiny_convnet(os.path.join(tmp, "tiny.onnx")) if quick else light_model_path(name)
        feed = dummy_feed(path)
        expected = _reference(path, feed)
        calls: dict[str, Callable] = {}
        results: dict[str, dict] = {}
        if importlib.util.find_spec("onnxruntime") is None:
            results["onnxruntime"] = {"status": "not installed"}
        else:
            try:
                calls["onnxruntime"], results["onnxruntime"] = _onnxruntime(path, feed), {}
            except Exception as e:  # a peer failing must not stop the bench; its error is reported
                results["onnxruntime"] = {"status": "error", "error": f"{type(e).__name__}: {e}"}
        for level in levels:
            try:
                calls[f"jitlab {level}"], results[f"jitlab {level}"] = _jitlab(path, level, feed, f"{tmp}/{level}")
            except Exception as e:  # reported in the table, as a failing peer is
                results[f"jitlab {level}"] = {"status": "error", "error": f"{type(e).__name__}: {e}"}
        for runner, call in calls.items():
            results[runner] = {**results.get(runner, {}), **_check(call, expected)}
        ready = {r: c for r, c in calls.items() if results[r]["status"] == "ok"}
        medians = interleaved_medians(ready, repeats) if ready else {}
    base = medians.get("onnxruntime")
    for runner, seconds in medians.items():
        results[runner].update(ms=seconds * 1e3, vs_onnxruntime=(seconds / base) if base else None)
    size = "x".join(map(str, next(iter(feed.values())).shape))
    return {"name": "tiny_convnet" if quick else name, "size": size, "results": results}


def format_models(models: list[dict]) -> list[str]:
    """The table of the ONNX models: median ms and the ratio to onnxruntime, compile times."""
    lines = ["", "ONNX models: median ms (time / onnxruntime's; the target is <= 2x); compile s in a fresh process",
             "| model | input | runner | ms | vs onnxruntime | compile cold s | compile warm s | peak memory |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for m in models:
        for runner, r in m["results"].items():
            if r["status"] != "ok":
                lines.append(f"| {m['name']} | {m['size']} | {runner} | {r['status']} | | | | |")
                continue
            ratio = f"{r['vs_onnxruntime']:.2f}x" if r.get("vs_onnxruntime") else "-"
            cold, warm = (f"{r[k]:.2f}" if k in r else "-" for k in ("compile_cold_s", "compile_warm_s"))
            warm += {True: " (exe cache hit)", False: " (exe cache miss)"}.get(r.get("warm_hit"), "")
            peak = f"{r['peak_bytes'] / 2**20:.1f} MiB" if r.get("peak_bytes") is not None else "-"
            lines.append(f"| {m['name']} | {m['size']} | {runner} | {r['ms']:.2f} | {ratio} | {cold} | {warm} "
                         f"| {peak} |")
    return lines + format_model_breakdowns(models)


def format_model_breakdowns(models: list[dict]) -> list[str]:
    """Where each cold and warm compile of a model went, one line each."""
    lines = [breakdown_line(f"{m['name']} / {runner} {kind}", r[f"{kind}_breakdown"]) for m in models
             for runner, r in m["results"].items() for kind in ("cold", "warm") if f"{kind}_breakdown" in r]
    return ["", f"compile breakdown, s: {BREAKDOWN_HELP}", *lines] if lines else []

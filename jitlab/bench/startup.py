"""Cold and warm starts: a new process importing jitlab and calling a suite program once.

Cold runs with an empty JITLAB_CACHE_DIR, warm with the folder the cold run filled (the
kernel cache and the executable cache), so a warm start is what a user sees rerunning a
script. Each is split into import, trace + compile, and the first call; `hit` says whether
the executable cache gave the passes' result, `breakdown` where the compile went (the report's
CompileTiming, flattened).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time


def start_in_fresh_process(name: str, level: str, target: str, quick: bool, cache_dir: str) -> dict:
    """Seconds a new process takes to import jitlab, trace and compile benchmark `name`, and call it."""
    env = {**os.environ, "JITLAB_CACHE_DIR": cache_dir}
    code = ("import time; start = time.perf_counter(); import jitlab; imported = time.perf_counter(); "
            "from jitlab.bench.startup import _child; _child(start, imported)")
    done = subprocess.run([sys.executable, "-c", code, name, level, target, "1" if quick else "0"], env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"starting {name} at {level} failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


STAGES = ("trace", "setup", "passes", "kernels")
BREAKDOWN_HELP = ("trace or model import, setup (importing the backend: numba), passes, kernels (LLVM, numba's "
                  "other passes, its type inference, readying its contexts, the kernel and numba disk caches, "
                  "writing the source), other")


def breakdown(report) -> dict[str, float]:
    """The report's CompileTiming flattened: total, the stages, then the kernels' parts summed."""
    t = report.timing
    if t is None:
        return {}
    return {"total": t.total, **{k: getattr(t, k) for k in STAGES}, **dataclasses.asdict(t.kernel_parts)}


def breakdown_line(label: str, b: dict[str, float]) -> str:
    """One compile's breakdown as a line: the stages adding up to the total, the kernels' parts in brackets."""
    if not b:
        return f"{label}: no timing recorded"
    other = b["total"] - sum(b[k] for k in STAGES)
    cache = b["kernel_cache"] + b["numba_cache_read"] + b["numba_cache_write"]
    return (f"{label}: {b['total']:.2f} = trace {b['trace']:.2f} + setup {b['setup']:.2f} + passes {b['passes']:.2f} "
            f"+ kernels {b['kernels']:.2f} (LLVM {b['llvm']:.2f}, numba other passes {b['numba_other']:.2f}, "
            f"typing {b['typing']:.2f}, numba init {b['numba_init']:.2f}, caches {cache:.2f}, "
            f"codegen {b['codegen']:.2f}) + other {other:.2f}")


def cold_and_warm(name: str, level: str, target: str, quick: bool) -> dict:
    """A cold start, then a warm one from the cache it filled: {"cold_start": {...}, "warm_start": {...}}."""
    with tempfile.TemporaryDirectory(prefix="jitlab-bench-start-") as tmp:
        cold = start_in_fresh_process(name, level, target, quick, tmp)
        warm = start_in_fresh_process(name, level, target, quick, tmp)
    return {"cold_start": cold, "warm_start": warm}


def _child(start: float, imported: float) -> None:
    """The child of start_in_fresh_process (which timed `import jitlab`): prints the phases as
    JSON on its last line."""
    import jitlab as jl
    from jitlab.backends.base import backend_for_target
    from jitlab.bench.suite import by_name

    name, level, target, quick = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
    bench = by_name([name])[0]
    inputs = bench.inputs(quick)
    begin = time.perf_counter()        # the backend's import (numba) counts: a warm start pays it
    options = {"device_outputs": True} if backend_for_target(target).device != "cpu" else {}
    fn = jl.jit(bench.fn, level=level, target=target, **options)
    exe = fn.lower(*inputs)
    compiled = time.perf_counter()
    fn(*inputs)
    called = time.perf_counter()
    cache = exe.report.executable_cache
    print(json.dumps({"import_s": imported - start, "compile_s": compiled - begin, "first_call_s": called - compiled,
                      "start_s": called - begin, "hit": None if cache is None else cache.hit,
                      "breakdown": breakdown(exe.report)}))


# The first jl.jit call in a new environment: a 2-op program, timed from the call to its result.
_FIRST = ("import json, resource, time, numpy as np, jitlab as jl; x = np.ones((64, 64), np.float32); "
          "cpu = resource.getrusage(resource.RUSAGE_SELF); start = time.perf_counter(); "
          "jl.jit(lambda x: np.tanh(x) * 2.0)(x); end = time.perf_counter(); "
          "now = resource.getrusage(resource.RUSAGE_SELF); cpu_s = now.ru_utime + now.ru_stime - cpu.ru_utime "
          "- cpu.ru_stime; print(json.dumps({'wall_s': end - start, 'cpu_s': cpu_s}))")


def first_compile() -> dict:
    """The first compiles in a new environment, each in a fresh process, wall and CPU seconds (CPU
    seconds mean more than wall ones on a loaded machine): a 2-op program's first jl.jit call and
    ResNet-50's first compile at O1, with every cache empty (numba's in folders of their own), then
    `jitlab cache warm` as scripts/bootstrap runs it and both compiles again after it, with its
    caches, as a user's first session after installing meets them."""
    from .onnx_models import light_model_path

    resnet = light_model_path("resnet50")
    with tempfile.TemporaryDirectory(prefix="jitlab-bench-first-") as tmp:
        installed = _caches(tmp, "numba", "installed")
        return {"cold": _first_call(_caches(tmp, "numba-cold", "cold")),
                "resnet50_cold": _first_model(resnet, _caches(tmp, "numba-resnet50", "resnet50")),
                "warm_command": _timed([sys.executable, "-m", "jitlab.cli", "cache", "warm"], installed),
                "warmed": _first_call(installed), "resnet50_warmed": _first_model(resnet, installed)}


def _caches(folder: str, numba: str, kernels: str) -> dict:
    """The environment with numba's cache and jitlab's in these folders of `folder`."""
    return {**os.environ, "NUMBA_CACHE_DIR": os.path.join(folder, numba),
            "JITLAB_CACHE_DIR": os.path.join(folder, kernels)}


def _first_call(env: dict) -> dict:
    done = subprocess.run([sys.executable, "-c", _FIRST], env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the first compile failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _first_model(path: str, env: dict) -> dict:
    """Wall and CPU seconds of a new process that loads the ONNX model at `path` and compiles it at O1."""
    code = "from jitlab.bench.onnx_models import _compile_main; _compile_main()"
    return _timed([sys.executable, "-c", code, path, "O1"], env)


def _timed(command: list[str], env: dict) -> dict:
    """Wall and CPU seconds of a command in a child process."""
    import resource

    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[1:])} failed: {done.stderr.strip()[-2000:]}")
    return {"wall_s": wall, "cpu_s": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime}


def format_first_compile(first: dict | None) -> list[str]:
    """The first-compile rows of the report."""
    if not first:
        return []
    rows = [("a 2-op program's first jl.jit call, empty caches", first["cold"]),
            ("ResNet-50's first compile (O1), empty caches", first["resnet50_cold"]),
            ("jitlab cache warm (scripts/bootstrap runs it)", first["warm_command"]),
            ("the 2-op program's first jl.jit call after it", first["warmed"]),
            ("ResNet-50's first compile (O1) after it", first["resnet50_warmed"])]
    return ["", "first compiles in a new environment, each in a new process (numba's caches in own folders); s",
            "| step | wall | CPU |", "| --- | --- | --- |",
            *(f"| {label} | {r['wall_s']:.2f} | {r['cpu_s']:.2f} |" for label, r in rows)]

"""`python -m jitlab.bench` (and later `jitlab bench`): runs the suite, checks every result
against numpy, prints median times with speedups over numpy and the streaming lower bounds."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import traceback

import numpy as np

from ..runtime.bounds import bandwidth
from ..timing import interleaved_medians
from ..units import format_bytes
from .harness import machine
from .loaded import NAME as LOADED
from .loaded import format_loaded, run_loaded
from .onnx_models import NAMES as ONNX_MODELS
from .onnx_models import format_models, run_model
from .peers import PEERS, Runner, jitlab_runner
from .startup import BREAKDOWN_HELP, breakdown_line, cold_and_warm, first_compile, format_first_compile
from .suite import Benchmark, by_name, flat
from .training import NAME as RECOMPUTE
from .training import format_recompute, run_recompute

LEVELS = ("O0", "O1", "O2")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="jitlab bench", description=__doc__)
    p.add_argument("--quick", action="store_true", help="small sizes and 3 repeats (a smoke run)")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    p.add_argument("--level", action="append", choices=LEVELS, help="jitlab level(s) to run (default O1 and O2)")
    p.add_argument("--target", default="cpu",
                   help="jitlab target: cpu, cuda or any backend plugin such as numexpr (default cpu)")
    p.add_argument("--peers", default=",".join(PEERS), help=f"comma-separated peers (default {','.join(PEERS)})")
    p.add_argument("--only", help="comma-separated benchmark names, ONNX models among them "
                                  f"({', '.join(ONNX_MODELS)}), {RECOMPUTE} (a training step with and "
                                  f"without recomputation) and {LOADED} (the matrix-product programs quiet and "
                                  "beside a CPU-bound process); default: all of them")
    p.add_argument("--repeats", type=int, help="interleaved repeats (default 11, 3 with --quick)")
    p.add_argument("--starts", choices=("on", "off"),
                   help="time a cold and a warm start of each program in new processes (default on, off with --quick)")
    args = p.parse_args(argv)
    args.starts = (args.starts or ("off" if args.quick else "on")) == "on"
    args.level = args.level or ["O1", "O2"]
    args.repeats = args.repeats or (3 if args.quick else 11)
    from ..backends.base import available_targets

    if args.target not in available_targets():
        p.error(f"unknown target {args.target!r}; targets are {', '.join(available_targets())}")
    unknown = [n for n in args.peers.split(",") if n and n not in PEERS]
    if unknown:
        p.error(f"unknown peer(s) {', '.join(unknown)}; peers are {', '.join(PEERS)}")
    return args


def _prepare(runner: Runner, bench: Benchmark, inputs: tuple, expected: np.ndarray) -> dict:
    """Compiles (first call timed) and checks the result against numpy; a call ready to time or a status."""
    if not runner.available():
        return {"status": "not installed"}
    try:
        prepared = runner.prepare(bench, inputs)
        start = time.perf_counter()
        result = flat(prepared.call(), prepared.to_numpy)
        first = time.perf_counter() - start
    except NotImplementedError as e:
        return {"status": "n/a", "error": str(e)}
    except Exception as e:  # a peer failing must not stop the suite; its error is reported
        return {"status": "error", "error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc(limit=3)}
    if result.shape != expected.shape or not np.allclose(result, expected, rtol=bench.rtol, atol=bench.atol):
        worst = float(np.max(np.abs(result - expected))) if result.shape == expected.shape else float("nan")
        return {"status": "mismatch", "error": f"differs from numpy (max abs diff {worst:.3g})"}
    return {"status": "ok", "call": prepared.call, "device_times": prepared.device_times, "first_call_s": first,
            **prepared.info}


def progress(line: str) -> None:
    """A line on stderr as each stage ends: a run stopped from outside still says how far it got."""
    print(f"[bench] {line}", file=sys.stderr, flush=True)


def _bound_bandwidth(target: str, host: dict[str, float]) -> tuple[float | None, str]:
    """The bandwidth lower bounds divide by, and whose: the host's measured copy rate for host
    targets; for a device target its measured device-to-device copy rate where the backend measures
    one ("device copy"), else its peak ("device"; None, and no bounds, where it does not say)."""
    from ..backends.base import backend_for_target

    backend = backend_for_target(target)
    if backend.device == "cpu":
        return max(host.values()), "host"
    measured = getattr(backend, "copy_bandwidth", lambda: None)()
    return (measured, "device copy") if measured else (backend.peak_bandwidth(), "device")


def run_benchmark(bench: Benchmark, runners: list[Runner], args, bw: float | None) -> dict:
    inputs = bench.inputs(args.quick)
    expected = flat(bench.fn(*inputs))
    results = {}
    for r in runners:
        start = time.perf_counter()
        results[r.name] = _prepare(r, bench, inputs, expected)
        progress(f"{bench.name}, {r.name}: {results[r.name]['status']} after {time.perf_counter() - start:.1f} s")
    ready = {name: r.pop("call") for name, r in results.items() if r["status"] == "ok"}
    timers = {name: r.pop("device_times") for name, r in results.items() if r["status"] == "ok"}
    medians = interleaved_medians(ready, args.repeats)
    base = medians.get("numpy")
    for name, seconds in medians.items():
        results[name].update(ms=seconds * 1e3, speedup=(base / seconds) if base else None)
    for name, timer in timers.items():
        if timer is not None:
            results[name]["device_ms"] = statistics.median(timer(args.repeats))
    if args.starts:
        for level in args.level:
            result = results[f"jitlab {level}"]
            if result["status"] == "ok":
                result.update(cold_and_warm(bench.name, level, args.target, args.quick))
    moved = bench.bytes_moved(inputs, expected)
    bound = moved / bw * 1e3 if bench.memory_bound and bw else None
    if bound:
        for name in medians:
            results[name]["vs_bound"] = results[name]["ms"] / bound
            if "device_ms" in results[name]:
                results[name]["device_vs_bound"] = results[name]["device_ms"] / bound
    return {"name": bench.name, "size": bench.size(args.quick), "bytes_moved": moved,
            "lower_bound_ms": bound, "results": results}


def call_overhead_us(level: str, target: str, repeats: int = 2000, on_device: bool = False) -> float:
    """Median microseconds of calling a cached jitted x + 1 on one float32 element; `on_device`: its
    input placed on the device and its result left there (a device target's `device_outputs`)."""
    import jitlab as jl
    from jitlab.backends.base import backend_for_target

    options = {"device_outputs": True} if on_device else {}
    fn = jl.jit(lambda x: x + 1.0, level=level, target=target, **options)
    x = np.ones(1, np.float32)
    if on_device:
        x = backend_for_target(target).copy_in(x)
    fn(x)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(x)
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e6


def run(args) -> dict:
    """The whole measurement as plain data."""
    names = args.only.split(",") if args.only else None
    models = [n for n in names if n in ONNX_MODELS] if names else list(ONNX_MODELS)
    recompute = names is None or RECOMPUTE in names
    loaded = names is None or LOADED in names
    names = [n for n in names if n not in ONNX_MODELS and n not in (RECOMPUTE, LOADED)] if names else None
    planned_levels = [lv for lv in args.level if lv != "O0"]
    runners = [PEERS[n] for n in args.peers.split(",") if n] + [jitlab_runner(lv, args.target) for lv in args.level]
    size = (64 if args.quick else 1024) << 20
    progress("measuring the host's copy bandwidth")
    bw = {"1 thread": bandwidth(size, 1), "2 threads": bandwidth(size, 2)}
    bound_bw, source = _bound_bandwidth(args.target, bw)
    benches = [] if names == [] else [run_benchmark(b, runners, args, bound_bw) for b in by_name(names, args.quick)]
    return {"quick": args.quick, "repeats": args.repeats, "target": args.target, "machine": machine(),
            "bandwidth_bytes_per_s": bw, "bound_bandwidth_bytes_per_s": bound_bw, "bound_source": source,
            **_device_figures(args),
            "benchmarks": benches,
            "call_overhead_us": {lv: call_overhead_us(lv, args.target) for lv in args.level},
            "onnx_models": [run_model(m, args.level, args.repeats, args.quick) for m in models],
            "recompute": run_recompute(planned_levels, args.repeats, args.quick, args.target)
            if recompute and planned_levels else None,
            "first_compile": first_compile() if args.starts and args.target in ("cpu", "auto") else None,
            "loaded": run_loaded(runners, _prepare, args.repeats, args.quick) if loaded else None}


def _device_figures(args) -> dict:
    """A device target's peak bandwidth and its cached-call overhead with the input and result on the device."""
    from ..backends.base import backend_for_target

    backend = backend_for_target(args.target)
    if backend.device == "cpu":
        return {}
    return {"device_peak_bandwidth_bytes_per_s": backend.peak_bandwidth(),
            "call_overhead_device_us": {lv: call_overhead_us(lv, args.target, on_device=True) for lv in args.level}}


def _cell(result: dict) -> str:
    if result["status"] != "ok":
        return result["status"]
    return f"{result['ms']:.3f} ({result['speedup']:.2f}x)" if result.get("speedup") else f"{result['ms']:.3f}"


def format_report(data: dict) -> str:
    """The tables a person reads: times with speedups over numpy, then compile and memory figures."""
    m = data["machine"]
    blas = ", ".join(f"{b.get('owner') or '?'}'s {b['internal_api']} {b['version']} kernel {b['architecture']} "
                     f"({b['num_threads']} threads)" for b in m["blas"])
    bw = ", ".join(f"{k} {v / 1e9:.1f} GB/s" for k, v in data["bandwidth_bytes_per_s"].items())
    lines = [f"jitlab bench{' --quick' if data['quick'] else ''}: target {data['target']}, "
             f"median of {data['repeats']} interleaved runs, ms (speedup over numpy)",
             f"machine: {m['cpu']}, {m['cores']} cores, load average {m['load_average']:.1f}; "
             f"numpy {m['numpy']}, numba {m['numba']}; BLAS: {blas}; env {m['env'] or '{}'}",
             f"memory bandwidth (copy, read + write): {bw}"]
    if data.get("bound_source", "host") != "host":
        lines.append("streaming lower bounds: " + _device_bound(data))
    if data["benchmarks"]:
        lines += format_suite(data["benchmarks"])
    lines += ["", "cached call overhead (x + 1 on one element): "
              + ", ".join(f"{lv} {us:.1f} us" for lv, us in data["call_overhead_us"].items())]
    if "call_overhead_device_us" in data:
        lines.append("cached call overhead, input and result on the device: "
                     + ", ".join(f"{lv} {us:.1f} us" for lv, us in data["call_overhead_device_us"].items()))
    lines += format_models(data["onnx_models"]) if data["onnx_models"] else []
    lines += format_recompute(data["recompute"]) if data.get("recompute") else []
    lines += format_first_compile(data.get("first_compile"))
    lines += format_loaded(data["loaded"]) if data.get("loaded") else []
    problems = [f"{b['name']} / {n}: {r['status']}: {r.get('error', '')}" for b in _all(data)
                for n, r in b["results"].items() if r["status"] in ("error", "mismatch")]
    return "\n".join(lines + (["", "problems:"] + problems if problems else []))


def _device_bound(data: dict) -> str:
    bound, peak = data["bound_bandwidth_bytes_per_s"], data.get("device_peak_bandwidth_bytes_per_s")
    if data["bound_source"] == "device copy":
        return (f"the device's measured copy bandwidth, {bound / 1e9:.0f} GB/s"
                + (f" (peak {peak / 1e9:.0f} GB/s)" if peak else ""))
    return f"the device's peak, {bound / 1e9:.0f} GB/s" if bound else "none (the device gives no peak bandwidth)"


def format_device_times(benchmarks: list[dict]) -> list[str]:
    """Wall and device time per call where the device was timed: what the host adds, and the kernels' speed."""
    rows = [(b, name, r) for b in benchmarks for name, r in b["results"].items() if "device_ms" in r]
    lines = ["", "wall vs device time per call, ms (device: CUDA events around the call's copies and launches; "
             "wall - device is host time), device / streaming bound for memory-bound rows",
             "| benchmark | runner | wall ms | device ms | wall - device | device / bound |",
             "| --- | --- | --- | --- | --- | --- |"]
    for b, name, r in rows:
        ratio = f"{r['device_vs_bound']:.2f}x" if "device_vs_bound" in r else "-"
        lines.append(f"| {b['name']} | {name} | {r['ms']:.3f} | {r['device_ms']:.3f} | {r['ms'] - r['device_ms']:.3f} "
                     f"| {ratio} |")
    return lines if rows else []


def format_suite(benchmarks: list[dict]) -> list[str]:
    """The suite's tables: times and speedups, compile times and peaks, memory plans."""
    names = list(benchmarks[0]["results"])
    lines = ["", "| benchmark | size | " + " | ".join(names) + " | streaming lower bound |",
             "|" + " --- |" * (len(names) + 3)]
    for b in benchmarks:
        bound = f"{b['lower_bound_ms']:.3f}" if b["lower_bound_ms"] is not None else "-"
        lines.append(f"| {b['name']} | {b['size']} | " + " | ".join(_cell(b["results"][n]) for n in names)
                     + f" | {bound} |")
    lines += format_bounds(benchmarks, names) + format_device_times(benchmarks)
    lines += ["", "| benchmark | runner | first call s | compile cold s | compile warm s | peak memory | engine ops |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for b in benchmarks:
        for name, r in b["results"].items():
            if r["status"] == "ok" and name != "numpy":
                peak = f"{r['peak_bytes'] / 2**20:.1f} MiB" if r.get("peak_bytes") is not None else "-"
                cold, warm = (f"{r[k]:.3f}" if k in r else "-" for k in ("compile_cold_s", "compile_warm_s"))
                lines.append(f"| {b['name']} | {name} | {r['first_call_s']:.3f} | {cold} | {warm} | {peak} "
                             f"| {r.get('engine_ops', '-')} |")
    return lines + format_starts(benchmarks) + format_breakdowns(benchmarks) + format_memory(benchmarks)


def format_bounds(benchmarks: list[dict], names: list[str]) -> list[str]:
    """Each memory-bound row's median time over its streaming lower bound (1.00 is the copy rate)."""
    bounded = [b for b in benchmarks if b["lower_bound_ms"] is not None]
    lines = ["", "time / streaming lower bound (the bytes read and written at the measured copy bandwidth), "
             "memory-bound rows", "| benchmark | bound ms | " + " | ".join(names) + " |",
             "|" + " --- |" * (len(names) + 2)]
    for b in bounded:
        ratios = (f"{r['vs_bound']:.2f}x" if "vs_bound" in r else r["status"] if r["status"] != "ok" else "-"
                  for r in (b["results"][n] for n in names))
        lines.append(f"| {b['name']} | {b['lower_bound_ms']:.3f} | " + " | ".join(ratios) + " |")
    return lines if bounded else []


def format_starts(benchmarks: list[dict]) -> list[str]:
    """Cold and warm starts in new processes: import, then trace + compile + first call."""
    lines = ["", "starts in a new process, s: import jitlab, then trace + compile + first call (of which compile); "
             "warm reuses the cold start's cache folder; exe cache: whether the passes' result came from it",
             "| benchmark | runner | import | cold start | cold compile | warm start | warm compile | exe cache |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for b in benchmarks:
        for name, r in b["results"].items():
            cold, warm = r.get("cold_start"), r.get("warm_start")
            if cold is None or warm is None:
                continue
            hit = {True: "hit", False: "miss", None: "off"}[warm["hit"]]
            lines.append(f"| {b['name']} | {name} | {warm['import_s']:.3f} | {cold['start_s']:.3f} "
                         f"| {cold['compile_s']:.3f} | {warm['start_s']:.3f} | {warm['compile_s']:.3f} | {hit} |")
    return lines if len(lines) > 4 else []


def format_breakdowns(benchmarks: list[dict]) -> list[str]:
    """Where each cold compile went (the cold start's CompileTiming), one line per program and runner."""
    lines = [breakdown_line(f"{b['name']} / {name}", r["cold_start"].get("breakdown", {}))
             for b in benchmarks for name, r in b["results"].items() if r.get("cold_start")]
    return ["", f"cold compile breakdown, s: {BREAKDOWN_HELP}", *lines] if lines else []


def _bytes(n: int | None) -> str:
    return format_bytes(n) if n is not None else "-"


def format_memory(benchmarks: list[dict]) -> list[str]:
    """The memory plans: planned peak against the largest live set, and the peak of each execution order."""
    lines = ["", "memory plans: planned peak, the lower bound (largest live set under the order used), the naive "
             "total (every buffer its own), and the lower bound under each order the schedule pass compares",
             "| benchmark | runner | plan | planned peak | lower bound | peak / bound | naive | bfs | dfs "
             "| memory-aware |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for b in benchmarks:
        for name, r in b["results"].items():
            m = r.get("memory") if r["status"] == "ok" else None
            if m is None:
                continue
            peaks = m["order_peaks"]
            ratio = f"{m['peak_bytes'] / m['lower_bound_bytes']:.3f}" if m["lower_bound_bytes"] else "-"
            lines.append(f"| {b['name']} | {name} | {m['mode']} | {_bytes(m['peak_bytes'])} "
                         f"| {_bytes(m['lower_bound_bytes'])} | {ratio} | {_bytes(m['naive_bytes'])} | "
                         + " | ".join(_bytes(peaks.get(k)) for k in ("bfs", "dfs", "memory")) + " |")
    return lines if len(lines) > 3 else []


def _all(data: dict) -> list[dict]:
    """The suite's benchmarks, the ONNX models and the loaded rows: each has a name and results per runner."""
    return data["benchmarks"] + data["onnx_models"] + (data["loaded"]["rows"] if data.get("loaded") else [])


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m jitlab.bench` and `jitlab bench`; 1 if any jitlab result was wrong."""
    args = parse_args(argv)
    data = run(args)
    print(format_report(data))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(data, f, indent=1, default=str)
    failed = [b["name"] for b in _all(data) for n, r in b["results"].items()
              if n.startswith("jitlab") and r["status"] != "ok"]
    rows = data["recompute"]["rows"] if data.get("recompute") else []
    failed += [RECOMPUTE] if not all(r["same_result"] for r in rows) else []
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

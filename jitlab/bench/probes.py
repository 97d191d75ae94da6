"""Probes for how generated kernels should be written on this machine: how a row reduction
vectorizes, which numba threading layer coexists with BLAS (docs/performance.md,
"What decides speed", 3 and 4), and whether two threads really compute at once (the row
kernels' second round there).

`python -m jitlab.bench.probes [reduction|threading|cores]` prints the measurements.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable

import numpy as np

from ..runtime.profile import timed

LANES = 16


def median_ms(fn: Callable, *args, repeats: int = 11) -> float:
    fn(*args)
    return float(np.median(timed(lambda: fn(*args), repeats))) * 1e3


def _lanes_kernel(kind: str) -> Callable:
    """A row reduction keeping LANES partial results in scalars, as a generator would emit it."""
    from numba import njit

    step = {"max": "m{k} = v if (v > m{k} or v != v) else m{k}", "sum": "m{k} += v"}[kind]
    init = "np.float32(-np.inf)" if kind == "max" else "np.float32(0)"
    combine = {"max": "r = m{k} if (m{k} > r or m{k} != m{k}) else r", "sum": "r += m{k}"}[kind]
    lines = ["def kernel(x, out):", "    for i in range(x.shape[0]):",
             "        " + ", ".join(f"m{k}" for k in range(LANES)) + " = " + ", ".join([init] * LANES),
             f"        for j in range(0, x.shape[1] - x.shape[1] % {LANES}, {LANES}):"]
    lines += [f"            v = x[i, j + {k}]\n            " + step.format(k=k) for k in range(LANES)]
    lines += ["        r = m0"] + ["        " + combine.format(k=k) for k in range(1, LANES)]
    lines += [f"        for j in range(x.shape[1] - x.shape[1] % {LANES}, x.shape[1]):",
              "            v = x[i, j]", "            " + step.format(k=0).replace("m0", "r"), "        out[i] = r"]
    namespace = {"np": np}
    exec("\n".join(lines), namespace)
    return njit(error_model="numpy")(namespace["kernel"])


def _reduction_kernels() -> dict[str, Callable]:
    """Row max and row sum of a contiguous float32 row, written the ways a generator could. The
    step is written inside each kernel: fast-math flags belong to the instructions of the function
    they are compiled with, so a step in a called function would not carry the kernel's flags."""
    from numba import njit

    from ..backends.numba_cpu.bits import maximum

    def rows(fastmath=False):
        return njit(error_model="numpy", fastmath=fastmath)

    @rows()
    def max_select(x, out):
        for i in range(x.shape[0]):
            m = np.float32(-np.inf)
            for j in range(x.shape[1]):
                v = x[i, j]
                m = v if (v > m or v != v) else m
            out[i] = m

    @rows(fastmath=True)
    def max_select_fast(x, out):
        for i in range(x.shape[0]):
            m = np.float32(-np.inf)
            for j in range(x.shape[1]):
                v = x[i, j]
                m = v if v > m else m
            out[i] = m

    @rows()
    def max_intrinsic(x, out):
        for i in range(x.shape[0]):
            m = np.float32(-np.inf)
            for j in range(x.shape[1]):
                m = maximum(m, x[i, j])
            out[i] = m

    def sum_kernel(fastmath):
        @rows(fastmath)
        def kernel(x, out):
            for i in range(x.shape[0]):
                s = np.float32(0)
                for j in range(x.shape[1]):
                    s += x[i, j]
                out[i] = s

        return kernel

    return {"max: select (NaN-propagating)": max_select, "max: select, fastmath=True": max_select_fast,
            f"max: {LANES} partial maxima in scalars": _lanes_kernel("max"),
            "max: bits.maximum (llvm.maximum)": max_intrinsic, "sum: plain": sum_kernel(False),
            f"sum: {LANES} partial sums in scalars": _lanes_kernel("sum"),
            "sum: fastmath={'reassoc'}": sum_kernel({"reassoc"})}


def reduction(rows: int = 4096, cols: int = 1024, repeats: int = 21) -> list[dict]:
    """ms per variant (one thread, interleaved medians) for row max / row sum of a float32 matrix,
    each checked against numpy, with the widest vector register its loop uses."""
    from ..backends.numba_cpu.mathcheck import vector_width_of
    from ..timing import interleaved_medians

    x = np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32)
    out = np.empty(rows, np.float32)
    calls = {"numpy x.max(axis=1)": lambda: x.max(axis=1), "numpy x.sum(axis=1)": lambda: x.sum(axis=1)}
    vector = {name: "-" for name in calls}
    for label, kernel in _reduction_kernels().items():
        kernel(x, out)
        expected = x.max(axis=1) if label.startswith("max") else x.sum(axis=1, dtype=np.float64)
        if not np.allclose(out, expected, rtol=1e-4, atol=1e-3):
            raise AssertionError(f"reduction probe {label} computed a wrong result")
        vector[label] = vector_width_of(kernel) or "no"
        calls[label] = lambda kernel=kernel: kernel(x, out)
    medians = interleaved_medians(calls, repeats)
    return [{"variant": name, "ms": seconds * 1e3, "vector": vector[name]} for name, seconds in medians.items()]


def _mlp_inputs():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 1024), dtype=np.float32)
    w1 = rng.standard_normal((1024, 4096), dtype=np.float32) / 32
    w2 = rng.standard_normal((4096, 1024), dtype=np.float32) / 64
    return x, w1, rng.standard_normal(4096, dtype=np.float32), w2, rng.standard_normal(1024, dtype=np.float32)


def threading_child(epilogue: str) -> dict:
    """One configuration, in this process: median ms of the MLP block with the given epilogue."""
    import numba
    from numba import njit, prange

    @njit(parallel=epilogue == "prange", error_model="numpy")
    def bias_relu(h, b):
        for i in prange(h.shape[0]):
            for j in range(h.shape[1]):
                v = h[i, j] + b[j]
                h[i, j] = v if v > 0 else np.float32(0)

    @njit(parallel=epilogue == "prange", error_model="numpy")
    def bias(h, b):
        for i in prange(h.shape[0]):
            for j in range(h.shape[1]):
                h[i, j] += b[j]

    x, w1, b1, w2, b2 = _mlp_inputs()

    def block():
        h = x @ w1
        bias_relu(h, b1)
        y = h @ w2
        bias(y, b2)
        return y

    def eager():
        return np.maximum(x @ w1 + b1, 0) @ w2 + b2

    before = median_ms(eager)                 # numba has started no thread yet
    if not np.allclose(block(), eager(), rtol=1e-3, atol=1e-2):
        raise AssertionError("threading probe: the MLP block computed a wrong result")
    ms = median_ms(block)
    layer = numba.threading_layer() if epilogue == "prange" else "-"
    return {"ms": ms, "numpy_before_ms": before, "numpy_after_ms": median_ms(eager), "layer": layer}


_THREADING_CONFIGS = [
    ("serial epilogue", "serial", {}),
    ("prange, workqueue", "prange", {"NUMBA_THREADING_LAYER": "workqueue"}),
    ("prange, omp", "prange", {"NUMBA_THREADING_LAYER": "omp"}),
    ("prange, omp, OMP_WAIT_POLICY=passive", "prange", {"NUMBA_THREADING_LAYER": "omp", "OMP_WAIT_POLICY": "passive"}),
    ("prange, default layer", "prange", {}),
]


def _child(epilogue: str, env: dict) -> dict:
    proc = subprocess.run([sys.executable, "-m", "jitlab.bench.probes", "--child", epilogue],
                          env={**os.environ, **env}, capture_output=True, text=True, timeout=600)
    if proc.returncode:
        return {"error": proc.stderr.strip().splitlines()[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def threading(rounds: int = 3) -> list[dict]:
    """Each configuration in a fresh process (the threading layer is fixed at numba's first launch),
    configurations taking turns for `rounds` rounds; per configuration the median over rounds of the
    block, and of numpy's MLP before and after numba started its threads."""
    runs: dict[str, list[dict]] = {label: [] for label, _, _ in _THREADING_CONFIGS}
    for _ in range(rounds):
        for label, epilogue, env in _THREADING_CONFIGS:
            runs[label].append(_child(epilogue, env))
    results = []
    for label, outcomes in runs.items():
        ok = [o for o in outcomes if "error" not in o]
        if not ok:
            results.append({"config": label, "error": outcomes[0]["error"]})
            continue
        row = {k: float(np.median([o[k] for o in ok])) for k in ("ms", "numpy_before_ms", "numpy_after_ms")}
        results.append({"config": label, **row, "block / numpy before": row["ms"] / row["numpy_before_ms"],
                        "layer": ok[0]["layer"]})
    return results


def spin_ratio(n: int, start_at: float) -> float:
    """Wall over thread CPU time of a fixed vector loop (20 dependent multiply-adds per element),
    run from the wall-clock time `start_at` on, once compiled, so that processes run it together."""
    import time

    from numba import njit

    @njit(error_model="numpy")
    def spin(x, out):
        for i in range(x.size):
            v = x[i]
            for _ in range(20):
                v = v * np.float32(0.999) + np.float32(0.001)
            out[i] = v

    x = np.ones(n, np.float32)
    out = np.empty_like(x)
    spin(x, out)
    time.sleep(max(0.0, start_at - time.time()))
    wall, cpu = time.perf_counter(), time.thread_time()
    for _ in range(10):
        spin(x, out)
    return (time.perf_counter() - wall) / (time.thread_time() - cpu)


def _spinners(count: int, pinned: bool, n: int, lead: float) -> list[float]:
    """spin_ratio of `count` processes at once, each left to the scheduler or pinned to CPU k,
    starting `lead` seconds from now (once every child has imported numba and compiled)."""
    import time

    start_at = time.time() + lead
    procs = []
    for k in range(count):
        pin = f"os.sched_setaffinity(0, {{{k}}}); " if pinned else ""
        code = f"import os; {pin}from jitlab.bench.probes import spin_ratio; print(spin_ratio({n}, {start_at}))"
        procs.append(subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True))
    return [float(p.communicate(timeout=600)[0].strip().splitlines()[-1]) for p in procs]


def cores(n: int = 1 << 23, lead: float = 5.0) -> list[dict]:
    """Whether the machine's cores compute at once: one process, then two at once left to the
    scheduler, then two pinned one per CPU, each its wall time over its CPU time for the same loop.
    A VM that packs runnable threads onto one vCPU shows about 2 unpinned and 1 pinned: numba's
    parallel kernel variants then gain nothing whatever their code (docs/performance.md)."""
    rows = [("one process", 1, False), ("two processes", 2, False)]
    rows += [("two processes, pinned one per CPU", 2, True)] if (os.cpu_count() or 1) >= 2 else []
    return [{"config": label, "wall / cpu": float(np.median(_spinners(count, pinned, n, lead)))}
            for label, count, pinned in rows]


def _table(rows: list[dict]) -> str:
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + " --- |" * len(keys)]
    for row in rows:
        lines.append("| " + " | ".join(f"{row.get(k, ''):.3f}" if isinstance(row.get(k), float) else str(row.get(k, ""))
                                      for k in keys) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        print(json.dumps(threading_child(argv[1])))
        return 0
    which = argv[0] if argv else "all"
    if which in ("reduction", "all"):
        print(_table(reduction()))
    if which in ("threading", "all"):
        from threadpoolctl import threadpool_info

        print("BLAS:", [(i["internal_api"], i.get("architecture"), i["num_threads"]) for i in threadpool_info()])
        print(_table(threading()))
    if which in ("cores", "all"):
        print(_table(cores()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

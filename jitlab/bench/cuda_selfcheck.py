"""One command for a GPU machine: the CUDA tests under hang protection, the bench rows against
jax.jit, the cached-call figures, and one summary file.

    python -m jitlab.bench.cuda_selfcheck                 # everything, within --budget (480 s)
    python -m jitlab.bench.cuda_selfcheck --ptx           # no GPU needed: every generated kernel
                                                          # lowered to PTX for sm_90 (cuda_ptx.py);
                                                          # --quick: each kernel kind, fewer dtypes

Run from a checkout (the tests live in tests/cuda). Each test module runs in a pytest process of
its own, on the real GPU (JITLAB_TEST_GPU=1, so tests marked `gpu` run too), and is killed with
SIGKILL when it outlives its limit; the summary names the test it was running (guarded.py).
Then each bench row runs through `python -m jitlab.bench --target cuda` in a process of its own,
with jax at float32 matmul precision ("highest", not TF32), and a last process measures the
device's copy bandwidth and the cost of a cached call. The summary (--out) is one Markdown file:
readable tables, then all the figures as a JSON block.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

from . import guarded

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests" / "cuda"
MAIN_RUN_ONLY = ("test_simulator_suite.py", "test_without_gpu.py")    # written for the main run, not a device
ROWS = ("chain", "tanh_gelu", "softmax", "layernorm", "mlp", "mlp_train", "tiny_500")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m jitlab.bench.cuda_selfcheck", description=__doc__.splitlines()[0])
    p.add_argument("--ptx", action="store_true", help="only lower every generated kernel to PTX (no GPU needed)")
    p.add_argument("--random", type=int, default=20, help="random programs for --ptx (default 20)")
    p.add_argument("--quick", action="store_true",
                   help="--ptx on one float and one integer dtype and the smaller bench programs (half the time)")
    p.add_argument("--out", default="cuda-selfcheck.md", help="the summary file (default ./cuda-selfcheck.md)")
    p.add_argument("--budget", type=float, default=480, help="seconds for the whole run (default 480)")
    p.add_argument("--test-limit", type=float, default=240, help="seconds a test module may take (default 240)")
    p.add_argument("--jobs", type=int, default=8, help="test modules run at once (default 8)")
    p.add_argument("--modules", help="comma-separated test modules (default every tests/cuda module)")
    p.add_argument("--rows", default=",".join(ROWS), help=f"bench rows (default {','.join(ROWS)})")
    p.add_argument("--repeats", type=int, default=7, help="bench repeats (default 7)")
    p.add_argument("--row-limit", type=float, default=120,
                   help="seconds a bench row may take at most (default 120; each gets an equal share of the time left)")
    p.add_argument("--torch", action="store_true",
                   help="torch.compile as a third peer (its cold compile takes tens of seconds a row)")
    p.add_argument("--measure", metavar="JSON", help=argparse.SUPPRESS)     # the last process's own work
    return p.parse_args(argv)


def cuda_test_modules(names: str | None) -> list[Path]:
    if names:
        return [Path(n).resolve() if Path(n).exists() else TESTS / n for n in names.split(",")]
    # the largest first, a rough guess at the longest: the last to start should be short ones
    return sorted((p for p in TESTS.glob("test_*.py") if p.name not in MAIN_RUN_ONLY), key=lambda p: -p.stat().st_size)


def device_env() -> dict[str, str]:
    """The environment of every child: the real GPU, this checkout first on the path."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    path = [str(ROOT), *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)]
    env.update(JITLAB_TEST_GPU="1", PYTHONPATH=os.pathsep.join(path), JAX_DEFAULT_MATMUL_PRECISION="highest",
               XLA_PYTHON_CLIENT_PREALLOCATE="false")
    return env


def peers(torch: bool = False) -> str:
    """numpy and jax.jit, and torch.compile where asked for and PyTorch is installed."""
    return "numpy,jax.jit" + (",torch.compile" if torch and importlib.util.find_spec("torch") else "")


def run_rows(rows: list[str], args, deadline: float, out_dir: Path, env: dict[str, str]) -> list[dict]:
    """Each bench row through the bench's CLI in a process of its own; its JSON, or why there is none."""
    results = []
    for left, row in zip(range(len(rows), 0, -1), rows):
        path = out_dir / f"bench-{row}.json"
        limit = min(args.row_limit, (deadline - time.monotonic()) / left)
        if limit < 5:
            results.append({"name": row, "status": "not run: out of time"})
            continue
        command = [sys.executable, "-m", "jitlab.bench", "--target", "cuda", "--peers", peers(args.torch),
                   "--only", row, "--repeats", str(args.repeats), "--starts", "off", "--json", str(path)]
        finished = guarded.run_killable(command, limit, out_dir / f"bench-{row}.log", ROOT, env)
        results.append(read_row(row, path, finished))
    return results


def read_row(row: str, path: Path, finished: guarded.Finished) -> dict:
    if finished.killed:
        return {"name": row, "status": f"killed after {finished.seconds:.0f} s"}
    if not path.exists():
        return {"name": row, "status": f"no result (exit {finished.returncode})"}
    data = json.loads(path.read_text())
    bench = next((b for b in data["benchmarks"] if b["name"] == row), None)
    if bench is None:
        return {"name": row, "status": "no such bench row"}
    return {"name": row, "status": "ok" if finished.returncode == 0 else "a jitlab result was wrong",
            "bytes_moved": bench["bytes_moved"], "memory_bound": bench["lower_bound_ms"] is not None,
            "results": {k: {"status": r["status"], "ms": r.get("ms"), "error": r.get("error")}
                        for k, r in bench["results"].items()},
            "call_overhead_us": data.get("call_overhead_us")}


def run_measure(deadline: float, out_dir: Path, env: dict[str, str]) -> dict:
    path = out_dir / "measure.json"
    command = [sys.executable, "-m", "jitlab.bench.cuda_selfcheck", "--measure", str(path)]
    finished = guarded.run_killable(command, max(deadline - time.monotonic(), 30), out_dir / "measure.log", ROOT, env)
    if finished.killed or not path.exists():
        return {"status": f"killed after {finished.seconds:.0f} s" if finished.killed
                else f"no result (exit {finished.returncode})"}
    return {"status": "ok", **json.loads(path.read_text())}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.ptx:
        return ptx_main(args.random, args.quick)
    if args.measure:
        from .cuda_measure import measure

        Path(args.measure).write_text(json.dumps(measure(), indent=1))
        return 0
    from ..backends.numba_cuda import device

    if device.simulator_enabled() or not device.available():
        print("the selfcheck needs a real GPU: unset NUMBA_ENABLE_CUDASIM and run it on a machine with one "
              "(--ptx needs none)")
        return 2
    return run_all(args)


def run_all(args) -> int:
    """Tests, bench rows and call figures within the budget; the summary written to args.out."""
    from .selfcheck_summary import summary_markdown, verdict

    start = time.monotonic()
    out = Path(args.out).resolve()
    work = out.parent / (out.stem + "-logs")
    env = device_env()
    tests = guarded.run_modules(cuda_test_modules(args.modules), args.test_limit, start + 0.3 * args.budget,
                                work, env, ROOT, args.jobs, ["--no-shrink"])
    rows = run_rows([r for r in args.rows.split(",") if r], args, start + 0.92 * args.budget, work, env)
    measured = run_measure(start + args.budget, work, env)
    data = {"seconds": round(time.monotonic() - start, 1), "logs": str(work),
            "tests": [t.as_dict() for t in tests], "rows": rows, "measured": measured}
    text = summary_markdown(data)
    out.write_text(text)
    print(text.split("```json")[0])
    print(f"summary: {out}")
    return verdict(data)


def ptx_main(random_count: int, quick: bool = False) -> int:
    """`--ptx`: 0 when every kernel lowered with its barriers intact, 1 when one did not, 3 without NVVM."""
    from . import cuda_ptx

    missing = cuda_ptx.nvvm_missing()
    if missing:
        print(f"--ptx needs NVVM and NVRTC (pip install 'jitlab[ptx]'): {missing}")
        return 3
    results = cuda_ptx.lower_all(cuda_ptx.kinds(quick) + cuda_ptx.random_programs(random_count))
    failed = [r for r in results if not r.ok]
    print(f"{len(results) - len(failed)} of {len(results)} kernels lowered to PTX for sm_{cuda_ptx.ARCH[0]}"
          f"{cuda_ptx.ARCH[1]} with their barriers intact")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

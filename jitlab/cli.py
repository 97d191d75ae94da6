"""The `jitlab` command line, in the manner of mlir-opt and onnxruntime's tools.

Each subcommand is one small function over parsed arguments; bad input is a JitlabError
(or an OSError) reported as one line with exit status 1, with the traceback under --debug.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time
from collections.abc import Callable, Sequence

import numpy as np

from .registry import Registry

COMMANDS: Registry[str, Callable[[argparse.Namespace], int]] = Registry("command")
DELEGATED = ("bench", "onnx-conformance")    # commands whose arguments another command line parses


def command(name: str) -> Callable:
    """Registers the function behind one subcommand."""
    return COMMANDS.register(name)


def load_program(path: str):
    """A Program from IR text (any suffix but .onnx) or an ONNX model."""
    import jitlab as jl

    file = pathlib.Path(path)
    if not file.is_file():
        raise jl.JitlabError(f"{path}: no such file")
    if file.suffix == ".onnx":
        return jl.onnx.load(str(file))
    return jl.parse(file.read_text())


def make_inputs(program, spec: str) -> list[np.ndarray]:
    """Inputs for `program`: random ones of its static shapes, or arrays from an .npz by input name."""
    from .errors import InputError

    if spec == "random":
        rng = np.random.default_rng(0)
        return [_random(rng, v) for v in program.inputs]
    with np.load(spec) as data:
        missing = [v.name for v in program.inputs if v.name not in data]
        if missing:
            raise InputError(f"{spec}: no array for input(s) {', '.join(missing)} (has {', '.join(data.files)})")
        return [data[v.name] for v in program.inputs]


def _random(rng: np.random.Generator, value) -> np.ndarray:
    from .errors import InputError

    if not value.type.is_static:
        raise InputError(f"input %{value.name} has symbolic shape {value.type}; give --inputs FILE.npz")
    dtype = value.type.dtype
    if dtype.kind == "f":
        return rng.standard_normal(value.type.shape).astype(dtype)
    if dtype.kind == "b":
        return rng.random(value.type.shape) < 0.5
    return rng.integers(0, 4, value.type.shape).astype(dtype)


@command("opt")
def cmd_opt(args: argparse.Namespace) -> int:
    """Runs a pass pipeline and prints or writes the IR."""
    import jitlab as jl

    from .backends.base import available_targets

    available_targets()             # loads the backend plugins, whose passes may be in the pipeline
    program = load_program(args.file)
    out = jl.opt(program, args.passes, print_after_all=args.print_ir_after_all,
                 print_after_change=args.print_ir_after_change)
    _emit(str(out), args.output)
    return 0


def _emit(text: str, output: str | None) -> None:
    if output:
        pathlib.Path(output).write_text(text + "\n")
    else:
        print(text)


@command("run")
def cmd_run(args: argparse.Namespace) -> int:
    """Compiles and runs a model; --check compares with O0 and fails on a mismatch."""
    import jitlab as jl

    program = load_program(args.file)
    inputs = make_inputs(program, args.inputs)
    exe = jl.compile(program, level=args.level, target=args.target, progress=False)
    outputs = exe(*inputs)
    for value, out in zip(program.outputs, outputs):
        print(f"%{value.name}: {out.dtype}{list(out.shape)} mean={_mean(out):.6g}")
    if args.profile:
        print(_profile(exe, inputs, args.repeat))
    return _check(program, inputs, outputs, args) if args.check else 0


def _mean(a: np.ndarray) -> float:
    return float(np.mean(a)) if a.size and a.dtype.kind in "fiub" else float("nan")


def _profile(exe, inputs: Sequence[np.ndarray], repeat: int) -> str:
    times = []
    for _ in range(max(1, repeat)):
        start = time.perf_counter()
        exe(*inputs)
        times.append(time.perf_counter() - start)
    report = exe.report
    return (f"{exe.level} on {exe.target}: median {1e3 * float(np.median(times)):.3f} ms over {len(times)} "
            f"call(s); {len(report.groups)} group(s), {len(report.kernels)} kernel(s), "
            f"compile {sum(report.seconds.values()):.2f} s")


def _check(program, inputs, outputs, args: argparse.Namespace) -> int:
    import jitlab as jl

    expected = jl.compile(program, level="O0")(*inputs)
    for value, got, want in zip(program.outputs, outputs, expected):
        if got.shape != want.shape or not np.allclose(got, want, rtol=args.rtol, atol=args.atol, equal_nan=True):
            worst = float(np.max(np.abs(got.astype(np.float64) - want))) if got.shape == want.shape else "shape"
            print(f"jitlab run: %{value.name} differs from O0 (max abs difference {worst})", file=sys.stderr)
            return 1
    print(f"check: {len(outputs)} output(s) equal to O0 (rtol={args.rtol}, atol={args.atol})")
    return 0


@command("explore")
def cmd_explore(args: argparse.Namespace) -> int:
    """Compiles a model and writes the explorer's views as one offline HTML file."""
    import jitlab as jl

    program = load_program(args.file)
    exe = jl.compile(program, level=args.level, target=args.target, progress=False)
    path = jl.explore(exe, title=args.title or program.name).save(args.output)
    print(f"wrote {path}")
    return 0


@command("bench")
def cmd_bench(args: argparse.Namespace) -> int:
    """Delegates to the bench's own command line."""
    from .bench import cli

    return cli.main(args.rest)


@command("onnx-conformance")
def cmd_conformance(args: argparse.Namespace) -> int:
    """Delegates to the ONNX conformance runner."""
    from .onnx import conformance

    return conformance.main(args.rest)


@command("cache")
def cmd_cache(args: argparse.Namespace) -> int:
    """Shows, fills ahead (warm: the CPU backend's helper functions, once after installing) or
    empties the kernel cache and the executable cache beside it."""
    from .backends import native_caller
    from .backends.kernel_cache import default_cache
    from .runtime import executable_cache

    cache = default_cache()
    if args.action == "warm":
        from .backends.base import backend_for_target

        for line in backend_for_target("cpu").warm(cache):
            print(f"compiled {line}")
    elif args.action == "clear":
        print(f"removed {cache.clear()} kernel module(s) and native libraries and {executable_cache.clear(cache)} "
              f"executable(s) from {cache.directory}")
    else:
        info = cache.info()
        exes = executable_cache.entries(cache)
        size = sum(os.path.getsize(p) for p in exes)
        caller = native_caller.caller()        # built now if this machine has none
        print(f"directory: {info['directory']}\nkernels: {info['kernels']}\n"
              f"native libraries: {info['native_libraries']}\nbytes: {info['bytes']}\n"
              f"executables: {len(exes)} ({size} bytes)\n"
              f"native caller: {caller.__file__ if caller is not None else native_caller.why_not}")
    return 0


@command("fuzz")
def cmd_fuzz(args: argparse.Namespace) -> int:
    """Runs random numpy programs at a level against numpy; exit 1 on a mismatch or a crash."""
    from .fuzz import run

    summary = run(args.examples, args.level, args.seed, target=args.target, report=args.report,
                  show_progress=not args.quiet)
    print(summary.line())
    for outcome in summary.failures:
        print(f"  {outcome.kind} at {outcome.case.label}: {outcome.detail.splitlines()[-1]}")
    if args.report:
        print(f"report (with the repro of each failure): {args.report}")
    return 1 if summary.failures else 0


def parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    p = argparse.ArgumentParser(prog="jitlab", description="The jitlab graph compiler from the shell.")
    p.add_argument("--debug", action="store_true", help="show the full traceback of an error")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _opt_parser(sub)
    _run_parser(sub)
    _explore_parser(sub)
    for name, what in [("bench", "the benchmark suite (arguments of python -m jitlab.bench)"),
                       ("onnx-conformance", "the ONNX conformance runner (arguments of python -m "
                                            "jitlab.onnx.conformance)")]:
        q = sub.add_parser(name, help=what, description=what, add_help=False)
        q.add_argument("rest", nargs=argparse.REMAINDER)
    _fuzz_parser(sub)
    q = sub.add_parser("cache", help="show, warm or empty the kernel and executable caches",
                       description="Show or empty the kernel cache and the executable cache; warm compiles "
                                   "jitlab's own numba helpers and the C caller once, so that the first compile "
                                   "after installing does not (scripts/bootstrap runs it).")
    q.add_argument("action", choices=["info", "warm", "clear"])
    return p


def _opt_parser(sub) -> None:
    q = sub.add_parser("opt", help="run passes over IR text or an ONNX model and print the IR",
                       description="Run a pass pipeline over IR text or an ONNX model; print or write the IR.")
    q.add_argument("file", help="IR text (.jir) or an ONNX model (.onnx)")
    q.add_argument("--passes", required=True, help="pipeline, e.g. canonicalize,cse,dce")
    group = q.add_mutually_exclusive_group()
    group.add_argument("--print-ir-after-all", action="store_true", help="print the IR after every pass")
    group.add_argument("--print-ir-after-change", action="store_true",
                       help="print the IR after each pass that changed it")
    q.add_argument("-o", "--output", help="write the IR here instead of printing it")


def _compile_options(q) -> None:
    q.add_argument("--level", default="O1", choices=["O0", "O1", "O2"])
    q.add_argument("--target", default="cpu", help="cpu, cuda, auto or a backend (plugin) name")


def _run_parser(sub) -> None:
    q = sub.add_parser("run", help="compile and run a model", description="Compile and run a model on inputs.")
    q.add_argument("file", help="IR text (.jir) or an ONNX model (.onnx)")
    _compile_options(q)
    q.add_argument("--inputs", default="random", help="'random' or an .npz with one array per input name")
    q.add_argument("--profile", action="store_true", help="time the compiled program")
    q.add_argument("--repeat", type=int, default=5, help="calls timed by --profile")
    q.add_argument("--check", action="store_true", help="compare with O0; exit 1 on a mismatch")
    q.add_argument("--rtol", type=float, default=1e-4)
    q.add_argument("--atol", type=float, default=1e-5)


def _explore_parser(sub) -> None:
    q = sub.add_parser("explore", help="write the explorer's static HTML for a model",
                       description="Compile a model and write the explorer's views as one offline HTML file.")
    q.add_argument("file", help="IR text (.jir) or an ONNX model (.onnx)")
    q.add_argument("-o", "--output", required=True, help="the HTML file to write")
    q.add_argument("--title", default="")
    _compile_options(q)


def _fuzz_parser(sub) -> None:
    q = sub.add_parser("fuzz", help="compare jitlab with numpy on random programs",
                       description="Run random numpy programs through jitlab and compare with numpy's answers; "
                                   "exit 1 on a mismatch or a crash (refusals with a JitlabError are counted).")
    q.add_argument("--examples", type=int, default=200, help="how many programs")
    q.add_argument("--seed", type=int, default=0, help="programs SEED, SEED+1, ... (each seed is one program)")
    q.add_argument("--report", help="write the counts and the repro script of every failure here")
    q.add_argument("--quiet", action="store_true", help="no progress bar")
    _compile_options(q)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `jitlab` script; returns the exit status."""
    from .errors import JitlabError

    p = parser()
    args, unknown = p.parse_known_args(argv)
    if args.command in DELEGATED:
        args.rest = unknown + args.rest      # the delegate parses its own options, --help included
    elif unknown:
        p.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        return COMMANDS[args.command](args)
    except (JitlabError, OSError, ValueError) as error:
        if args.debug:
            raise
        print(f"jitlab {args.command}: {type(error).__name__}: {_one_line(error)}", file=sys.stderr)
        return 1


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


if __name__ == "__main__":
    sys.exit(main())

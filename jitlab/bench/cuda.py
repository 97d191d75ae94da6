"""The bench programs on the GPU as a fraction of its peak bandwidth (`jitlab bench --target cuda`
gives the same programs' times beside numpy's and the peers').

`bench_cuda(programs)` takes (name, fn, args) entries (`suite()` gives the programs of
`jitlab bench`'s suite, jitlab/bench/suite.py, at full size or tiny), compiles each for cuda at
O2, keeps its inputs and outputs on the device, and times the calls. Each result has its wall
time and, on a GPU, its device time (CUDA events around the call's device work). Achieved bandwidth
counts the least traffic a program can move (its inputs read once, its outputs written
once) over the median time; the fraction is of the device's peak (2 x memory clock x bus
width). When CuPy or PyTorch is installed, the same work runs there for comparison:
CuPy through the numpy code itself (its arrays take numpy's functions), PyTorch through
each program's `torch` twin. Under the simulator nothing is timed meaningfully: the run
checks results against O0 instead.

    python -m jitlab.bench.cuda [--scale small|full] [--repeats N] [--only NAME,...]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..backends.numba_cuda import device
from ..ir.opdef import Trait


@dataclass
class Program:
    """One benchmark: a numpy function, its inputs, and optionally a PyTorch twin."""

    name: str
    fn: Callable
    args: tuple
    torch_fn: Callable | None = None


@dataclass
class Result:
    """What one benchmark measured (times in milliseconds, bandwidth in GB/s)."""

    name: str
    ms: float
    bytes_moved: int
    memory_bound: bool
    gb_per_s: float | None = None
    fraction_of_peak: float | None = None
    peers: dict[str, float] = field(default_factory=dict)
    matches_o0: bool | None = None
    device_ms: float | None = None          # CUDA events around each call's device work (None: simulator)

    def line(self) -> str:
        bw = (f"{self.gb_per_s:8.1f} GB/s  {100 * self.fraction_of_peak:5.1f}% of peak"
              if self.gb_per_s is not None else "  bandwidth n/a (simulator)")
        if self.device_ms is not None:
            bw += f"  device {self.device_ms:.3f} ms"
        peers = "  ".join(f"{k} {v:.3f} ms ({v / self.ms:.2f}x)" for k, v in self.peers.items())
        check = "" if self.matches_o0 is None else ("  = O0" if self.matches_o0 else "  DIFFERS FROM O0")
        kind = "memory-bound" if self.memory_bound else "compute"
        return f"{self.name:22s} {kind:12s} {self.ms:9.3f} ms {bw}  {peers}{check}"


# Shapes small enough for the simulator, per program of the bench suite (jitlab/bench/suite.py).
_SMALL = {"chain": [(96,), (96,)], "tanh_gelu": [(96,)], "softmax": [(6, 40)], "layernorm": [(6, 40), (40,), (40,)],
          "mlp": [(16, 16), (16, 16), (16,), (16, 16), (16,)],
          "mlp_train": [(8, 16), (8, 16), (16, 16), (16,), (16, 16), (16,)], "tiny_500": [(64,)],
          "transformer": [(4, 8), (8,), (8,), (8, 24), (24,), (8, 8), (8,), (8,), (8,), (8, 8), (8,), (8, 8), (8,)]}


def suite(scale: str = "full", seed: int = 0) -> list[Program]:
    """The bench suite's array programs (`jitlab bench`), at full size or tiny (`small`) for the simulator;
    each with its PyTorch twin, the same function over torch's namespace."""
    from .peers import torch_namespace
    from .suite import SUITE, Benchmark

    programs = []
    # The imperative programs have no torch twin, and their slice updates run as host library
    # kernels on cuda (docs/imperative-numpy.md): no figure of theirs would be the GPU's.
    for b in (b for b in SUITE if not b.imperative):
        sized = Benchmark(b.name, b.fn, {False: b.shapes[False], True: _SMALL[b.name]}, b.memory_bound,
                          weights=b.weights)
        twin = (lambda fn: lambda *a: fn(*a, xp=torch_namespace()))(b.fn)
        programs.append(Program(b.name, b.fn, sized.inputs(scale == "small", seed), twin))
    return programs


def _median_ms(call: Callable, sync: Callable, repeats: int) -> float:
    call()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        sync()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def _moved(args: Sequence[np.ndarray], outputs: Sequence) -> int:
    return sum(a.nbytes for a in args) + sum(int(np.prod(o.shape)) * np.dtype(o.dtype).itemsize for o in outputs)


def _is_memory_bound(exe) -> bool:
    return not any(op.has(Trait.CONTRACTION) for op in exe.program.walk())


def bench_one(program: Program, repeats: int = 20, peers: bool = True, check: bool = True) -> Result:
    """Times one program on cuda (inputs and outputs on the device) and, optionally, its peers."""
    import jitlab as jl

    cuda = device.cuda()
    exe = jl.compile(jl.trace(program.fn, *program.args), level="O2", target="cuda", device_outputs=True,
                     progress=False)
    dev_args = [cuda.to_device(a) for a in program.args]
    outputs = exe(*dev_args)
    ms = _median_ms(lambda: exe(*dev_args), cuda.synchronize, repeats)
    result = Result(program.name, ms, _moved(program.args, outputs), _is_memory_bound(exe))
    peak = device.info().peak_bytes_per_second
    if not device.info().simulator and peak > 0:
        result.gb_per_s = result.bytes_moved / (ms * 1e-3) / 1e9
        result.fraction_of_peak = result.bytes_moved / (ms * 1e-3) / peak
        result.device_ms = statistics.median(exe._runner.device_times(lambda: exe(*dev_args), repeats))
    if check:
        expected = jl.compile(exe.source, level="O0")(*program.args)
        host = [o.copy_to_host() for o in outputs]
        result.matches_o0 = all(np.allclose(h, e, rtol=1e-3, atol=1e-4, equal_nan=True)
                                for h, e in zip(host, expected))
    if peers and not device.info().simulator:
        result.peers = _peers(program, repeats)
    return result


def _peers(program: Program, repeats: int) -> dict[str, float]:
    """CuPy running the numpy code, PyTorch running the torch twin, when installed."""
    timings = {}
    try:
        import cupy

        args = [cupy.asarray(a) for a in program.args]
        timings["cupy"] = _median_ms(lambda: program.fn(*args), cupy.cuda.Device().synchronize, repeats)
    except Exception:           # not installed, or the numpy code uses something CuPy lacks
        pass
    try:
        import torch

        if program.torch_fn is not None and torch.cuda.is_available():
            args = [torch.as_tensor(a, device="cuda") for a in program.args]
            timings["torch"] = _median_ms(lambda: program.torch_fn(*args), torch.cuda.synchronize, repeats)
    except Exception:           # not installed, or built without CUDA
        pass
    return timings


def bench_cuda(programs: Sequence[Program] | None = None, repeats: int = 20, scale: str = "full",
               peers: bool = True) -> list[Result]:
    """Runs every program (the standard suite by default) and returns what it measured."""
    device.require()
    return [bench_one(p, repeats, peers) for p in (programs if programs is not None else suite(scale))]


def report(results: Sequence[Result]) -> str:
    info = device.info()
    head = f"jitlab bench --target cuda on {info.name}"
    if info.peak_bytes_per_second:
        head += f" (peak bandwidth {info.peak_bytes_per_second / 1e9:.0f} GB/s)"
    return "\n".join([head, *(r.line() for r in results)])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", choices=("small", "full"), default="full")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument("--only", default="", help="comma-separated program names")
    args = parser.parse_args(argv)
    programs = [p for p in suite(args.scale) if not args.only or p.name in args.only.split(",")]
    results = bench_cuda(programs, repeats=args.repeats, peers=not args.no_peers)
    print(report(results))
    return 0 if all(r.matches_o0 is not False for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())

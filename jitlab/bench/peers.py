"""The runners a benchmark is timed with: numpy eager, numexpr, torch.compile, jax.jit, numba
(the imperative benchmarks) and jitlab at each level. Each prepares a zero-argument call on
inputs it has placed ahead of time; optional peers that are not installed say so instead of
failing."""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np

from . import suite
from .suite import Benchmark

Call = Callable[[], object]


@dataclass
class Prepared:
    """A benchmark made ready to time on one runner."""

    call: Call                            # runs it once on inputs placed ahead of time
    to_numpy: Callable                    # turns call()'s result into a numpy array
    info: dict = field(default_factory=dict)   # runner-specific figures (jitlab: compile times)
    # device milliseconds of each of n calls (CUDA events around the call's device work), where measured
    device_times: Callable[[int], list[float]] | None = None


@dataclass(frozen=True)
class Runner:
    """A way to run a benchmark: prepare(bench, inputs) -> Prepared."""

    name: str
    module: str | None                    # the optional package it needs
    prepare: Callable[[Benchmark, tuple], Prepared]

    def available(self) -> bool:
        return self.module is None or importlib.util.find_spec(self.module) is not None


def _numpy(bench: Benchmark, inputs: tuple):
    return Prepared(lambda: bench.fn(*inputs), np.asarray)


_NUMEXPR_FORMS = {
    "chain": lambda ne, x, y: ne.evaluate("where((x*y + x - 0.5*y)**2 > 0, (x*y + x - 0.5*y)**2, 0)"),
    "tanh_gelu": lambda ne, x: ne.evaluate("0.5*h*(1 + tanh(c*(h + 0.044715*h*h*h)))",
                                           local_dict={"h": ne.evaluate("tanh(x)"), "c": np.float32(suite.GELU_C)}),
    "softmax": lambda ne, x: _ne_softmax(ne, x),
    "layernorm": lambda ne, x, g, b: _ne_layernorm(ne, x, g, b),
    "tiny_500": lambda ne, x: _ne_tiny(ne, x),
}


def _ne_softmax(ne, x):
    e = ne.evaluate("exp(x - m)", local_dict={"x": x, "m": x.max(axis=1, keepdims=True)})
    return ne.evaluate("e / s", local_dict={"e": e, "s": e.sum(axis=1, keepdims=True)})


def _ne_layernorm(ne, x, g, b):
    c = ne.evaluate("x - m", local_dict={"x": x, "m": x.mean(axis=1, keepdims=True)})
    var = ne.evaluate("c * c", local_dict={"c": c}).mean(axis=1, keepdims=True)
    return ne.evaluate("c / sqrt(var + 1e-5) * g + b", local_dict={"c": c, "var": var, "g": g, "b": b})


def _ne_tiny(ne, x):
    for i in range(suite.TINY_OPS // 4):
        x = ne.evaluate("x * 0.999 + k", local_dict={"x": x, "k": np.float32(0.001 * (i % 7))})
        x = ne.evaluate("where(x > -1, x, -1)")
        x = ne.evaluate("x - 0.0005")
        x = ne.evaluate("where(x < 1, x, 1)")
    return x


def _numexpr(bench: Benchmark, inputs: tuple):
    import numexpr

    form = _NUMEXPR_FORMS.get(bench.name)
    if form is None:
        raise NotImplementedError("no numexpr form (matmul)")
    return Prepared(lambda: form(numexpr, *inputs), np.asarray)


def torch_namespace():
    """The numpy functions the suite's programs call, as torch functions (the `xp` they take)."""
    import torch

    return SimpleNamespace(
        tanh=torch.tanh, exp=torch.exp, sqrt=torch.sqrt, transpose=lambda x, axes: x.permute(*axes),
        maximum=lambda a, b: torch.clamp_min(a, b), minimum=lambda a, b: torch.clamp_max(a, b),
        max=lambda x, axis, keepdims: torch.amax(x, dim=axis, keepdim=keepdims),
        sum=lambda x, axis, keepdims: torch.sum(x, dim=axis, keepdim=keepdims),
        mean=lambda x, axis, keepdims: torch.mean(x, dim=axis, keepdim=keepdims))


def _functional(bench: Benchmark) -> None:
    """Refuses an imperative benchmark: torch.compile and jax.jit run the `xp` programs only."""
    if bench.imperative:
        raise NotImplementedError("in-place numpy writes (no xp form)")


def _torch_compile(bench: Benchmark, inputs: tuple):
    import torch

    _functional(bench)
    xp = torch_namespace()
    compiled = torch.compile(lambda *a: bench.fn(*a, xp=xp))
    tensors = [torch.from_numpy(a) for a in inputs]
    return Prepared(lambda: compiled(*tensors), lambda t: t.detach().numpy())


def _jax_jit(bench: Benchmark, inputs: tuple):
    import jax
    import jax.numpy as jnp

    _functional(bench)
    # jax multiplies float32 matrices in TF32 on an Ampere or later GPU by default; jitlab keeps
    # float32 unless allow_tf32=True, so the bench compares at full precision.
    jax.config.update("jax_default_matmul_precision", "highest")
    compiled = jax.jit(lambda *a: bench.fn(*a, xp=jnp))
    arrays = [jax.device_put(a) for a in inputs]
    return Prepared(lambda: jax.block_until_ready(compiled(*arrays)), np.asarray, {"matmul_precision": "highest"})


def _numba(bench: Benchmark, inputs: tuple):
    """numba.njit of the imperative benchmarks' own source; its first call (timed as such) compiles."""
    import numba

    if not bench.imperative:
        raise NotImplementedError("written against xp=, which numba cannot take")
    compiled = numba.njit(bench.fn)
    return Prepared(lambda: compiled(*inputs), np.asarray)


def _compile_seconds(fn, inputs) -> tuple[float, object]:
    start = time.perf_counter()
    exe = fn.lower(*inputs)
    return time.perf_counter() - start, exe


def jitlab_runner(level: str, target: str) -> Runner:
    def prepare(bench: Benchmark, inputs: tuple):
        """Compiles twice through fresh jl.jit objects: the first in this process (cold caches),
        the second warm; reports both and the memory plan's peak when the report has one."""
        import jitlab as jl
        from jitlab.backends.base import backend_for_target

        backend = backend_for_target(target)
        options = {"device_outputs": True} if backend.device != "cpu" else {}
        source = jl.capture_loops(bench.fn) if bench.loops else bench.fn
        cold, _ = _compile_seconds(jl.jit(source, level=level, target=target, **options), inputs)
        fn = jl.jit(source, level=level, target=target, **options)
        warm, exe = _compile_seconds(fn, inputs)
        memory, schedule = exe.report.memory, exe.report.schedule
        info = {"compile_cold_s": cold, "compile_warm_s": warm,
                "peak_bytes": memory.peak_bytes if memory is not None else None}
        if memory is not None:
            info["memory"] = {"mode": memory.mode, "peak_bytes": memory.peak_bytes,
                              "lower_bound_bytes": memory.lower_bound_bytes, "naive_bytes": memory.naive_bytes,
                              "order": schedule.strategy if schedule else None,
                              "order_peaks": dict(schedule.peaks) if schedule else {}}
        stats = exe.report.stats
        if "engine_ops_before" in stats:       # an engine plugin's translate pass counted what it claimed
            info["engine_ops"] = (f"{stats['engine_ops_before']} -> {stats['engine_ops_after']} "
                                  f"({stats['engine_groups']} engine groups)")
        # A device target gets its inputs on the device ahead of time and leaves its results
        # there, as jax.jit does: the timing is the computation, not the transfers (results are
        # copied back only to check them).
        placed = [backend.copy_in(a) for a in inputs]
        timer = getattr(exe._runner, "device_times", None)     # cuda's executor times its own device work
        device_times = None if timer is None else (lambda n: timer(lambda: exe(*placed), n))
        return Prepared(lambda: fn(*placed), backend.copy_out, info, device_times)

    return Runner(f"jitlab {level}", None, prepare)


PEERS = {
    "numpy": Runner("numpy", None, _numpy),
    "numexpr": Runner("numexpr", "numexpr", _numexpr),
    "torch.compile": Runner("torch.compile", "torch", _torch_compile),
    "jax.jit": Runner("jax.jit", "jax", _jax_jit),
    "numba": Runner("numba", "numba", _numba),
}

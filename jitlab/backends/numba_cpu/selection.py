"""Kernel selection: a group's generated kernel or its numpy library kernel.

The cost model estimates both from what decides speed on a CPU (docs/performance.md, "What decides speed"): bytes
moved through memory and the per-element cost of transcendental functions. A
generated kernel reads its inputs and writes its outputs once; the library kernel runs
op by op, so every intermediate goes to memory and back. `autotune=True` measures
both on random inputs instead (static shapes only).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from ...ir.core import Operation
from ...ir.opdef import Trait
from ...ir.shapes import Sym
from ..base import Kernel
from ..host import LibraryKernel
from .codegen import raises
from .fastmath import lookup

BYTES_PER_NS = 20.0         # streaming bandwidth of one or two cores, in bytes per nanosecond
# Nanoseconds per element for ops that are more than a few cycles, numpy vs a generated loop.
NUMPY_NS = {"np.exp": 1.0, "np.log": 1.2, "np.tanh": 50.0, "np.erf": 60.0, "np.sigmoid": 3.0,
            "np.gelu": 70.0, "np.sin": 2.0, "np.cos": 2.0, "np.pow": 4.0, "np.div": 0.3, "np.sqrt": 0.3}
GENERATED_NS = {"np.exp": 4.0, "np.log": 4.0, "np.tanh": 17.0, "np.erf": 10.0, "np.sigmoid": 5.0,
                "np.gelu": 20.0, "np.sin": 5.0, "np.cos": 5.0, "np.pow": 15.0, "np.div": 0.3, "np.sqrt": 0.3}
VECTORIZED_NS = 1.0          # a fastmath implementation inlined into the loop (see fastmath.py's table)


def _generated_ns(op: Operation) -> float:
    variant = "tanh" if op.attrs.get("approximate") == "tanh" else ""
    impl = lookup(op.name, op.results[0].type.dtype, variant) if op.results[0].type.dtype.kind == "f" else None
    return VECTORIZED_NS if impl is not None and impl.vectorizes else GENERATED_NS.get(op.name, 0.0)


def _size(value) -> float:
    n = 1.0
    for d in value.type.shape:
        n *= 1024 if isinstance(d, Sym) else d
    return n


def estimate(group: Operation) -> tuple[float, float]:
    """Estimated nanoseconds of (generated, library) kernels for one call."""
    block = group.body
    ops = [op for op in block.ops if not op.has(Trait.TERMINATOR) and not op.has(Trait.CONSTANT)]
    io_bytes = sum(_size(v) * v.type.dtype.itemsize for v in list(block.args) + list(block.last_op.operands))
    generated = io_bytes / BYTES_PER_NS
    library = 0.0
    for op in ops:
        n = _size(op.results[0])
        op_bytes = sum(_size(v) * v.type.dtype.itemsize for v in list(op.operands) + op.results)
        library += op_bytes / BYTES_PER_NS + n * NUMPY_NS.get(op.name, 0.0)
        generated += n * _generated_ns(op)
    return generated, library


def select(group: Operation, generated: Kernel, autotune: bool) -> Kernel:
    """The kernel to run for `group`, with the choice and its reason recorded on it."""
    gen_ns, lib_ns = estimate(group)
    # Random inputs would be out-of-range indices for a scatter, or negative integer powers: a
    # kernel that checks its inputs is not measured.
    measurable = not raises(generated.source)
    if autotune and measurable and all(not isinstance(d, Sym) for v in group.operands for d in v.type.shape):
        gen_ns, lib_ns = _measure(group, generated.run), _measure(group, LibraryKernel(group.body))
        how = "measured"
    else:
        how = "estimated"
    if lib_ns < gen_ns:
        generated.run = LibraryKernel(group.body)
        generated.choice = (f"library (numpy op by op): {how} {_ms(lib_ns)} vs {_ms(gen_ns)} for the "
                            "generated kernel")
    else:
        generated.choice += f" ({how} {_ms(gen_ns)} vs {_ms(lib_ns)} for numpy op by op)"
    return generated


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3g} ms"


def _measure(group: Operation, run: Callable, repeats: int = 5) -> float:
    rng = np.random.default_rng(0)
    inputs = [_random(rng, v.type) for v in group.operands]
    outputs = [np.empty(tuple(r.type.shape), r.type.dtype) for r in group.results]
    run(inputs, outputs)
    times = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        run(inputs, outputs)
        times.append(time.perf_counter_ns() - start)
    return float(sorted(times)[len(times) // 2])


def _random(rng, t) -> np.ndarray:
    shape = tuple(t.shape)
    if t.dtype.kind == "b":
        return rng.random(shape) > 0.5
    if t.dtype.kind in "iu":
        return rng.integers(0, 8, shape).astype(t.dtype)
    return rng.standard_normal(shape).astype(t.dtype)


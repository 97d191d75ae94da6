"""Results belong to the caller: no result shares memory with an undonated input, a weight or
constant of the program, or another result of the same call.

A program may return an input or a view of one (`return x`, `x.T`, `x[1:]`,
`x.reshape(-1)`), canonicalization may turn an op into the identity (`x * 1.0`,
`np.maximum(x, x)`, `-(-x)`), and CSE may make two results one value. In each case the
caller gets a copy. Plain numpy would hand back the input itself or a view for some of
these; a copy is what every level and target can promise alike, and writing into a result
then never changes an argument, a weight or another result. The one exception is a
donated input an output was written into: that result is the caller's array, by request.

Which results to look at is decided once: a runner that says its results are buffers of
their own (`fresh_outputs`) needs checking only for results that are inputs, views,
constants, weights or repeated; any other runner (O0's interpreter, whose numpy references
may answer with views, a device or plugin executor) has every result checked.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from ..backends.device_arrays import c_strides, is_numba_device_array
from ..ir.opdef import Trait
from ..ir.program import Program


def outputs_to_check(program: Program, runner) -> list[int]:
    """Indices of the results that may share memory with an input, a constant or another result."""
    outputs = program.outputs
    if not getattr(runner, "fresh_outputs", False):
        return list(range(len(outputs)))
    repeated = Counter(outputs)
    return [k for k, v in enumerate(outputs) if repeated[v] > 1 or not _computed(v)]


def _computed(v) -> bool:
    """Whether a compiled runner writes `v` into a buffer of its own (not a view, an input or a constant)."""
    op = getattr(v, "op", None)
    return op is not None and not (op.has(Trait.VIEW) or op.has(Trait.CONSTANT) or op.name == "np.weight")


def owned_results(results: list, check: Sequence[int], shared: Sequence, donated: set[int]) -> None:
    """Replaces by a copy each result of `check` that is read-only (a constant) or shares memory
    with an array of `shared` or another result; results in `donated` (donated arrays) stay."""
    for k in check:
        r = results[k]
        if k in donated:
            continue
        if _read_only(r) or any(_overlap(r, a) for a in shared) \
                or any(j != k and _overlap(r, o) for j, o in enumerate(results)):
            results[k] = _copy(r)


def _read_only(a) -> bool:
    return isinstance(a, np.ndarray) and not a.flags.writeable


def _overlap(a, b) -> bool:
    a, b = _simulated(a), _simulated(b)
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return np.may_share_memory(a, b)
    span_a, span_b = _device_span(a), _device_span(b)
    return span_a is not None and span_b is not None and span_a[0] < span_b[1] and span_b[0] < span_a[1]


def _simulated(a):
    """numba's CUDA simulator keeps a device array's memory in a numpy array (and gives no
    __cuda_array_interface__): that array; anything else as it is."""
    if is_numba_device_array(a) and isinstance(getattr(a, "_ary", None), np.ndarray):
        return a._ary
    return a


def _device_span(a) -> tuple[int, int] | None:
    """The device addresses a GPU array's elements lie within; None for host arrays and empty ones."""
    interface = None if isinstance(a, np.ndarray) else getattr(a, "__cuda_array_interface__", None)
    if interface is None or not all(interface["shape"]):
        return None
    shape, itemsize = interface["shape"], np.dtype(interface["typestr"]).itemsize
    strides = interface.get("strides") or c_strides(shape, itemsize)
    start = interface["data"][0]
    low = sum(s * (n - 1) for s, n in zip(strides, shape) if s < 0)
    high = sum(s * (n - 1) for s, n in zip(strides, shape) if s > 0)
    return start + low, start + high + itemsize


def _copy(a):
    """A copy of its own: C-ordered on the host, a fresh device array on the GPU."""
    if isinstance(a, np.ndarray):
        return np.array(a, order="C")
    from numba import cuda

    source = a if is_numba_device_array(a) else cuda.as_cuda_array(a)
    out = cuda.device_array(source.shape, source.dtype)
    out.copy_to_device(source)
    return out

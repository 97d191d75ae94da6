"""Compiled CUDA kernels: a generated module loaded through the compile cache, and a
launcher that maps a group's device arrays onto the kernel's parameters.

Kernel modules are files in the compile cache (numba-cuda, like numba, caches compiled
code only for functions defined in a file). On a GPU each kernel is compiled when the
group is lowered, for the exact argument types it will be launched with; under the
simulator there is nothing to compile.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import CompileError
from ...ir.core import Operation
from ...ir.opdef import Trait
from ...ir.shapes import Sym, evaluate_shape
from ...version import __version__
from ..base import KernelParam
from ..kernel_cache import default_cache, support_hash
from ..loopnest import ARGUMENT_LISTS
from . import barriers
from .launch import Launch, Policy

_HEADER = '''"""jit.group {gid} ({key}): {ops}. CUDA, {layouts}."""

import math  # noqa: F401

import numpy as np
from numba import cuda

from jitlab.backends.numba_cuda.devicefns import {names}  # noqa: F401
'''


def module_source(group: Operation, kernels: list[tuple[str, str]]) -> str:
    """One module holding the group's kernel functions; `kernels` is (source, layout) pairs.

    No module leaves here with a barrier some threads of a block may skip (barriers.py): such a
    kernel would hang the GPU, so it is refused before it is ever launched."""
    from . import devicefns  # imports numba.cuda: only when a group is compiled for cuda

    ops = ", ".join(op.name for op in group.body.ops if not op.has(Trait.TERMINATOR))
    header = _HEADER.format(gid=group.attrs["id"], key=group.attrs["key"], ops=ops,
                            layouts=" + ".join(f"{layout} layout" for _, layout in kernels),
                            names=", ".join(["REDUCE_SLOTS", *devicefns.NAMES]))
    source = header + "".join(f"\n\n@cuda.jit(cache=True)\n{src}\n" for src, _ in kernels)
    barriers.check(source, f"the CUDA kernels of jit.group {group.attrs['id']} ({group.attrs['key']})")
    return source


def load_module(group: Operation, source: str, options: dict[str, Any]):
    """The kernel module from the compile cache (written and imported on a miss)."""
    import numba

    from .device import simulator_enabled

    parts = {"structure": group.attrs["key"], "backend": "numba_cuda",
             "source": hashlib.sha256(source.encode()).hexdigest()[:16],
             "versions": f"jitlab {__version__}, numba {numba.__version__}, numpy {np.__version__}, "
                         f"simulator {simulator_enabled()}",
             "support": support_hash("jitlab.backends.scalar_semantics", "jitlab.backends.numba_cuda.devicefns")}
    return (options.get("cache") or default_cache()).load(parts, source)


class Launcher:
    """Launches one generated kernel: picks its arrays, dims and launch configuration."""

    def __init__(self, fn, params: Sequence[KernelParam], space: tuple, layout: str, flat: bool, policy: Policy,
                 tile: int = 0, conv: tuple[int, int] | None = None,
                 plan_dims: tuple[list[int], list[int]] | None = None):
        self.fn, self.space, self.layout, self.flat, self.policy = fn, space, layout, flat, policy
        self.tile, self.conv = tile, conv
        self.plan_dims = plan_dims          # (row dims, reduced dims) of a generated kernel
        self.params = tuple(params)
        self.slots = [(ARGUMENT_LISTS[p.role], p.index) for p in params if p.is_array]
        self.n_dims = sum(1 for p in params if not p.is_array)
        self.static = None if any(isinstance(d, Sym) for d in space) else tuple(int(d) for d in space)
        self._launches: dict[tuple, Launch] = {}

    def dims(self, outputs, bindings) -> tuple[int, ...]:
        if self.flat:
            return (outputs[0].size,)       # an input broadcast whole has size 1 even then
        return self.static if self.static is not None else evaluate_shape(self.space, bindings)

    def __call__(self, inputs, outputs, extra, bindings, stream) -> None:
        sources = (inputs, outputs, extra)
        arrays = [sources[kind][i] for kind, i in self.slots]
        if all(o.size == 0 for o in outputs):
            return
        dims = self.dims(outputs, bindings)
        if self.flat:
            arrays = [a.reshape(a.size) for a in arrays]
        launch = self._launches.get(dims) or self._launches.setdefault(dims, self.configure(dims))
        self.fn[launch.grid, launch.block, stream](*arrays, *dims[:self.n_dims])

    def configure(self, dims: tuple[int, ...]) -> Launch:
        """The launch for these concrete dims."""
        if self.layout == "tile":
            if self.conv is not None:
                groups, out_per_group = self.conv
                return self.policy.tiles(self.tile, out_per_group, dims[0] * dims[2] * dims[3], groups)
            return self.policy.tiles(self.tile, dims[-2], dims[-1], math.prod(dims[:-2]))
        outer, inner = self.plan_dims or (list(range(len(dims))), [])
        size = math.prod(dims[d] for d in outer)
        if self.layout == "rows":
            return self.policy.rows(size, math.prod(dims[d] for d in inner))
        return self.policy.elementwise(size)


def signature(params: Sequence[KernelParam]) -> tuple:
    """The numba types a kernel is compiled for: C-contiguous device arrays, int64 extents."""
    import numba
    from numba import types

    return tuple(types.Array(numba.from_dtype(p.dtype), p.ndim, "C") if p.is_array else types.int64
                 for p in params)


def compile_launcher(launcher: Launcher, path: str) -> float:
    """Compiles the kernel for its argument types on a GPU; returns the seconds it took."""
    from .device import simulator_enabled

    if simulator_enabled():
        return 0.0
    start = time.perf_counter()
    sig = signature(launcher.params)
    try:
        launcher.fn.compile(sig)
    except Exception as e:     # numba raises its own typing and lowering errors
        raise CompileError(f"numba.cuda could not compile {path}: {type(e).__name__}: {e}") from e
    return time.perf_counter() - start

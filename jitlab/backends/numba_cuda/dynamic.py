"""np.dynamic_slice and np.dynamic_update_slice as device kernels, their offsets checked on the device.

The offsets are device scalars (a loop's induction variable, a value computed on the device), so
the check runs in the kernel: every thread reads them and applies numpy's rules (dialects/np/
dynamic.py's `offsets`), and when one fails no thread touches an array; thread 0 records the
failure in the call's `FaultRecord` (a small device array) and the kernel returns. Nothing is read
back per launch: the record is read at the synchronisations the call has anyway (its end, a while
loop's condition, an if's predicate), and a failure there is the OutOfBoundsError O0 raises, with
the iteration of every enclosing loop (the kernel is passed the loop frame and iteration it ran in).
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import numpy as np

from ...dialects.np.dynamic import offsets
from ...dialects.scf import where
from ...errors import OutOfBoundsError
from ...ir.core import Operation
from ...version import __version__
from ..kernel_cache import default_cache
from . import barriers, device
from .launch import Policy

DYNAMIC_OPS = ("np.dynamic_slice", "np.dynamic_update_slice")
_RECORDED = ("site", "frame", "it", "bad", "badv", "badn")    # the kernel's names for what follows the flag
_FIELDS = 1 + len(_RECORDED)    # failed, site, loop frame, iteration, start position, start, axis length


class FaultRecord:
    """A call's out-of-range offsets: the first one found on the device, with where it happened.

    Sites are the dynamic ops launched; frames are loop runs (the op, its parent frame and the parent's
    iteration when it started), one per run of a loop rather than per iteration, so the host keeps
    nothing per iteration."""

    def __init__(self, cuda):
        self.cuda = cuda
        self.array = cuda.to_device(np.zeros(_FIELDS, np.int64))
        self.sites: dict[int, int] = {}
        self.ops: list[Operation] = []
        self.frames: list[tuple[Operation, int, int]] = []
        self.frame, self.iteration = -1, 0      # where launches run now (-1: outside any loop)
        self.launched = False                   # a checked kernel ran in this call: the record may be set

    def site(self, op: Operation) -> int:
        k = self.sites.get(op.uid)
        if k is None:
            k = self.sites[op.uid] = len(self.ops)
            self.ops.append(op)
        return k

    def enter(self, op: Operation) -> tuple[int, int]:
        """A loop starts: its frame becomes the current one; returns what to restore when it ends."""
        saved = (self.frame, self.iteration)
        self.frames.append((op, self.frame, self.iteration))
        self.frame, self.iteration = len(self.frames) - 1, 0
        return saved

    def leave(self, saved: tuple[int, int]) -> None:
        self.frame, self.iteration = saved

    def queue_read(self, stream) -> np.ndarray | None:
        """A copy of the record queued on `stream` (read it after synchronising), or None when no checked
        kernel ran in this call, so the record cannot be set."""
        return self.array.copy_to_host(stream=stream) if self.launched else None

    def error(self, record: np.ndarray | None, stream) -> OutOfBoundsError | None:
        """The failure a synchronised `queue_read` holds as O0's OutOfBoundsError (the record cleared for
        the next call), or None."""
        if record is None or not record[0]:
            return None
        self.array.copy_to_device(np.zeros(_FIELDS, np.int64), stream=stream)
        return self._error(*(int(v) for v in record[1:]))

    def clear(self) -> None:
        """After a call that ended in another error: waits for what it queued and clears the record."""
        if self.launched:
            self.cuda.synchronize()
            self.array.copy_to_device(np.zeros(_FIELDS, np.int64))

    def reset(self) -> None:
        """A new call: no loop frames, nothing launched."""
        self.frames.clear()
        self.frame, self.iteration, self.launched = -1, 0, False

    def _error(self, site: int, frame: int, iteration: int, position: int, start: int, n: int) -> OutOfBoundsError:
        op = self.ops[site]
        axis, size = op.attrs["axes"][position], op.attrs["sizes"][position]
        shape = [0] * (axis + 1)
        shape[axis] = n
        try:
            offsets(op.name, shape, [start], [axis], [size], op.attrs["index_axes"])
            message = f"{op.name}: offset {start} out of range for axis {axis} with size {n}"
        except OutOfBoundsError as e:
            message = str(e)
        while frame >= 0:
            loop, parent, parent_iteration = self.frames[frame]
            message += f" (iteration {iteration} of the {where(loop)})"
            frame, iteration = parent, parent_iteration
        return OutOfBoundsError(message)


class DynamicKernel:
    """One dynamic op's kernel: `run(executor, step, operands, bindings, alloc, stream)` as the executor calls
    a step's device runner."""

    def __init__(self, op: Operation, policy: Policy, options: dict[str, Any]):
        self.op, self.policy = op, policy
        self.update = op.name == "np.dynamic_update_slice"
        rank = op.operands[0].type.rank
        self.source = kernel_source(self.update, rank, op.attrs["axes"], op.attrs["sizes"], op.attrs["index_axes"])
        self.fn = load(self.source, "k0", options)

    def __call__(self, executor, step, operands: list, bindings: dict[str, int], alloc, stream) -> list:
        x = operands[0]
        shape = step.shapes(bindings)[0]
        out = alloc(step.outs[0], shape, step.types[0].dtype, stream)
        total = math.prod(shape)        # launched when 0 too: the offsets are checked all the same
        faults = executor.faults
        faults.launched = True
        arrays = [x.reshape(x.size), out.reshape(out.size)]
        if self.update:
            arrays.append(operands[1].reshape(operands[1].size))
        starts = [s.reshape(1) for s in operands[2 if self.update else 1:]]
        launch = self.policy.elementwise(total)
        self.fn[launch.grid, launch.block, stream](*arrays, *starts, *x.shape, total, faults.array,
                                                   faults.site(self.op), faults.frame, faults.iteration)
        executor.stats["launches"] += 1
        return [out]


INDUCTION_SOURCE = '''from numba import cuda


@cuda.jit(cache=True)
def induction(out, lo, step, n):
    for j in range(cuda.grid(1), n, cuda.gridsize(1)):
        out[j] = lo + j * step
'''


def load(source: str, name: str, options: dict[str, Any]):
    """Kernel `name` of a module of this file's, through the kernel cache (barriers checked first)."""
    import numba

    barriers.check(source, f"the control-flow kernel {name}")
    parts = {"structure": f"control-flow {name}", "backend": "numba_cuda",
             "source": hashlib.sha256(source.encode()).hexdigest()[:16],
             "versions": f"jitlab {__version__}, numba {numba.__version__}, numpy {np.__version__}, "
                         f"simulator {device.simulator_enabled()}"}
    return getattr((options.get("cache") or default_cache()).load(parts, source).module, name)


def _normalise(p: int, a: int, k: int, index: bool) -> list[str]:
    """Lines computing offset `o{p}` along axis `a` and setting `bad` to `p` where numpy's rules refuse it."""
    s, n = f"s{p}", f"n{a}"
    if index:
        return [f"    v{p} = numba.int64({s}[0])",
                f"    o{p} = v{p} + {n} if v{p} < 0 else v{p}",
                f"    if bad < 0 and (v{p} < -{n} or v{p} >= {n}):",
                f"        bad, badv, badn = {p}, v{p}, {n}"]
    return [f"    v{p} = numba.int64({s}[0])",             # Python's slice bounds: b = v, e = v + k, clamped
            f"    b{p} = min(max(v{p} + {n} if v{p} < 0 else v{p}, 0), {n})",
            f"    e{p} = min(max(v{p} + {k} + {n} if v{p} + {k} < 0 else v{p} + {k}, 0), {n})",
            f"    o{p} = b{p} if {k} > 0 else 0",
            f"    if bad < 0 and max(e{p} - b{p}, 0) != {k}:",
            f"        bad, badv, badn = {p}, v{p}, {n}"]


def kernel_source(update: bool, rank: int, axes, sizes, index_axes) -> str:
    """The module source of the kernel `k0` for a dynamic slice (or update) of a rank-`rank` array."""
    params = ["x", "out", *(["v"] if update else []), *(f"s{p}" for p in range(len(axes))),
              *(f"n{d}" for d in range(rank)), "total", "fault", "site", "frame", "it"]
    lines = ["import numba", "from numba import cuda", "", "", "@cuda.jit(cache=True)",
             f"def k0({', '.join(params)}):", "    bad, badv, badn = -1, 0, 0"]
    for p, (a, k) in enumerate(zip(axes, sizes)):
        lines += _normalise(p, a, k, a in index_axes)
    lines += ["    if bad >= 0:",                   # the same on every thread: no array is touched
              "        if cuda.grid(1) == 0 and cuda.atomic.cas(fault, 0, 0, 1) == 0:",
              *(f"            fault[{k}] = {v}" for k, v in enumerate(_RECORDED, 1)),
              "        return"]
    return "\n".join(lines + _element_loop(update, rank, axes, sizes)) + "\n"


def _element_loop(update: bool, rank: int, axes, sizes) -> list[str]:
    """The grid-stride loop over the result's elements, once the offsets `o{p}` passed the check."""
    dims = {d: f"n{d}" for d in range(rank)}
    offset, extent = dict.fromkeys(range(rank), "0"), dict(dims)      # the block's, along each axis
    for p, (a, k) in enumerate(zip(axes, sizes)):
        offset[a], extent[a] = f"o{p}", str(k)
    walk = dims if update else extent        # the result has x's shape, or the block's
    lines = ["    for j in range(cuda.grid(1), total, cuda.gridsize(1)):", "        r = j"]
    for d in reversed(range(rank)):
        lines += [f"        i{d} = r % {walk[d]}", f"        r //= {walk[d]}"]
    if not update:
        return lines + [f"        out[j] = x[{_flat([f'i{d} + {offset[d]}' for d in range(rank)], dims)}]"]
    inside = " and ".join(f"{offset[a]} <= i{a} < {offset[a]} + {extent[a]}" for a in axes) or "True"
    return lines + [f"        if {inside}:",
                    f"            out[j] = v[{_flat([f'i{d} - {offset[d]}' for d in range(rank)], extent)}]",
                    "        else:",
                    "            out[j] = x[j]"]


def _flat(index: list[str], dims: dict[int, str]) -> str:
    """The row-major flat offset of `index` in an array of extents `dims`."""
    text = f"({index[0]})"
    for d in range(1, len(index)):
        text = f"({text} * {dims[d]} + ({index[d]}))"
    return text

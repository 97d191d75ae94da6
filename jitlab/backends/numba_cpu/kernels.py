"""Compiling a group into a kernel for the CPU: its loop nest generated as numba source, then
linked into a native library (native_build.py) or, where it cannot be, run as numba
dispatchers; contractions run a library product (contraction.py) and a generated epilogue."""

from __future__ import annotations

import hashlib
import os
import time
import warnings
from collections.abc import Sequence
from typing import Any

import llvmlite
import numba
import numpy as np

from ...ir.core import Operation, OpResult, Value
from ...ir.opdef import Trait
from ...ir.shapes import Sym
from ...report import KernelTiming
from ...version import __version__
from ..base import Kernel, KernelParam, ParamRole, is_readonly
from ..kernel_cache import KernelCache, default_cache, support_hash
from ..loopnest import ARGUMENT_LISTS, PARALLEL_THRESHOLD, reads_result_in_place
from ..native import CallLayout, NativeKernel
from . import conv_native, helpers, native_build, winograd
from .backend import contraction_of, contraction_operands, epilogue_target, is_epilogue_op
from .codegen import generate
from .contraction import ContractionKernel, Conv, Matmul, NativeConv, NativeWinograd, Winograd
from .fastmath import TABLE as FASTMATH_TABLE
from .scalar import fastmath_name
from .selection import select
from .timing import timed_compile

# numba's default OpenMP threads keep spinning after a parallel loop and slow the next OpenBLAS
# call (docs/performance.md, "What decides speed", 4); the workqueue layer does not. A user's
# own choice wins.
if "NUMBA_THREADING_LAYER" not in os.environ:
    numba.config.THREADING_LAYER = "workqueue"

# FMA contraction only; a reduction's accumulation is reassociable on its own (bits.radd): the
# whole kernel with `reassoc` lets LLVM rewrite x - x * c into x * (1 - c), wrong at infinities
FASTMATH = {"contract"}
HELPER_NAMES = sorted(n for n in vars(helpers) if n.startswith("_") and not n.startswith("__")
                      and callable(getattr(helpers, n)))


def compile_group(group: Operation, options: dict[str, Any]) -> Kernel:
    """The group's kernel: a contraction's library product and epilogue, else its loop nest (or
    numpy op by op, where selection prefers it)."""
    contraction = contraction_of(group)
    if contraction is not None:
        return _compile_contraction(group, contraction, options)
    return select(group, _compile_generated(group, options), bool(options.get("autotune", False)))


_MODULE_HEADER = """\
import math  # noqa: F401

import numba  # noqa: F401
import numpy as np
from numba import njit, prange  # noqa: F401

from jitlab.backends.numba_cpu.bits import maximum as fmaximum, minimum as fminimum, nonneg, radd, rmul  # noqa: F401
from jitlab.backends.numba_cpu.fastmath import TABLE as FASTMATH
from jitlab.backends.numba_cpu.helpers import {helpers}  # noqa: F401
from jitlab.backends.numba_cpu.rows import exp_nonpositive_float32, exp_nonpositive_float64  # noqa: F401
from jitlab.errors import InputError  # noqa: F401

FLAGS = {flags}
{fastmath}
"""


def module_header() -> str:
    """The imports and flags every generated kernel module starts with."""
    flags = "{" + ", ".join(repr(f) for f in sorted(FASTMATH)) + "}"
    fast = "\n".join(f"{fastmath_name(impl)} = FASTMATH[{key!r}].fn" for key, impl in sorted(FASTMATH_TABLE.items()))
    return _MODULE_HEADER.format(helpers=", ".join(HELPER_NAMES), flags=flags, fastmath=fast)


def _module_source(group: Operation, par: str, seq: str) -> str:
    # Nothing of one group (its id, its shape-specific key) goes into the text: groups whose loop
    # nests differ only in their sizes (ResNet's conv epilogues) generate the same module, which
    # numba compiles once for all of them.
    ops = ", ".join(op.name for op in group.body.ops if not op.has(Trait.TERMINATOR))
    decorator = '@njit({}fastmath=FLAGS, error_model="numpy", cache=True)'
    return (f'"""jitlab kernel: {ops}."""\n\n' + module_header()
            + f"\n\n{decorator.format('parallel=True, ' if 'prange(' in par else '')}\n{par}\n\n\n"
            + f"{decorator.format('')}\n{seq}\n")


def _key_parts(group: Operation, signature: str, source: str) -> dict[str, str]:
    return key_parts_for(generic_structure(group), signature, source)


def generic_structure(group: Operation) -> str:
    """A group's structure without its sizes (op names, dtypes and ranks): the anchor a cache miss
    is explained against. The source and signature parts of the key hold everything else."""
    text = ";".join(f"{op.name}:" + ",".join(f"{r.type.dtype}/{r.type.rank}" for r in op.results)
                    for op in group.body.ops)
    return "s" + hashlib.sha256(text.encode()).hexdigest()[:16]


# Every module whose functions or constants a generated kernel reaches, directly or not: their text
# is part of a kernel's cache key, since numba's cache of a module checks only its own source
# (library.conv2d_nb calls conv_operands.conv_views).
SUPPORT_MODULES = tuple(f"jitlab.backends.{m}" for m in (
    "scalar_semantics", "numba_cpu.helpers", "numba_cpu.fastmath", "numba_cpu.bits", "numba_cpu.blas",
    "numba_cpu.library", "numba_cpu.rows", "numba_cpu.conv_parts", "numba_cpu.conv_operands",
    "numba_cpu.winograd", "numba_cpu.numpy_blas", "numba_cpu.cores"))


def key_parts_for(structure: str, signature: str, source: str) -> dict[str, str]:
    """The parts of a kernel's cache key: its structure, signature, source hash and the versions that built it."""
    return {"structure": structure, "signature": signature, "backend": "numba_cpu",
            "source": hashlib.sha256(source.encode()).hexdigest()[:16],
            "versions": f"jitlab {__version__}, numba {numba.__version__}, llvmlite {llvmlite.__version__}, "
                        f"numpy {np.__version__}",
            "support": support_hash(*SUPPORT_MODULES)}


def numba_type(param: KernelParam, readonly: bool = False):
    """The numba type a generated function is compiled for at this parameter."""
    if not param.is_array:
        return numba.from_dtype(param.dtype)
    return numba.types.Array(numba.from_dtype(param.dtype), param.ndim, "C", readonly=readonly)


def _signature(params: Sequence[KernelParam], group: Operation) -> tuple:
    readonly = {i for i, v in enumerate(group.operands) if is_readonly(v)}
    return tuple(numba_type(p, p.role is ParamRole.INPUT and p.index in readonly) for p in params)




class _Generated:
    """A generated loop nest over a group block, compiled: as a native library where it can be
    (native_build.py), else as numba dispatchers of its parallel and sequential variants."""

    def __init__(self, group: Operation, block, materialized: Sequence[Value], options: dict[str, Any]):
        start = time.perf_counter()
        kernel = generate(block, "k", materialized)
        self.params = tuple(kernel.params)
        self.source = _module_source(group, kernel.par, kernel.seq)
        self.layout = _layout(kernel, self.params, block)
        self.reductions = bool(kernel.plan.reductions)
        self.signature = _signature(self.params, group)
        generated = time.perf_counter()
        cache = options.get("cache") or default_cache()
        parts = _key_parts(group, str(self.signature), self.source)
        self.code = cache.full_key(parts)
        self.timing = KernelTiming(codegen=generated - start)
        self.native, miss, self.native_reason = native_build.library_for(
            *native_build.kernel_chunk(kernel), self.params, self.signature, parts, cache, module_header(),
            self.timing)
        if self.native is not None:
            # what numba did (a build) is timed already: the rest is finding, writing and loading the library
            self.timing.kernel_cache = time.perf_counter() - generated - (self.timing.sum() - self.timing.codegen)
            self.cache_hit, self.miss_reason = not miss, miss
        else:
            entry = cache.load(parts, self.source)
            self.timing.kernel_cache = time.perf_counter() - generated
            self.par, self.seq = entry.module.k_par, entry.module.k_seq
            self._compile_needed(entry.module.__file__)
            self.cache_hit, self.miss_reason = entry.hit, entry.miss_reason
        self.seconds = time.perf_counter() - start

    def merge_last_two(self, ops: Sequence[Operation]) -> None:
        """Loops over the last two dims as one (H*W pixels in place of H rows of W) when `ops`, all
        the ops this kernel computes, are elementwise and every value they touch is full in those
        dims or broadcast over both: the nest then reads and writes the same elements, and its
        inner loop is long enough to vectorize (ResNet-50's conv epilogues with a per-channel bias
        ran 3-8x faster on its 56x56 to 7x7 maps)."""
        space = self.layout.static_space
        if space is None or len(space) < 3 or self.reductions or self.layout.flat or 1 in space[-2:]:
            return
        if all(op.has(Trait.ELEMENTWISE) or op.has(Trait.CONSTANT) for op in ops) and all(
                _full_or_broadcast(v.type.shape, space[-2:]) for op in ops for v in (*op.operands, *op.results)):
            self.layout.merged = (*space[:-2], 1, space[-2] * space[-1])

    @property
    def run(self):
        """What runs the kernel: the native library's caller, else this object's numba variants."""
        return NativeKernel(self.layout, self.native) if self.native is not None else self

    @property
    def how(self) -> str:
        """How it runs, for the kernel's record."""
        if self.native is not None:
            return "native library" + (", split over threads" if self.native.chunked else "")
        return f"numba dispatchers (no native library: {self.native_reason})"

    def _compile_needed(self, path: str) -> None:
        size = self.layout.static_size
        for fn, wanted in ((self.par, size is None or size >= PARALLEL_THRESHOLD),
                           (self.seq, size is None or size < PARALLEL_THRESHOLD)):
            if wanted and self.signature not in fn.overloads:
                # Another group of this structure may have compiled only the other variant and
                # disabled compiling; this explicit compile is the one wanted.
                fn.disable_compile(False)
                self.timing.add(compile_or_recover(fn, self.signature, path))
                # A later call with other argument types would be a bug: fail loudly, never recompile.
                fn.disable_compile()

    def __call__(self, inputs, outputs, bindings: dict[str, int] | None = None, extra: Sequence[np.ndarray] = ()
                 ) -> None:
        """Calls the numba kernel (a Kernel's `run`); `extra` are the materialized arrays (m0, ...)
        after inputs and outputs."""
        args, dims, size = self.layout.arguments(inputs, outputs, bindings, extra)
        (self.par if size >= PARALLEL_THRESHOLD else self.seq)(*args, *dims)


def _full_or_broadcast(shape: tuple, tail: tuple) -> bool:
    """Whether a value of `shape` spans the last two dims of the space (`tail`) or is broadcast over both."""
    return tuple(shape[-2:]) == tuple(tail) or all(d == 1 for d in shape[-2:])


def _layout(kernel, params: tuple[KernelParam, ...], block) -> CallLayout:
    arrays = [p for p in params if p.is_array]
    slots = tuple((ARGUMENT_LISTS[p.role], p.index) for p in arrays)
    n_outputs = len(block.last_op.operands)
    space = tuple(kernel.plan.space)
    return CallLayout(slots=slots, plain=slots == tuple([(0, i) for i in range(len(block.args))]
                                                        + [(1, j) for j in range(n_outputs)]),
                      flat=kernel.flat, reshape=kernel.flat and any(len(p.shape) != 1 for p in arrays), space=space,
                      static_space=None if kernel.flat or any(isinstance(d, Sym) for d in space)
                      else tuple(int(d) for d in space))


def compile_or_recover(fn, signature: tuple, path: str) -> KernelTiming:
    """Compiles (or loads from numba's cache), timed; an unreadable cache file is removed and compiled anew."""
    try:
        return timed_compile(fn, signature)
    except Exception as e:  # a damaged pickle in numba's cache can raise almost any exception type
        if not KernelCache.clear_compiled(path):
            raise
        warnings.warn(f"jitlab: numba's compiled cache for {os.path.basename(path)} was unreadable "
                      f"({type(e).__name__}); recompiling", RuntimeWarning, stacklevel=2)
        return timed_compile(fn, signature)



def _compile_generated(group: Operation, options: dict[str, Any]) -> Kernel:
    gen = _Generated(group, group.body, (), options)
    gen.merge_last_two([op for op in group.body.ops if not op.has(Trait.TERMINATOR)])
    return Kernel(group.attrs["key"], "numba_cpu", gen.run, gen.source, gen.seconds, gen.cache_hit,
                  # codegen's store_all reads every input before writing an output at an index
                  gen.miss_reason, choice=f"{_choice(group)}; {gen.how}{_merged(gen, 'it')}", reads_before_writes=True,
                  timing=gen.timing, code=gen.code, params=gen.params)


def _merged(gen: _Generated, subject: str) -> str:
    return f"; {subject} loops over the last two dims as one" if gen.layout.merged is not None else ""


def _choice(group: Operation) -> str:
    n = sum(1 for op in group.body.ops if not (op.has(Trait.TERMINATOR) or op.has(Trait.CONSTANT)))
    if n == 1:
        return "generated: one op, written straight into its output buffer"
    return f"generated: {n} ops fused into one pass over memory"




# -- contractions ------------------------------------------------------------------------

def _library(group: Operation, con: Operation, options: dict[str, Any]) -> tuple[Any, str, KernelTiming | None]:
    """The contraction's library product, its name for the record and the time a native
    convolution library's build took (None where none was looked for)."""
    if con.name == "np.matmul":
        return Matmul(), "BLAS matmul", None
    timing = KernelTiming()
    entries, why = conv_native.conv_library(con.result.type.dtype, options.get("cache") or default_cache(), timing)
    where = "native library, split over threads" if entries else f"numba's threads ({why})"
    a = con.attrs
    if winograd.fits(con) and _reads_constant(group, con.operands[1]):
        kind = NativeWinograd(entries=entries) if entries else Winograd()
        return kind, f"Winograd F(2x2,3x3) conv, 16 BLAS calls, {where}", timing
    geometry = (tuple(a["strides"]), tuple(a["pads"]), tuple(a["dilations"]), a["groups"])
    kind = NativeConv(*geometry, entries=entries) if entries else Conv(*geometry)
    return kind, f"im2col + BLAS conv, {where}", timing


def _reads_constant(group: Operation, arg: Value) -> bool:
    """Whether the group input `arg` is a weight or constant itself (not a view of one): the same
    array, never written, every call."""
    if arg not in group.body.args:
        return False
    value = group.operands[group.body.args.index(arg)]
    return isinstance(value, OpResult) and (value.op.name == "np.weight" or value.op.has(Trait.CONSTANT))


def _compile_contraction(group: Operation, con: Operation, options: dict[str, Any]) -> Kernel:
    block = group.body
    outputs = list(block.last_op.operands)
    has_epilogue = any(is_epilogue_op(op, con) for op in block.ops)
    gen = _Generated(group, block, [con.result], options) if has_epilogue else None
    if gen is not None:
        gen.merge_last_two([op for op in block.ops if is_epilogue_op(op, con)])
    in_place = epilogue_target(con, outputs)
    product = outputs.index(con.result) if con.result in outputs else None
    library, algorithm, built = _library(group, con, options)
    run = ContractionKernel(library, contraction_operands(block, con), product,
                            in_place if product is None else None, con.result.type.shape, con.result.type.dtype,
                            gen.run if gen is not None else None)
    source = gen.source if gen is not None else f"# {con.name}: library kernel, no epilogue\n"
    choice = f"library {algorithm}" + (
        " with a generated epilogue" + _epilogue_place(con, outputs, in_place) + f" ({gen.how})"
        if gen is not None else "")
    if gen is not None:
        choice += _merged(gen, "the epilogue")
    timing = gen.timing if gen else KernelTiming()
    waited = built.sum() if built is not None else 0.0      # for the native convolution library's build
    if built is not None:
        timing.add(built)
    return Kernel(group.attrs["key"], "numba_cpu", run, source, (gen.seconds if gen else 0.0) + waited,
                  gen.cache_hit if gen else True,
                  gen.miss_reason if gen else "", choice, timing=timing, code=gen.code if gen else "",
                  params=gen.params if gen else ())


def _epilogue_place(con: Operation, outputs: list[Value], in_place: int | None) -> str:
    if con.result in outputs:
        return ""
    if in_place is not None:
        return f" (updating the product in place in output {in_place})"
    if not reads_result_in_place(con):
        return " (the product in a buffer of its own: the epilogue reads it at other indices)"
    return " (the product in a buffer of its own: no output has its shape and dtype)"


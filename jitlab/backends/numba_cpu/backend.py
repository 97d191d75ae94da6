"""The numba CPU backend: which ops it fuses, and compiling a group into a kernel."""

from __future__ import annotations

import hashlib
import math
import os
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import llvmlite
import numba
import numpy as np

from ...dialects.np.writes import is_write
from ...ir.core import Operation, OpResult, Value
from ...ir.opdef import Trait
from ...ir.shapes import Sym, evaluate_shape
from ...report import FusionKind, KernelTiming
from ...version import __version__
from ..base import Backend, Kernel, KernelParam, ParamRole, is_readonly, register_backend
from ..indexing import INDEX_RULES, has_static_offsets, is_unit_reshape
from ..kernel_cache import KernelCache, default_cache, support_hash
from ..loopnest import ARGUMENT_LISTS, REDUCTIONS, reads_result_in_place
from . import helpers, winograd
from .codegen import PARALLEL_THRESHOLD, generate
from .fastmath import TABLE as FASTMATH_TABLE
from .library import conv2d_into, matmul_into, winograd_into
from .scalar import SCALAR_RULES, fastmath_name
from .selection import select
from .timing import timed_compile

FASTMATH = {"reassoc", "contract"}     # vectorizes reductions; keeps NaN, inf and signed zeros exact
NUMBA_DTYPES = {np.dtype(t) for t in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                                 "uint64", "float32", "float64", "complex64", "complex128")}
HELPER_NAMES = sorted(n for n in vars(helpers) if n.startswith("_") and not n.startswith("__")
                      and callable(getattr(helpers, n)))


@register_backend
class NumbaCPUBackend(Backend):
    """Fused loop nests generated as numba source; BLAS for contractions."""

    name = "numba_cpu"
    options = ("autotune",)
    device = "cpu"
    folds_operand_transposes = True

    def fusion_kind(self, op: Operation) -> FusionKind:
        return fusion_kind(op)

    def supports(self, op: Operation) -> str | None:
        return loop_nest_support(op, self.name)

    def compile_program(self, program, report, options: dict[str, Any]):
        from .o2 import compile_program

        return compile_program(program, report, options)

    def compile_group(self, group: Operation, options: dict[str, Any]) -> Kernel:
        contraction = next((op for op in group.body.ops if op.has(Trait.CONTRACTION)), None)
        if contraction is not None:
            return _compile_contraction(group, contraction, options)
        return select(group, _compile_generated(group, options), bool(options.get("autotune", False)))


def fusion_kind(op: Operation) -> FusionKind:
    """How `op` takes part in fusion when groups become numba loop nests (on either device)."""
    if op.has(Trait.ELEMENTWISE):
        return FusionKind.ELEMENTWISE
    if op.name == "np.reshape" and not is_unit_reshape(op):
        return FusionKind.VIEW
    if op.name in INDEX_RULES:
        return FusionKind.INJECTIVE
    if op.name in REDUCTIONS:
        return FusionKind.REDUCTION
    if is_write(op):
        return FusionKind.WRITE
    if op.name in _CONTRACTIONS:
        return FusionKind.CONTRACTION
    return FusionKind.OPAQUE


def loop_nest_support(op: Operation, backend: str) -> str | None:
    """None if a generated loop nest can compute `op`, else why not, in the words of `backend`."""
    for v in list(op.operands) + op.results:
        if v.type.dtype not in NUMBA_DTYPES:
            return f"{v.type.dtype} is not supported by {backend}"
    kind = fusion_kind(op)
    if kind == FusionKind.ELEMENTWISE and op.name not in SCALAR_RULES:
        if op.has(Trait.COMPOSITE):
            return "composite op: the decompose pass turns it into primitives first"
        return f"no scalar rule for {op.name} in {backend}"
    if kind == FusionKind.INJECTIVE and not has_static_offsets(op):
        return "a slice with a symbolic start cannot become an index map"
    if kind == FusionKind.WRITE and not all(v.type.is_static for v in list(op.operands) + op.results):
        return "a write into an array of symbolic shape runs as a numpy library kernel"
    if kind == FusionKind.OPAQUE:
        if op.has(Trait.COMPOSITE):
            return "composite op: the decompose pass turns it into primitives first"
        return "no generated kernel for this op: it runs as a numpy library kernel"
    if kind == FusionKind.CONTRACTION and op.name == "np.matmul" and not _blas_shaped(op):
        return "vector products other than matrix @ vector and vector @ matrix run as numpy library kernels"
    return None


_MODULE_HEADER = """\
import math  # noqa: F401

import numba  # noqa: F401
import numpy as np
from numba import njit, prange  # noqa: F401

from jitlab.backends.numba_cpu.bits import maximum as fmaximum, minimum as fminimum  # noqa: F401
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
            + f"\n\n{decorator.format('parallel=True, ')}\n{par}\n\n\n{decorator.format('')}\n{seq}\n")


def _key_parts(group: Operation, signature: str, source: str) -> dict[str, str]:
    return _key_parts_for(generic_structure(group), signature, source)


def generic_structure(group: Operation) -> str:
    """A group's structure without its sizes (op names, dtypes and ranks): the anchor a cache miss
    is explained against. The source and signature parts of the key hold everything else."""
    text = ";".join(f"{op.name}:" + ",".join(f"{r.type.dtype}/{r.type.rank}" for r in op.results)
                    for op in group.body.ops)
    return "s" + hashlib.sha256(text.encode()).hexdigest()[:16]


# The modules generated kernels call into: their text is part of a kernel's cache key.
SUPPORT_MODULES = tuple(f"jitlab.backends.{m}" for m in (
    "scalar_semantics", "numba_cpu.helpers", "numba_cpu.fastmath", "numba_cpu.bits", "numba_cpu.blas",
    "numba_cpu.library", "numba_cpu.rows"))


def _key_parts_for(structure: str, signature: str, source: str) -> dict[str, str]:
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
    """A generated loop nest over a group block, compiled and ready to call."""

    def __init__(self, group: Operation, block, materialized: Sequence[Value], options: dict[str, Any]):
        start = time.perf_counter()
        kernel = generate(block, "k", materialized)
        self.plan, self.flat, self.params = kernel.plan, kernel.flat, tuple(kernel.params)
        self.source = _module_source(group, kernel.par, kernel.seq)
        arrays = [p for p in self.params if p.is_array]
        # a flat loop takes 1-D views; arguments that are 1-D already are passed as they are
        self.reshape = self.flat and any(len(p.shape) != 1 for p in arrays)
        self.signature = _signature(self.params, group)
        generated = time.perf_counter()
        cache = options.get("cache") or default_cache()
        parts = _key_parts(group, str(self.signature), self.source)
        entry = cache.load(parts, self.source)
        self.code = cache.full_key(parts)
        self.timing = KernelTiming(codegen=generated - start, kernel_cache=time.perf_counter() - generated)
        self.par, self.seq = entry.module.k_par, entry.module.k_seq
        self.static_space = _static(self.plan.space, block) if not self.flat else None
        self.static_size = math.prod(self.static_space) if self.static_space is not None else None
        self.merged: tuple[int, ...] | None = None        # the space with its last two dims as one (merge_last_two)
        self.slots = [(ARGUMENT_LISTS[p.role], p.index) for p in arrays]
        # the common order, every input then every output: the call needs no per-argument lookup
        n_outputs = len(block.last_op.operands)
        self.plain = self.slots == [(0, i) for i in range(len(block.args))] + [(1, j) for j in range(n_outputs)]
        self._compile_needed(entry.module.__file__)
        self.seconds = time.perf_counter() - start
        self.cache_hit, self.miss_reason = entry.hit, entry.miss_reason

    def _compile_needed(self, path: str) -> None:
        size = self.static_size
        for fn, wanted in ((self.par, size is None or size >= PARALLEL_THRESHOLD),
                           (self.seq, size is None or size < PARALLEL_THRESHOLD)):
            if wanted and self.signature not in fn.overloads:
                # Another group of this structure may have compiled only the other variant and
                # disabled compiling; this explicit compile is the one wanted.
                fn.disable_compile(False)
                self.timing.add(_compile_or_recover(fn, self.signature, path))
                # A later call with other argument types would be a bug: fail loudly, never recompile.
                fn.disable_compile()

    def merge_last_two(self, ops: Sequence[Operation]) -> None:
        """Loops over the last two dims as one (H*W pixels in place of H rows of W) when `ops`, all
        the ops this kernel computes, are elementwise and every value they touch is full in those
        dims or broadcast over both: the nest then reads and writes the same elements, and its
        inner loop is long enough to vectorize (ResNet-50's conv epilogues with a per-channel bias
        ran 3-8x faster on its 56x56 to 7x7 maps)."""
        space = self.static_space
        if space is None or len(space) < 3 or self.plan.reductions or 1 in space[-2:]:
            return
        if all(op.has(Trait.ELEMENTWISE) or op.has(Trait.CONSTANT) for op in ops) and all(
                _full_or_broadcast(v.type.shape, space[-2:]) for op in ops for v in (*op.operands, *op.results)):
            self.merged = (*space[:-2], 1, space[-2] * space[-1])

    def __call__(self, inputs, outputs, bindings: dict[str, int] | None = None, extra: Sequence[np.ndarray] = ()
                 ) -> None:
        """Calls the kernel (a Kernel's `run`); `extra` are the materialized arrays (m0, ...) after
        inputs and outputs."""
        if self.plain:
            args = [*inputs, *outputs]
        else:
            sources = (inputs, outputs, extra)
            args = [sources[kind][i] for kind, i in self.slots]
        if self.flat:
            # The outputs have the full size; an input broadcast whole has size 1 even when the
            # output is empty (a size-0 broadcast), so the inputs cannot give the loop's length.
            size = outputs[0].size
            if self.reshape:
                args = [a.reshape(-1) for a in args]
            dims = (size,)
        elif self.merged is not None:
            # arrays the kernel does not index (a conv's input and filter) may merge or not alike
            tail = self.static_space[-2:]
            args = [a.reshape(a.shape[:-2] + (1, -1)) if a.shape[-2:] == tail else a for a in args]
            dims, size = self.merged, self.static_size
        elif self.static_space is not None:
            dims, size = self.static_space, self.static_size
        else:
            dims = evaluate_shape(self.plan.space, bindings or {})
            size = math.prod(dims)
        (self.par if size >= PARALLEL_THRESHOLD else self.seq)(*args, *dims)


def _full_or_broadcast(shape: tuple, tail: tuple) -> bool:
    """Whether a value of `shape` spans the last two dims of the space (`tail`) or is broadcast over both."""
    return tuple(shape[-2:]) == tuple(tail) or all(d == 1 for d in shape[-2:])


def _compile_or_recover(fn, signature: tuple, path: str) -> KernelTiming:
    """Compiles (or loads from numba's cache), timed; an unreadable cache file is removed and compiled anew."""
    try:
        return timed_compile(fn, signature)
    except Exception as e:  # a damaged pickle in numba's cache can raise almost any exception type
        if not KernelCache.clear_compiled(path):
            raise
        warnings.warn(f"jitlab: numba's compiled cache for {os.path.basename(path)} was unreadable "
                      f"({type(e).__name__}); recompiling", RuntimeWarning, stacklevel=2)
        return timed_compile(fn, signature)


def _static(space, block) -> tuple[int, ...] | None:
    return None if any(isinstance(d, Sym) for d in space) else tuple(int(d) for d in space)


def _compile_generated(group: Operation, options: dict[str, Any]) -> Kernel:
    gen = _Generated(group, group.body, (), options)
    return Kernel(group.attrs["key"], "numba_cpu", gen, gen.source, gen.seconds, gen.cache_hit,
                  gen.miss_reason, choice=_choice(group), reads_before_writes=True,   # codegen's store_all
                  timing=gen.timing, code=gen.code, params=gen.params)


def _choice(group: Operation) -> str:
    n = sum(1 for op in group.body.ops if not (op.has(Trait.TERMINATOR) or op.has(Trait.CONSTANT)))
    if n == 1:
        return "generated: one op, written straight into its output buffer"
    return f"generated: {n} ops fused into one pass over memory"


# -- contractions ------------------------------------------------------------------------

def _blas_shaped(op: Operation) -> bool:
    """A matmul one BLAS gemm call per matrix computes: no 1-D operand, or a 2-D matrix times a
    vector (a gemm with one column or one row)."""
    ranks = sorted(v.type.rank for v in op.operands)
    return ranks[0] >= 2 or ranks == [1, 2]


def _matmul(group: Operation, op: Operation) -> tuple[Callable, str]:
    return (lambda a, b, out: matmul_into(a, b, out)), "BLAS matmul"


def _conv(group: Operation, op: Operation) -> tuple[Callable, str]:
    attrs = op.attrs
    if winograd.fits(op) and _reads_constant(group, op.operands[1]):
        transformed = winograd.FilterCache()
        return (lambda x, w, out: winograd_into(x, transformed(w), out)), "Winograd F(2x2,3x3) conv, 16 BLAS calls"
    return (lambda x, w, out: conv2d_into(x, w, out, tuple(attrs["strides"]), tuple(attrs["pads"]),
                                          tuple(attrs["dilations"]), attrs["groups"])), "im2col + BLAS conv"


def _reads_constant(group: Operation, arg: Value) -> bool:
    """Whether the group input `arg` is a weight or constant itself (not a view of one): the same
    array, never written, every call."""
    if arg not in group.body.args:
        return False
    value = group.operands[group.body.args.index(arg)]
    return isinstance(value, OpResult) and (value.op.name == "np.weight" or value.op.has(Trait.CONSTANT))


_CONTRACTIONS: dict[str, Callable[[Operation, Operation], tuple[Callable, str]]] = {
    "np.matmul": _matmul, "np.conv2d": _conv}


def _compile_contraction(group: Operation, con: Operation, options: dict[str, Any]) -> Kernel:
    block = group.body
    outputs = list(block.last_op.operands)
    library, algorithm = _CONTRACTIONS[con.name](group, con)
    operands = contraction_operands(block, con)
    has_epilogue = any(is_epilogue_op(op, con) for op in block.ops)
    gen = _Generated(group, block, [con.result], options) if has_epilogue else None
    if gen is not None:
        gen.merge_last_two([op for op in block.ops if is_epilogue_op(op, con)])
    in_place = epilogue_target(con, outputs)
    result_shape = con.result.type.shape
    result_dtype = con.result.type.dtype

    def run(inputs, outputs_, bindings=None):
        bindings = bindings or {}
        if con.result in outputs:
            dst = outputs_[outputs.index(con.result)]
        elif in_place is not None:
            dst = outputs_[in_place]
        else:
            dst = np.empty(evaluate_shape(result_shape, bindings), result_dtype)
        library(*(inputs[i].T if transposed else inputs[i] for i, transposed in operands), dst)
        if gen is not None:
            gen(inputs, outputs_, bindings, (dst,))

    source = gen.source if gen is not None else f"# {con.name}: library kernel, no epilogue\n"
    choice = f"library {algorithm}" + (
        " with a generated epilogue" + _epilogue_place(con, outputs, in_place) if gen is not None else "")
    if gen is not None and gen.merged is not None:
        choice += "; the epilogue loops over the last two dims as one"
    return Kernel(group.attrs["key"], "numba_cpu", run, source, gen.seconds if gen else 0.0,
                  gen.cache_hit if gen else True, gen.miss_reason if gen else "", choice,
                  timing=gen.timing if gen else None, code=gen.code if gen else "",
                  params=gen.params if gen else ())


def _epilogue_place(con: Operation, outputs: list[Value], in_place: int | None) -> str:
    if con.result in outputs:
        return ""
    if in_place is not None:
        return f" (updating the product in place in output {in_place})"
    if not reads_result_in_place(con):
        return " (the product in a buffer of its own: the epilogue reads it at other indices)"
    return " (the product in a buffer of its own: no output has its shape and dtype)"


def contraction_operands(block, con: Operation) -> list[tuple[int, bool]]:
    """For each operand of the contraction: the group input it reads, and whether it reads it
    transposed (a 2-D transpose fusion folded into the group; numpy and BLAS read the view)."""
    out = []
    for v in con.operands:
        transposed = isinstance(v, OpResult) and v.op.name == "np.transpose"
        out.append((block.args.index(v.op.operands[0] if transposed else v), transposed))
    return out


def is_epilogue_op(op: Operation, con: Operation) -> bool:
    """Whether `op` of a contraction group runs after the contraction (not the contraction,
    the terminator, or a transpose folded into its operands)."""
    return not (op is con or op.has(Trait.TERMINATOR) or any(u is con for r in op.results for u in r.users))


def epilogue_target(con: Operation, outputs: list[Value]) -> int | None:
    """An output the contraction may be written into and the epilogue update in place:
    same shape and dtype, and every op downstream of the contraction reads it elementwise
    at the same index (a transpose or broadcast of an epilogue value would read elements
    the epilogue has already overwritten)."""
    if not reads_result_in_place(con):
        return None
    for k, v in enumerate(outputs):
        if v.type == con.result.type:
            return k
    return None


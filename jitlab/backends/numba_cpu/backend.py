"""The numba CPU backend: which ops it fuses. Compiling a group lives in `kernels` (it imports
numba); this module does not, so registering the backend and running kernels a warm start loads
from native libraries (backends/native.py) never import numba."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...dialects.np.writes import is_write
from ...ir.core import Operation, OpResult, Value
from ...ir.opdef import Trait
from ...report import FusionKind
from ..base import Backend, Kernel, register_backend
from ..indexing import INDEX_RULES, has_static_offsets, is_unit_reshape
from ..loopnest import REDUCTIONS, reads_result_in_place

NUMBA_DTYPES = {np.dtype(t) for t in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                                 "uint64", "float32", "float64", "complex64", "complex128")}
CONTRACTIONS = frozenset({"np.matmul", "np.conv2d"})     # run as library kernels (kernels.py) with an epilogue


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
        from .kernels import compile_group

        return compile_group(group, options)

    def compile_loop(self, op: Operation, bodies: list, host, options: dict[str, Any], nested: dict):
        from .native_loop import compile_loop

        return compile_loop(op, bodies, host, options, nested)

    def prepare(self, program, level: str, options: dict[str, Any]) -> None:
        # Starts the native convolution library's build before the passes, so that it overlaps them
        # on a cold compile; which convolutions will need it is a guess from the source program: O1
        # runs every convolution with it, O2 those heavy enough to be called between its segments
        # (the others are inlined into them). prepare_kernels starts it from the groups themselves.
        from ..kernel_cache import default_cache
        from .conv_native import prepare

        convs = [op for op in program.body.ops if op.name == "np.conv2d"]
        if level == "O2":
            from .whole_graph import HEAVY_MACS, contraction_macs

            convs = [op for op in convs if all(v.type.is_static for v in op.operands)
                     and contraction_macs(op) >= HEAVY_MACS]
        prepare(convs, options.get("cache") or default_cache())

    def warm(self, cache, show: bool = True) -> list[str]:
        from .warm import warm

        return warm(cache, show)

    def prepare_kernels(self, groups: list[Operation], options: dict[str, Any]) -> list[Operation]:
        # A second hook because `prepare` guesses, and only before passes that run: from the groups
        # that will convolve (O1's, or O2's kernel calls, o2.compile_program) a build it did not start
        # (the passes came from the executable cache, changed a dtype, or O2 fell back to O1's
        # runner) starts here; conv_native.start keys builds by library path, so none starts twice.
        from ..kernel_cache import default_cache
        from .conv_native import convolutions_last, prepare

        prepare(groups, options.get("cache") or default_cache())
        return convolutions_last(groups)

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
    if op.name in CONTRACTIONS:
        return FusionKind.CONTRACTION
    return FusionKind.OPAQUE


def loop_nest_support(op: Operation, backend: str) -> str | None:
    """None if a generated loop nest can compute `op`, else why not, in the words of `backend`."""
    for v in list(op.operands) + op.results:
        if v.type.dtype not in NUMBA_DTYPES:
            return f"{v.type.dtype} is not supported by {backend}"
    from .scalar import SCALAR_RULES  # imports numba: on first use, by the passes

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


def _blas_shaped(op: Operation) -> bool:
    """A matmul one BLAS gemm call per matrix computes: no 1-D operand, or a 2-D matrix times a
    vector (a gemm with one column or one row)."""
    ranks = sorted(v.type.rank for v in op.operands)
    return ranks[0] >= 2 or ranks == [1, 2]


def contraction_operands(block, con: Operation) -> list[tuple[int, bool]]:
    """For each operand of the contraction: the group input it reads, and whether it reads it
    transposed (a 2-D transpose fusion folded into the group; numpy and BLAS read the view)."""
    out = []
    for v in con.operands:
        transposed = isinstance(v, OpResult) and v.op.name == "np.transpose"
        out.append((block.args.index(v.op.operands[0] if transposed else v), transposed))
    return out


def contraction_of(group: Operation) -> Operation | None:
    """The contraction a fused group is built around (matmul, conv, ...), or None."""
    return next((op for op in group.body.ops if op.has(Trait.CONTRACTION)), None)


def has_epilogue(group: Operation, con: Operation) -> bool:
    """Whether ops of the group run after its contraction (else the library call is the whole kernel)."""
    return any(is_epilogue_op(op, con) for op in group.body.ops)


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

"""LLVM-level helpers for numba code that LLVM can vectorize: building 2^k and splitting a
float into mantissa and exponent by reinterpreting its bits (no libm call, no branch), and
numpy's NaN-propagating maximum/minimum as LLVM intrinsics, which vectorize as reductions."""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

# float type -> (bits, mantissa bits, exponent bias)
_LAYOUT = {types.float32: (32, 23, 127), types.float64: (64, 52, 1023)}


def _layout(fty):
    return _LAYOUT.get(fty)


@intrinsic
def pow2(typingctx, k):
    """2.0**k for an integral float k within the normal exponent range, built from bits."""
    if _layout(k) is None:
        return None
    width, mant, bias = _layout(k)

    def codegen(context, builder, sig, args):
        itype = ir.IntType(width)
        biased = builder.add(builder.fptosi(args[0], itype), ir.Constant(itype, bias))
        return builder.bitcast(builder.shl(biased, ir.Constant(itype, mant)), args[0].type)

    return k(k), codegen


@intrinsic
def mantissa(typingctx, x):
    """The significand of a positive normal float, as a float in [1, 2)."""
    if _layout(x) is None:
        return None
    width, mant, bias = _layout(x)

    def codegen(context, builder, sig, args):
        itype = ir.IntType(width)
        bits = builder.bitcast(args[0], itype)
        frac = builder.and_(bits, ir.Constant(itype, (1 << mant) - 1))
        one = builder.or_(frac, ir.Constant(itype, bias << mant))
        return builder.bitcast(one, args[0].type)

    return x(x), codegen


@intrinsic
def exponent(typingctx, x):
    """The unbiased binary exponent of a positive normal float, as a float of its type."""
    if _layout(x) is None:
        return None
    width, mant, bias = _layout(x)

    def codegen(context, builder, sig, args):
        itype = ir.IntType(width)
        biased = builder.lshr(builder.bitcast(args[0], itype), ir.Constant(itype, mant))
        return builder.sitofp(builder.sub(biased, ir.Constant(itype, bias)), args[0].type)

    return x(x), codegen


def _float_binary(emit, doc: str):
    """An intrinsic of two floats of one type whose LLVM code `emit(builder, a, b)` gives."""
    @intrinsic
    def op(typingctx, a, b):
        if _layout(a) is None or a != b:
            return None

        def codegen(context, builder, sig, args):
            return emit(builder, *args)

        return a(a, b), codegen

    op.__doc__ = doc
    return op


def _llvm_call(name: str):
    def emit(builder, a, b):
        fnty = ir.FunctionType(a.type, [a.type, a.type])
        return builder.call(builder.module.declare_intrinsic(name, [a.type], fnty), [a, b])

    return emit


def _reassociable(opname: str):
    def emit(builder, a, b):
        instr = getattr(builder, opname)(a, b)
        # numba's fast-math pass leaves an instruction that has flags of its own as it is
        instr.flags.extend(["reassoc", "contract"])
        return instr

    return emit


# A loop `m = maximum(m, x[i])` vectorizes with no fast-math flag, where the select form
# `m = x[i] if x[i] > m else m` stays scalar (jitlab.bench.probes measures both).
maximum = _float_binary(_llvm_call("llvm.maximum"), "max(a, b) of two floats of one type; NaN if either is NaN.")
minimum = _float_binary(_llvm_call("llvm.minimum"), "min(a, b) of two floats of one type; NaN if either is NaN.")

# A reduction's accumulation alone may be reassociated, which is what lets LLVM vectorize it
# (jitlab.bench.probes: a float32 row sum 0.4 ms against 4.3 ms in order). A whole kernel with
# `reassoc` lets LLVM rewrite its other arithmetic too: x - x * 1.25 became x * -0.25, +inf
# where numpy gives NaN for x = -inf.
radd = _float_binary(_reassociable("fadd"), "a + b of two floats of one type, in an order LLVM may change (a sum).")
rmul = _float_binary(_reassociable("fmul"), "a * b of two floats of one type, in an order LLVM may change (a product).")


@intrinsic
def nonneg(typingctx, x):
    """x, with LLVM told that it is not negative (llvm.assume): an array index known to be so is
    used as it is, where numba would wrap a negative one around at each access."""
    if not isinstance(x, types.Integer) or not x.signed:
        return None

    def codegen(context, builder, sig, args):
        fnty = ir.FunctionType(ir.VoidType(), [ir.IntType(1)])
        assume = builder.module.declare_intrinsic("llvm.assume", fnty=fnty)
        builder.call(assume, [builder.icmp_signed(">=", args[0], ir.Constant(args[0].type, 0))])
        return args[0]

    return x(x), codegen

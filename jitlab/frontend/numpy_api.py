"""The numpy functions and ufuncs a traced function may call, each recorded as `np` ops.

`UFUNCS` maps a ufunc to its op; `implements(np.f)` registers the implementation of a
numpy function. Anything not in these tables raises UnsupportedOp naming the function:
tracing never silently drops a call from the graph.
"""

from __future__ import annotations

import builtins
import warnings
from collections.abc import Callable

import numpy as np

from ..errors import DTypeError, ShapeError, TraceError, UnsupportedOp
from ..ir.dtypes import as_dtype
from ..ir.shapes import Dim, Sym, exact_div, num_elements
from ..registry import Registry
from .creation import fill
from .operands import cast, float_of, promoted
from .tracer import TraceContext, Tracer
from .ufunc_dtypes import RULES

UFUNCS: dict[np.ufunc, str] = {
    np.add: "np.add", np.subtract: "np.sub", np.multiply: "np.mul", np.true_divide: "np.div",
    np.floor_divide: "np.floordiv", np.remainder: "np.mod", np.fmod: "np.fmod", np.power: "np.pow",
    np.maximum: "np.maximum", np.minimum: "np.minimum", np.arctan2: "np.atan2",
    np.equal: "np.equal", np.not_equal: "np.not_equal", np.less: "np.less",
    np.less_equal: "np.less_equal", np.greater: "np.greater", np.greater_equal: "np.greater_equal",
    np.logical_and: "np.logical_and", np.logical_or: "np.logical_or", np.logical_xor: "np.logical_xor",
    np.bitwise_and: "np.bitwise_and", np.bitwise_or: "np.bitwise_or", np.bitwise_xor: "np.bitwise_xor",
    np.left_shift: "np.left_shift", np.right_shift: "np.right_shift",
    np.negative: "np.neg", np.absolute: "np.abs", np.fabs: "np.abs", np.sign: "np.sign",
    np.square: "np.square", np.exp: "np.exp", np.expm1: "np.expm1", np.exp2: "np.exp2",
    np.log: "np.log", np.log1p: "np.log1p", np.log2: "np.log2", np.log10: "np.log10",
    np.sqrt: "np.sqrt", np.reciprocal: "np.reciprocal", np.tanh: "np.tanh", np.sin: "np.sin",
    np.cos: "np.cos", np.tan: "np.tan", np.arcsin: "np.asin", np.arccos: "np.acos",
    np.arctan: "np.atan", np.sinh: "np.sinh", np.cosh: "np.cosh", np.arcsinh: "np.asinh",
    np.arccosh: "np.acosh", np.arctanh: "np.atanh", np.floor: "np.floor", np.ceil: "np.ceil",
    np.trunc: "np.trunc", np.rint: "np.round", np.isnan: "np.isnan", np.isinf: "np.isinf",
    np.isfinite: "np.isfinite", np.logical_not: "np.logical_not", np.invert: "np.bitwise_not",
    np.matmul: "np.matmul",
}
# numpy computes these on bools as logic; the IR's arithmetic ops take numbers only.
_BOOL_UFUNCS = {np.add: "np.logical_or", np.multiply: "np.logical_and", np.maximum: "np.logical_or",
                np.minimum: "np.logical_and", np.invert: "np.logical_not", np.not_equal: "np.logical_xor",
                np.bitwise_and: "np.logical_and", np.bitwise_or: "np.logical_or",
                np.bitwise_xor: "np.logical_xor"}

FUNCTIONS: Registry[Callable, Callable] = Registry("numpy function", describe=lambda f: _qualname(f))


def implements(*numpy_functions: Callable) -> Callable[[Callable], Callable]:
    """Registers the decorated function as the traced version of `numpy_functions`."""
    return FUNCTIONS.register(*numpy_functions)


def _qualname(func) -> str:
    module = getattr(func, "__module__", "") or ""
    prefix = "np." + module[len("numpy."):] + "." if module.startswith("numpy.") and module not in (
        "numpy._core.fromnumeric", "numpy._core.numeric", "numpy._core.shape_base",
        "numpy.lib._shape_base_impl", "numpy._core.multiarray", "numpy.lib._function_base_impl",
        "numpy._core._multiarray_umath", "numpy.lib._arraypad_impl") else "np."
    return prefix + getattr(func, "__name__", repr(func))


def context_of(*args) -> TraceContext:
    for a in args:
        if isinstance(a, Tracer):
            return a.ctx
        if isinstance(a, (list, tuple)):
            for b in a:
                if isinstance(b, Tracer):
                    return b.ctx
    raise TraceError("no traced array among the arguments")


def apply_function(ctx: TraceContext, func, args, kwargs):
    impl = FUNCTIONS.get(func)
    if impl is None:
        raise UnsupportedOp(f"{_qualname(func)} is not supported by jitlab ({ctx.where()})")
    out = kwargs.pop("out", None)
    if out is None:
        return impl(*args, **kwargs)
    # numpy's functions write their result into out= casting as an assignment does
    return inplace.write_out(ctx, _qualname(func), out, [ctx.lift(impl(*args, **kwargs))], casting="unsafe")


def _input_dtype(x):
    if isinstance(x, (Tracer, np.ndarray, np.generic)):
        return x.dtype
    if isinstance(x, bool):
        return np.dtype(bool)
    if isinstance(x, (int, float, complex)):
        return type(x)
    return np.asarray(x).dtype


def apply_ufunc(ctx: TraceContext, ufunc: np.ufunc, method: str, inputs, kwargs):
    name = ufunc.__name__
    if method == "at":
        return inplace.ufunc_at(ctx, ufunc, inputs)
    # a reduction's where= picks the elements it reduces: ufunc_reduce takes it
    out, where = kwargs.pop("out", None), True if method == "reduce" else kwargs.pop("where", True)
    if out is not None and all(o is None for o in out):
        out = None
    if where is not True and out is None:
        raise UnsupportedOp(f"np.{name}(..., where=...) without out= leaves elements unset ({ctx.where()}); "
                            f"use np.where(cond, np.{name}(...), other)")
    result = _apply_ufunc(ctx, ufunc, method, inputs, kwargs)
    if out is None:
        return result
    results = list(result) if isinstance(result, tuple) else [result]
    return inplace.write_out(ctx, f"np.{name}", out, results, kwargs.get("casting", "same_kind"), where)


def _apply_ufunc(ctx: TraceContext, ufunc: np.ufunc, method: str, inputs, kwargs):
    name = ufunc.__name__
    for key in ("axes", "axis", "signature"):
        if method == "__call__" and kwargs.get(key) is not None:
            raise UnsupportedOp(f"np.{name}(..., {key}=...) is not supported ({ctx.where()})")
    kwargs.pop("casting", None)
    if method in ufunc_methods.UFUNC_METHODS:
        return ufunc_methods.UFUNC_METHODS[method](ctx, ufunc, inputs, kwargs)
    if method != "__call__":
        raise UnsupportedOp(f"np.{name}.{method} is not supported ({ctx.where()})")
    if ufunc not in UFUNCS and ufunc not in RULES:
        raise UnsupportedOp(f"np.{name} is not supported by jitlab ({ctx.where()})")
    try:
        loop = ufunc.resolve_dtypes(tuple(_input_dtype(x) for x in inputs) + (None,) * ufunc.nout)
    except (TypeError, np._core._exceptions._UFuncNoLoopError) as e:
        raise TraceError(f"np.{name} has no loop for these dtypes: {e} ({ctx.where()})") from None
    operands = [cast(ctx.lift(x, _Typed(dt)), dt) for x, dt in zip(inputs, loop)]
    result = RULES[ufunc](ctx, operands, loop) if ufunc in RULES else None
    if result is None:
        op_name = _BOOL_UFUNCS.get(ufunc, UFUNCS[ufunc]) if loop[0].kind == "b" else UFUNCS[ufunc]
        result = ctx.op(op_name, *(t.value for t in operands))
    out = kwargs.get("dtype")
    result = astype(result, out) if out is not None else cast(result, loop[-1])
    return Tracer(result.value, ctx) if any(result is x for x in inputs) else result   # a new array, as numpy's


class _Typed:
    """Stands in for an array of dtype `dtype` when lifting a Python scalar."""

    def __init__(self, dtype):
        self.dtype = dtype


# -- dtype conversion -----------------------------------------------------------
@implements(np.astype)
def astype(x, dtype, copy=True):
    ctx = context_of(x)
    x, dtype = ctx.lift(x), as_dtype(dtype, "astype")
    if x.dtype.kind == "c" and dtype.kind in "iuf":
        warn_complex_to_real(ctx)
    out = cast(x, dtype)
    return Tracer(out.value, ctx) if out is x else out      # numpy copies: a write to it leaves x alone


def warn_complex_to_real(ctx: TraceContext) -> None:
    """numpy warns when a cast drops imaginary parts; so does tracing, at the user's line."""
    loc = ctx.location()
    warnings.warn_explicit("Casting complex values to real discards the imaginary part",
                           np.exceptions.ComplexWarning, loc.file if loc else "<traced>", loc.line if loc else 0)


# -- reductions -------------------------------------------------------------------
def normalize_axes(x: Tracer, axis) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(x.ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = []
    for a in axes:
        if not -x.ndim <= a < x.ndim:
            raise TraceError(f"axis {a} is out of bounds for an array of rank {x.ndim} ({x.ctx.where()})")
        out.append(int(a) % x.ndim)
    if len(set(out)) != len(out):
        raise TraceError(f"repeated axis in {axis} ({x.ctx.where()})")
    return tuple(sorted(out))


def normalize_axis(x: Tracer, axis: int, rank: int | None = None) -> int:
    rank = x.ndim if rank is None else rank
    if not -rank <= axis < rank:
        raise TraceError(f"axis {axis} is out of bounds for rank {rank} ({x.ctx.where()})")
    return int(axis) % rank


def reduce_over(kind: str, x: Tracer, axis, keepdims, dtype=None) -> Tracer:
    """np.<kind> of x over `axis`, with numpy's dtypes: small ints summed in 64 bits, logic on bools."""
    if dtype is not None:
        x = astype(x, dtype)
    elif kind in ("sum", "prod") and x.dtype.kind in "biu" and x.dtype.itemsize < 8:
        x = cast(x, np.uint64 if x.dtype.kind == "u" else np.int64)
    elif kind in ("any", "all") and x.dtype.kind != "b":
        x = x != 0
    return x.ctx.op(f"np.{kind}", x.value, axes=normalize_axes(x, axis), keepdims=bool(keepdims))


def _no_out(ctx, name, out, where=True, initial=None):
    if out is not None or where is not True or initial is not None:
        raise UnsupportedOp(f"np.{name}(..., out=/where=/initial=) is not supported ({ctx.where()})")


def _reduction(kind: str, *numpy_functions):
    @implements(*numpy_functions)
    def reduce(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=True):
        ctx = context_of(a)
        _no_out(ctx, kind, out, where, initial)
        return reduce_over(kind, ctx.lift(a), axis, keepdims, dtype if kind in ("sum", "prod") else None)

    return reduce


reduce_sum = _reduction("sum", np.sum)
reduce_prod = _reduction("prod", np.prod)
reduce_max = _reduction("max", np.max, np.amax)
reduce_min = _reduction("min", np.min, np.amin)
reduce_any = _reduction("any", np.any)
reduce_all = _reduction("all", np.all)


@implements(np.mean)
def mean(a, axis=None, dtype=None, out=None, keepdims=False, where=True):
    ctx = context_of(a)
    _no_out(ctx, "mean", out, where)
    x = ctx.lift(a)
    x = astype(x, dtype) if dtype is not None else float_of(x)
    return ctx.op("np.mean", x.value, axes=normalize_axes(x, axis), keepdims=bool(keepdims))


@implements(np.var)
def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=True, mean=None, correction=None):
    ctx = context_of(a)
    _no_out(ctx, "var", out, where)
    x = float_of(ctx.lift(a)) if dtype is None else astype(ctx.lift(a), dtype)
    axes = normalize_axes(x, axis)
    centered = x - ctx.op("np.mean", x.value, axes=axes, keepdims=True)
    # numpy's variance of complex numbers is that of their magnitudes: real, of the parts' dtype
    squares = np.real(centered * np.conj(centered)) if x.dtype.kind == "c" else centered * centered
    total = ctx.op("np.sum", squares.value, axes=axes, keepdims=bool(keepdims))
    count = num_elements(tuple(x.shape[i] for i in axes))
    ddof = correction if correction is not None else ddof
    if isinstance(count, Sym):
        raise UnsupportedOp(f"np.var over symbolic dims is not supported ({ctx.where()})")
    return total / builtins.max(count - ddof, 0)


@implements(np.std)
def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=True, mean=None, correction=None):
    return np.sqrt(var(a, axis, dtype, out, ddof, keepdims, where, correction=correction))


def _arg_reduction(kind: str, numpy_function):
    @implements(numpy_function)
    def arg(a, axis=None, out=None, keepdims=False):
        ctx = context_of(a)
        _no_out(ctx, kind, out)
        x = ctx.lift(a)
        if axis is None:        # over the flattened array; keepdims then keeps every axis as 1
            flat = ctx.op(f"np.{kind}", reshape(x, (-1,)).value, axis=0, keepdims=False)
            return reshape(flat, (1,) * x.ndim) if keepdims else flat
        return ctx.op(f"np.{kind}", x.value, axis=normalize_axis(x, axis), keepdims=bool(keepdims))

    return arg


argmax = _arg_reduction("argmax", np.argmax)
argmin = _arg_reduction("argmin", np.argmin)


@implements(np.cumsum)
def cumsum(a, axis=None, dtype=None, out=None):
    ctx = context_of(a)
    _no_out(ctx, "cumsum", out)
    x = ctx.lift(a)
    if dtype is not None:
        x = astype(x, dtype)
    elif x.dtype.kind in "biu" and x.dtype.itemsize < 8:
        x = cast(x, np.uint64 if x.dtype.kind == "u" else np.int64)
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    return ctx.op("np.cumsum", x.value, axis=normalize_axis(x, axis))


# -- shape functions ----------------------------------------------------------------
def _shape_arg(shape) -> tuple:
    if isinstance(shape, (int, np.integer, Sym, Tracer)):
        return (shape,)
    return tuple(shape)


@implements(np.reshape)
def reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    ctx = context_of(a)
    if order != "C":
        raise UnsupportedOp(f"reshape with order={order!r} is not supported ({ctx.where()})")
    x = ctx.lift(a)
    dims = list(_shape_arg(shape if shape is not None else newshape))
    if any(isinstance(d, Tracer) for d in dims):
        raise TraceError(f"reshape to a traced size gives a data-dependent shape ({ctx.where()}); sizes must be "
                         "Python ints or x.shape entries: pass the value that decides them with static_argnums")
    if builtins.sum(1 for d in dims if isinstance(d, (int, np.integer)) and d == -1) > 1:
        raise TraceError(f"reshape: only one dim may be -1, got {dims} ({ctx.where()})")
    if -1 in dims:
        known: Dim = 1
        for d in dims:
            if not (isinstance(d, (int, np.integer)) and d == -1):
                known = known * d
        missing = exact_div(num_elements(x.shape), known)
        if missing is None:
            raise TraceError(f"cannot reshape {x.value.type} to {dims} ({ctx.where()})")
        dims[dims.index(-1)] = missing
    dims = tuple(d if isinstance(d, Sym) else int(d) for d in dims)
    if dims == x.shape:
        return x
    return view_of(x, lambda b: b.ctx.op("np.reshape", b.value, shape=dims),
                   lambda b, new: new.ctx.op("np.reshape", new.value, shape=b.shape), "x.reshape(...)")


@implements(np.transpose)
def transpose(a, axes=None):
    ctx = context_of(a)
    x = ctx.lift(a)
    perm = tuple(range(x.ndim))[::-1] if axes is None else tuple(normalize_axis(x, p) for p in axes)
    if sorted(perm) != list(range(x.ndim)):
        raise TraceError(f"transpose: axes {axes} do not match rank {x.ndim} ({ctx.where()})")
    if perm == tuple(range(x.ndim)):
        return x
    inverse = tuple(int(i) for i in np.argsort(perm))
    return view_of(x, lambda b: b.ctx.op("np.transpose", b.value, perm=perm),
                   lambda b, new: new.ctx.op("np.transpose", new.value, perm=inverse), "x.transpose(...)")


@implements(np.swapaxes)
def swapaxes(a, axis1, axis2):
    x = context_of(a).lift(a)
    perm = list(range(x.ndim))
    i, j = normalize_axis(x, axis1), normalize_axis(x, axis2)
    perm[i], perm[j] = perm[j], perm[i]
    return transpose(x, perm)


@implements(np.moveaxis)
def moveaxis(a, source, destination):
    x = context_of(a).lift(a)
    src = [normalize_axis(x, s) for s in _shape_arg(source)]
    dst = [normalize_axis(x, d) for d in _shape_arg(destination)]
    order = [i for i in range(x.ndim) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return transpose(x, order)


@implements(np.broadcast_to)
def broadcast_to(array, shape, subok=False):
    x = context_of(array).lift(array)
    shape = _shape_arg(shape)
    if tuple(shape) == x.shape:
        return x
    return view_of(x, lambda b: b.ctx.op("np.broadcast_to", b.value, shape=tuple(shape)), None,
                   "np.broadcast_to(...)")


@implements(np.expand_dims)
def expand_dims(a, axis):
    x = context_of(a).lift(a)
    rank = x.ndim + len(_shape_arg(axis))
    axes = tuple(sorted(normalize_axis(x, ax, rank) for ax in _shape_arg(axis)))
    return view_of(x, lambda b: b.ctx.op("np.expand_dims", b.value, axes=axes), _reshape_back,
                   "np.expand_dims(...)")


def _reshape_back(base: Tracer, new: Tracer) -> Tracer:
    return new.ctx.op("np.reshape", new.value, shape=base.shape)


@implements(np.squeeze)
def squeeze(a, axis=None):
    x = context_of(a).lift(a)
    if axis is None:
        axes = tuple(i for i, d in enumerate(x.shape) if d == 1)
    else:
        axes = normalize_axes(x, axis)
    if not axes:
        return x
    return view_of(x, lambda b: b.ctx.op("np.squeeze", b.value, axes=axes), _reshape_back, "np.squeeze(...)")


@implements(np.ravel)
def ravel(a, order="C"):
    return reshape(a, (-1,), order=order)


def _lift_all(arrays) -> list[Tracer]:
    ctx = context_of(*arrays) if not isinstance(arrays, Tracer) else arrays.ctx
    return [ctx.lift(a) for a in arrays]


@implements(np.concatenate)
def concatenate(arrays, axis=0, out=None, dtype=None, casting="same_kind"):
    xs = promoted(_lift_all(arrays))
    if out is not None:
        raise UnsupportedOp(f"np.concatenate(out=...) is not supported ({xs[0].ctx.where()})")
    if axis is None:
        xs, axis = [reshape(x, (-1,)) for x in xs], 0
    if dtype is not None:
        xs = [astype(x, dtype) for x in xs]
    return xs[0].ctx.op("np.concatenate", *(x.value for x in xs), axis=normalize_axis(xs[0], axis))


@implements(np.stack)
def stack(arrays, axis=0, out=None, dtype=None, casting="same_kind"):
    xs = promoted(_lift_all(arrays))
    if dtype is not None:
        xs = [astype(x, dtype) for x in xs]
    return xs[0].ctx.op("np.stack", *(x.value for x in xs), axis=normalize_axis(xs[0], axis, xs[0].ndim + 1))


@implements(np.hstack)
def hstack(tup, dtype=None, casting="same_kind"):
    xs = [atleast_1d(x) for x in _lift_all(tup)]
    return concatenate(xs, axis=0 if xs[0].ndim == 1 else 1, dtype=dtype)


@implements(np.vstack)
def vstack(tup, dtype=None, casting="same_kind"):
    return concatenate([atleast_2d(x) for x in _lift_all(tup)], axis=0, dtype=dtype)


@implements(np.atleast_1d)
def atleast_1d(x):
    return reshape(x, (1,)) if x.ndim == 0 else x


@implements(np.atleast_2d)
def atleast_2d(x):
    return reshape(x, (1,) * (2 - x.ndim) + x.shape) if x.ndim < 2 else x


@implements(np.split, np.array_split)
def split(ary, indices_or_sections, axis=0):
    x = context_of(ary).lift(ary)
    axis = normalize_axis(x, axis)
    n = x.shape[axis]
    if isinstance(indices_or_sections, (int, np.integer)):
        k = int(indices_or_sections)
        if isinstance(n, Sym):
            size = exact_div(n, k)
            if size is None:
                raise TraceError(f"cannot split symbolic dim {n} into {k} ({x.ctx.where()})")
            sizes = [size] * k
        else:
            base, extra = divmod(n, k)
            sizes = [base + (i < extra) for i in range(k)]
    else:
        if isinstance(n, Sym):
            raise UnsupportedOp(f"split at indices along symbolic dim {n} ({x.ctx.where()})")
        bounds = [0] + [builtins.min(builtins.max(int(i) if i >= 0 else int(i) + n, 0), n)
                        for i in indices_or_sections] + [n]
        sizes = [builtins.max(b - a, 0) for a, b in zip(bounds, bounds[1:])]
    return list(x.ctx.emit("np.split", [x.value], axis=axis, sizes=tuple(sizes)))


@implements(np.take)
def take(a, indices, axis=None, out=None, mode=None):
    ctx = context_of(a, indices)
    if out is not None or mode not in (None, "raise"):
        raise UnsupportedOp(f"np.take with out= or mode={mode!r} is not supported ({ctx.where()})")
    x = ctx.lift(a)
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    idx = ctx.lift(np.asarray(indices) if isinstance(indices, (list, int)) else indices)
    if idx.dtype.kind not in "iu":
        raise TraceError(f"np.take: indices must be integers, got {idx.dtype} ({ctx.where()})")
    return ctx.op("np.take", x.value, idx.value, axis=normalize_axis(x, axis))


@implements(np.pad)
def pad(array, pad_width, mode="constant", **kwargs):
    x = context_of(array).lift(array)
    if mode not in ("constant", "edge", "reflect"):
        raise UnsupportedOp(f"np.pad(mode={mode!r}) is not supported ({x.ctx.where()})")
    if x.ndim == 0:
        return x
    widths = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (x.ndim, 2))
    value = kwargs.pop("constant_values", 0)
    if kwargs or np.ndim(value) != 0 or np.iscomplexobj(value):
        raise UnsupportedOp(f"np.pad with per-side or complex values or {sorted(kwargs)} is not supported "
                            f"({x.ctx.where()})")
    return x.ctx.op("np.pad", x.value, pads=tuple(int(v) for v in widths.reshape(-1)), mode=mode,
                    value=float(value))


@implements(np.tile)
def tile(A, reps):
    x = context_of(A).lift(A)
    reps = _shape_arg(reps)
    if len(reps) > x.ndim:
        x = reshape(x, (1,) * (len(reps) - x.ndim) + x.shape)
    reps = (1,) * (x.ndim - len(reps)) + tuple(int(r) for r in reps)
    return x.ctx.op("np.tile", x.value, reps=reps) if builtins.max(reps, default=1) != 1 or 0 in reps \
        else Tracer(x.value, x.ctx)


@implements(np.repeat)
def repeat(a, repeats, axis=None):
    x = context_of(a).lift(a)
    if not isinstance(repeats, (int, np.integer)):
        raise UnsupportedOp(f"np.repeat with per-element counts is not supported ({x.ctx.where()})")
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    axis = normalize_axis(x, axis)
    expanded = expand_dims(x, axis + 1)
    shape = expanded.shape[:axis + 1] + (int(repeats),) + expanded.shape[axis + 2:]
    return reshape(broadcast_to(expanded, shape), x.shape[:axis] + (x.shape[axis] * int(repeats),) + x.shape[axis + 1:])


@implements(np.flip)
def flip(m, axis=None):
    x = context_of(m).lift(m)
    axes = normalize_axes(x, axis)
    return x[tuple(slice(None, None, -1) if i in axes else slice(None) for i in range(x.ndim))]


# -- elementwise functions that are not ufuncs -------------------------------------------
@implements(np.real)
def real(val):
    x = context_of(val).lift(val)
    return x.ctx.op("np.real", x.value) if x.dtype.kind == "c" else x


@implements(np.imag)
def imag(val):
    x = context_of(val).lift(val)
    return x.ctx.op("np.imag", x.value) if x.dtype.kind == "c" else fill(x.ctx, x.shape, 0, x.dtype)


@implements(np.angle)
def angle(z, deg=False):
    x = context_of(z).lift(z)
    # numpy's angle of a real array is arctan2(0, x): 0 or pi, in the float dtype arctan2 gives
    a = x.ctx.op("np.angle", x.value) if x.dtype.kind == "c" else np.arctan2(0, float_of(x))
    return a * (180 / np.pi) if deg else a


@implements(np.iscomplexobj)
def iscomplexobj(x):
    return x.dtype.kind == "c"


@implements(np.isrealobj)
def isrealobj(x):
    return x.dtype.kind != "c"


def set_part(z: Tracer, part: str, value) -> None:
    """`z.real = v` and `z.imag = v`: refused, as jitlab has no op that writes one part."""
    raise UnsupportedOp(f"assigning z.{part} is not supported ({z.ctx.where()}); build the array anew, "
                        f"e.g. z = re + 1j * im (exact for finite parts)")


@implements(np.where)
def where(condition, x=None, y=None):
    ctx = context_of(condition, x, y)
    if x is None or y is None:
        raise UnsupportedOp(f"np.where(cond) with one argument has a data-dependent shape ({ctx.where()})")
    cond = ctx.lift(condition)
    if cond.dtype.kind != "b":
        cond = cond != 0
    dtype = np.result_type(*(v.dtype if hasattr(v, "dtype") else v for v in (x, y)))
    a, b = (cast(ctx.lift(v, _Typed(dtype)), dtype) for v in (x, y))
    return ctx.op("np.where", cond.value, a.value, b.value)


@implements(np.clip)
def clip(a, a_min=np._NoValue, a_max=np._NoValue, out=None, *, min=np._NoValue, max=np._NoValue, **kw):
    ctx = context_of(a)
    lo = a_min if a_min is not np._NoValue else (None if min is np._NoValue else min)
    hi = a_max if a_max is not np._NoValue else (None if max is np._NoValue else max)
    if out is not None or kw:
        raise UnsupportedOp(f"np.clip with out= or {sorted(kw)} is not supported ({ctx.where()})")
    x = ctx.lift(a)
    if all_scalar(lo, hi) and x.dtype.kind in "iuf":
        dtype = np.result_type(x.dtype, *[v for v in (lo, hi) if v is not None])
        x = cast(x, dtype)
        return ctx.op("np.clip", x.value, min=None if lo is None else float(lo),
                      max=None if hi is None else float(hi))
    out_ = x
    if lo is not None:
        out_ = np.maximum(out_, lo)
    if hi is not None:
        out_ = np.minimum(out_, hi)
    return out_


def all_scalar(*values) -> bool:
    return builtins.all(v is None or isinstance(v, (int, float, np.integer, np.floating)) for v in values)


@implements(np.round, np.around)
def round_(a, decimals=0, out=None):
    ctx = context_of(a)
    x = ctx.lift(a)
    if out is not None:
        raise UnsupportedOp(f"np.round(out=...) is not supported ({ctx.where()})")
    if x.dtype.kind == "b":
        if decimals != 0:
            raise DTypeError(f"np.round of a bool array with decimals={decimals}: numpy has no loop for it "
                             f"({ctx.where()})")
        return cast(x, np.float16)          # numpy rounds bools in its float16 loop
    if x.dtype.kind == "c":
        raise UnsupportedOp(f"np.round of complex dtype {x.dtype} is not supported by jitlab ({ctx.where()}); "
                            "round the parts: np.round(z.real) + 1j * np.round(z.imag)")
    if x.dtype.kind != "f":
        # integers round to tens, hundreds... in float64, half to even, as numpy does
        return Tracer(x.value, ctx) if decimals >= 0 else cast(round_(cast(x, np.float64), decimals), x.dtype)
    if decimals == 0:
        return ctx.op("np.round", x.value)
    scale = 10.0 ** decimals
    return np.round(x * scale) / scale


@implements(np.dot)
def dot(a, b, out=None):
    ctx = context_of(a, b)
    x, y = ctx.lift(a), ctx.lift(b)
    if out is not None:
        raise UnsupportedOp(f"np.dot with out= is not supported ({ctx.where()})")
    if x.ndim == 0 or y.ndim == 0:
        return x * y
    if x.ndim > 2 or y.ndim > 2:       # a sum over x's last axis and y's second to last
        return tensordot(x, y, ([x.ndim - 1], [max(y.ndim - 2, 0)]))
    return np.matmul(x, y)


@implements(np.tensordot)
def tensordot(a, b, axes=2):
    """The sum over `axes` of a and b, as np.einsum (a's free axes, then b's)."""
    from .einsum import trace_einsum

    ctx = context_of(a, b)
    x, y = ctx.lift(a), ctx.lift(b)
    if isinstance(axes, (int, np.integer)):
        if not 0 <= axes <= min(x.ndim, y.ndim):
            raise ShapeError(f"np.tensordot: axes={axes} for operands of rank {x.ndim} and {y.ndim} ({ctx.where()})")
        on_x, on_y = list(range(x.ndim - axes, x.ndim)), list(range(axes))
    else:
        on_x, on_y = ([d] if isinstance(d, (int, np.integer)) else list(d) for d in axes)
    try:
        on_x = [int(d) + x.ndim if d < 0 else int(d) for d in on_x]
        on_y = [int(d) + y.ndim if d < 0 else int(d) for d in on_y]
    except TypeError:
        raise ShapeError(f"np.tensordot: axes must be ints, got {axes!r} ({ctx.where()})") from None
    if len(on_x) != len(on_y) or any(not 0 <= d < n for ds, n in ((on_x, x.ndim), (on_y, y.ndim)) for d in ds) \
            or len(set(on_x)) != len(on_x) or len(set(on_y)) != len(on_y) \
            or any(x.shape[i] != y.shape[j] for i, j in zip(on_x, on_y)):
        raise ShapeError(f"np.tensordot: axes {axes!r} do not pair dims of equal size in {x.shape} and "
                         f"{y.shape} ({ctx.where()})")
    letters = iter("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    if x.ndim + y.ndim > 52:
        raise UnsupportedOp(f"np.tensordot of ranks {x.ndim} and {y.ndim}: at most 52 dims in all ({ctx.where()})")
    tx = [next(letters) for _ in range(x.ndim)]
    ty = [next(letters) for _ in range(y.ndim)]
    for i, j in zip(on_x, on_y):
        ty[j] = tx[i]
    out = [c for i, c in enumerate(tx) if i not in on_x] + [c for j, c in enumerate(ty) if j not in on_y]
    return trace_einsum(f"{''.join(tx)},{''.join(ty)}->{''.join(out)}", [x, y], {})


@implements(np.outer)
def outer(a, b, out=None):
    x, y = _lift_all((a, b))
    return reshape(x, (-1, 1)) * reshape(y, (1, -1))


def _filled_like(a, value, dtype, shape) -> Tracer:
    x = context_of(a).lift(a)
    dtype = np.dtype(dtype) if dtype is not None else x.dtype
    return fill(x.ctx, x.shape if shape is None else _shape_arg(shape), value, dtype)


@implements(np.zeros_like, np.empty_like)
def zeros_like(a, dtype=None, order="K", subok=True, shape=None, **kwargs):
    return _filled_like(a, 0, dtype, shape)


@implements(np.ones_like)
def ones_like(a, dtype=None, order="K", subok=True, shape=None, **kwargs):
    return _filled_like(a, 1, dtype, shape)


@implements(np.full_like)
def full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, **kwargs):
    return _filled_like(a, fill_value, dtype, shape)


@implements(np.shape)
def shape(a):
    return a.shape


@implements(np.ndim)
def ndim(a):
    return a.ndim


@implements(np.size)
def size(a, axis=None):
    return a.size if axis is None else a.shape[axis]


@implements(np.result_type)
def result_type(*arrays_and_dtypes):
    return np.result_type(*(a.dtype if isinstance(a, Tracer) else a for a in arrays_and_dtypes))


@implements(np.einsum)
def einsum(subscripts, *operands, **kwargs):
    from .einsum import trace_einsum

    return trace_einsum(subscripts, operands, kwargs)



def view_of(x: Tracer, derive, write, what: str) -> Tracer:
    return inplace.view_of(x, derive, write, what)


# the numpy functions of each kind register themselves as they are imported
from . import elementwise, inplace, linalg, matrices, shifts, statistics, ufunc_methods  # noqa: E402,F401
from .order import argsort, sort  # noqa: E402,F401  (register np.sort, np.median ...; Tracer.argsort and .sort call them)
from .reductions import cumprod  # noqa: E402,F401  (Tracer.cumprod calls it)

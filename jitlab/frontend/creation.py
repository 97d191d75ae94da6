"""numpy's creation functions while a function is traced: `np.zeros((n, m))` takes no
traced argument, so numpy's dispatch never reaches the tracer; to let a function fill an
array it made, the names its globals see (`np`, an alias such as `xp`, or `zeros`
imported from numpy) are pointed at traced versions for the duration of the trace, and
so are those of the functions of the user's code it calls by name (helpers in other
modules, jitted helpers); library code (site-packages) is left alone.

Python's `max` and `min` are routed the same way (added to those globals unless the module
defines its own): on traced scalars they compare through `np.where`, keeping Python's
result (the first of equal values) where the builtin would need the comparison's value.

Globals are shared by every thread, so tracing holds `TRACING_LOCK` while they are
patched, and the patched functions act as numpy's own in other threads; they are
restored when tracing ends, however it ends.
"""

from __future__ import annotations

import builtins
import contextlib
import inspect
import threading
import types
from collections.abc import Callable, Iterator

import numpy as np

from ..errors import TraceError
from ..ir.shapes import Sym
from .trace_errors import is_user_file
from .tracer import TraceContext, Tracer

TRACING_LOCK = threading.RLock()   # held while a function's globals point at a trace's creation functions


def fill(ctx: TraceContext, shape, value, dtype=None) -> Tracer:
    """A traced array of `shape` holding `value` (a scalar or a tracer) everywhere."""
    shape = _shape(ctx, shape)
    if isinstance(value, Tracer):
        x = value if dtype is None or np.dtype(dtype) == value.dtype else \
            ctx.op("np.cast", value.value, dtype=np.dtype(dtype))
    else:
        x = ctx.constant(value, None if dtype is None else np.dtype(dtype))
    if x.shape == shape:
        return Tracer(x.value, ctx)      # a fresh array: writing to it must not change `value`
    return ctx.op("np.broadcast_to", x.value, shape=shape)


def _shape(ctx: TraceContext, shape) -> tuple:
    dims = (shape,) if isinstance(shape, (int, np.integer, Sym, Tracer)) else tuple(shape)
    for d in dims:
        if isinstance(d, Tracer) or not isinstance(d, (int, np.integer, Sym)):
            raise TraceError(f"an array's shape must be Python ints (or x.shape), got {d!r} ({ctx.where()}); "
                             "pass values that decide shapes with static_argnums")
    return tuple(d if isinstance(d, Sym) else int(d) for d in dims)


def _dtype(dtype, default=np.float64) -> np.dtype:
    return np.dtype(default if dtype is None else dtype)


def _like_shape(a, shape):
    return np.shape(a) if shape is None else shape


def _like_dtype(a, dtype):
    return dtype if dtype is not None else (a.dtype if hasattr(a, "dtype") else np.asarray(a).dtype)


def _captured(ctx: TraceContext, array: np.ndarray, hint: str) -> Tracer:
    """A numpy-computed array as a fresh traced array (constant or weight)."""
    t = ctx.capture(array, hint)
    return Tracer(t.value, ctx)


def creation_functions(ctx: TraceContext) -> dict[str, Callable]:
    """numpy's creation functions as traced versions bound to `ctx`, by numpy name."""

    def zeros(shape, dtype=None, order="C", **_):
        return fill(ctx, shape, 0, _dtype(dtype))

    def ones(shape, dtype=None, order="C", **_):
        return fill(ctx, shape, 1, _dtype(dtype))

    def full(shape, fill_value, dtype=None, order="C", **_):
        if dtype is None and not isinstance(fill_value, Tracer):
            dtype = np.asarray(fill_value).dtype
        return fill(ctx, shape, fill_value, dtype)

    def zeros_like(a, dtype=None, order="K", subok=True, shape=None, **_):
        return fill(ctx, _like_shape(a, shape), 0, _like_dtype(a, dtype))

    def ones_like(a, dtype=None, order="K", subok=True, shape=None, **_):
        return fill(ctx, _like_shape(a, shape), 1, _like_dtype(a, dtype))

    def full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, **_):
        return fill(ctx, _like_shape(a, shape), fill_value, _like_dtype(a, dtype))

    def arange(*args, dtype=None, **kwargs):
        _static_args(ctx, "np.arange", args)
        return _captured(ctx, np.arange(*args, dtype=dtype, **kwargs), "arange")

    def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
        _static_args(ctx, "np.linspace", (start, stop, num))
        out = np.linspace(start, stop, num, endpoint, retstep, dtype, axis)
        return (_captured(ctx, out[0], "linspace"), out[1]) if retstep else _captured(ctx, out, "linspace")

    def eye(N, M=None, k=0, dtype=float, order="C", **kwargs):
        return _captured(ctx, np.eye(N, M, k, dtype, **kwargs), "eye")

    def identity(n, dtype=None, **kwargs):
        return _captured(ctx, np.identity(n, dtype, **kwargs), "identity")

    traced = dict(zeros=zeros, ones=ones, full=full, empty=zeros, zeros_like=zeros_like,
                  ones_like=ones_like, full_like=full_like, empty_like=zeros_like, arange=arange,
                  linspace=linspace, eye=eye, identity=identity, ndarray=_traced_ndarray(zeros))
    return {name: _in_tracing_thread(name, f) for name, f in traced.items()}


def builtin_functions(ctx: TraceContext) -> dict[str, Callable]:
    """Python's builtins that take traced scalars while tracing, by name."""
    return {name: _in_tracing_thread(name, _python_extreme(ctx, name), builtins) for name in ("max", "min")}


class _NdarrayType(type):
    """isinstance and issubclass against the traced `np.ndarray` answer as numpy's ndarray does."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, np.ndarray)

    def __subclasscheck__(cls, sub):
        return issubclass(sub, np.ndarray)


def _traced_ndarray(zeros: Callable) -> type:
    """`np.ndarray(shape, dtype)` (an uninitialized array, as np.empty) while tracing; a class, for isinstance."""
    owner = threading.get_ident()

    def new(cls, shape, dtype=float, buffer=None, offset=0, strides=None, order=None):
        if threading.get_ident() != owner:
            return np.ndarray(shape, dtype, buffer, offset, strides, order)
        if buffer is not None:
            raise TraceError("np.ndarray(..., buffer=) while tracing: an array over existing memory cannot be "
                             "traced; pass the array as an argument")
        return zeros(shape, dtype)

    return _NdarrayType("ndarray", (), {"__new__": new, "__doc__": "np.ndarray while tracing: np.empty's array."})


def _in_tracing_thread(name: str, traced: Callable, home=np) -> Callable:
    """`traced` in the thread that traces; numpy's own function (or the builtin) in any other thread
    (which may be running the same module's code untraced meanwhile)."""
    owner, original = threading.get_ident(), getattr(home, name)
    if isinstance(traced, type):        # np.ndarray: a class, so that isinstance keeps working
        return traced

    def creation(*args, **kwargs):
        return (traced if threading.get_ident() == owner else original)(*args, **kwargs)

    creation.__name__, creation.__doc__ = name, f"{home.__name__}.{name} while tracing: takes traced values."
    creation._jitlab_creation = name
    return creation


def _python_extreme(ctx: TraceContext, name: str) -> Callable:
    """The builtin `max` or `min` that also takes traced scalars."""
    builtin = getattr(builtins, name)
    better = np.greater if name == "max" else np.less

    def extreme(*args, key=None, **kwargs):
        items = list(args[0]) if len(args) == 1 else list(args)
        if key is not None or not items or not any(isinstance(v, Tracer) for v in items):
            return builtin(items, key=key, **kwargs) if key is not None else builtin(items, **kwargs)
        for v in items:
            if isinstance(v, Tracer) and any(d != 1 for d in v.shape):
                raise TraceError(f"{name}() of traced arrays of shape {v.shape} ({ctx.where()}): Python's {name} "
                                 f"compares whole arrays, which numpy refuses as ambiguous; use "
                                 f"np.{'maximum' if name == 'max' else 'minimum'} for elementwise, "
                                 f"np.{name} for the largest element")
        best = items[0]
        for v in items[1:]:
            best = np.where(better(v, best), v, best)       # strict: the first of equal values stays, as Python's
        return best

    extreme.__name__ = name
    return extreme


def _static_args(ctx: TraceContext, name: str, args) -> None:
    if any(isinstance(a, Tracer) for a in args):
        raise TraceError(f"{name} of a traced value has a data-dependent length ({ctx.where()}); "
                         "pass the bounds with static_argnums")


class TracingNumpy(types.ModuleType):
    """numpy as a traced function sees it: creation functions traced, the rest numpy's own."""

    def __init__(self, functions: dict[str, Callable]):
        super().__init__("numpy", np.__doc__)
        self.__dict__.update(functions)

    def __getattr__(self, name: str):
        return getattr(np, name)

    def __dir__(self):
        return dir(np)


def _namespaces(fn: Callable) -> list[tuple[object, str | None]]:
    """Where fn looks names up (its globals and closure cells), and with it the functions of the
    user's code it calls by name (`helper(x)`, `utils.helper(x)`) and those they wrap."""
    out, seen_globals, seen = [], set(), set()
    todo = [fn]
    while todo:
        f = todo.pop()
        if f is None or id(f) in seen:
            continue
        seen.add(id(f))
        attrs = getattr(f, "__dict__", {})        # not getattr: an object's __getattr__ may answer anything
        todo += [attrs.get("__wrapped__"), attrs.get("fn")]          # functools.wraps, jl.jit and jl.grad
        g = getattr(f, "__globals__", None)
        code = getattr(f, "__code__", None)
        if not isinstance(g, dict) or code is None:
            continue
        if id(g) not in seen_globals:
            seen_globals.add(id(g))
            out.append((g, None))
        cells = f.__closure__ or ()
        out += [(cell, "cell_contents") for cell in cells]
        todo += [h for h in _called(code, {**g, **_cell_values(code, cells)}) if _is_users(h)]
    return out


def _cell_values(code, cells) -> dict:
    values = {}
    for name, cell in zip(code.co_freevars, cells):
        try:
            values[name] = cell.cell_contents
        except ValueError:           # an empty cell
            pass
    return values


def _called(code, namespace: dict) -> list:
    """The functions code names through its globals: `name` or `module.name`."""
    names = set()
    stack = [code]
    while stack:
        c = stack.pop()
        names.update(c.co_names + c.co_freevars)
        stack += [k for k in c.co_consts if isinstance(k, types.CodeType)]
    found = []
    for name in names:
        value = namespace.get(name)
        if isinstance(value, types.ModuleType) and value is not np and not isinstance(value, TracingNumpy):
            found += [v for v in map(vars(value).get, names) if callable(v)]
        elif callable(value):
            found.append(value)
    return found


def _is_users(f) -> bool:
    """A function of the user's own code (not a library's): its namespace may be routed."""
    code = getattr(inspect.unwrap(f), "__code__", None) if isinstance(f, types.FunctionType) else None
    if code is None:
        from .jit import JitFunction

        return isinstance(f, JitFunction)            # its fn is looked at
    path = code.co_filename
    return is_user_file(path) and "site-packages" not in path and "dist-packages" not in path


def _entries(namespace, field):
    if field is not None:
        try:
            return [(field, namespace.cell_contents)]
        except ValueError:           # an empty cell
            return []
    return list(namespace.items())


def _set(namespace, field, name, value) -> None:
    if field is not None:
        namespace.cell_contents = value
    else:
        namespace[name] = value


@contextlib.contextmanager
def routed_creation(fn: Callable, ctx: TraceContext) -> Iterator[None]:
    """While the block runs, fn's globals see numpy's creation functions traced into `ctx`."""
    functions = creation_functions(ctx)
    module = TracingNumpy(functions)
    added_builtins = builtin_functions(ctx)
    with TRACING_LOCK:
        saved: list[tuple] = []
        added: list[tuple[dict, str]] = []
        try:
            for namespace, field in _namespaces(fn):
                for name, value in _entries(namespace, field):
                    replacement = _replacement(value, module, {**functions, **added_builtins})
                    if replacement is not None:
                        saved.append((namespace, field, name, value))
                        _set(namespace, field, name, replacement)
                if field is None:
                    for name, f in added_builtins.items():
                        if name not in namespace:
                            added.append((namespace, name))
                            namespace[name] = f
            yield
        finally:
            for namespace, name in added:
                namespace.pop(name, None)
            for namespace, field, name, value in reversed(saved):
                _set(namespace, field, name, value)


_ORIGINALS = {id(getattr(np, name)): name for name in (
    "zeros", "ones", "full", "empty", "zeros_like", "ones_like", "full_like", "empty_like", "arange",
    "linspace", "eye", "identity", "ndarray")}


def _replacement(value, module: TracingNumpy, functions: dict):
    """What replaces the global `value` while tracing: numpy itself, a creation function, or None."""
    if value is np or isinstance(value, TracingNumpy):
        return module
    name = _ORIGINALS.get(id(value)) or (value.__dict__.get("_jitlab_creation")
                                         if isinstance(value, types.FunctionType) else None)
    return functions[name] if isinstance(name, str) else None

"""Tracing: a `Tracer` stands in for an array while a Python function runs, and every
numpy operation on it records an op into the Program being built.

Tracers carry only a type (shape and dtype); their values are never known. numpy's
dispatch protocols (`__array_ufunc__`, `__array_function__`) route numpy calls to the
tables in `numpy_api`; operators and methods route to the same implementations.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ..errors import JitlabError, LongTraceWarning, TraceError
from ..ir.attributes import Dense
from ..ir.builder import Builder
from ..ir.core import Block, BlockArgument, Location, Operation, OpResult, Region, Value
from ..ir.program import Program
from ..ir.shapes import Dim
from ..ir.types import TensorType
from .loops import LoopTracker
from .trace_errors import is_user_file

CONSTANT_LIMIT = 16  # captured arrays with more elements become weights instead of constants
# Past this many ops a program takes minutes to compile at O1/O2 (each op is lowered and the
# fusion search grows with the graph): tracing warns once, naming the line that recorded most.
LONG_TRACE = 5000


class RegionFrame:
    """A region being traced (a loop body, a branch): its block, and the values from outside it that its
    ops read, each with the block argument standing for it (scf ops are isolated from above)."""

    def __init__(self, block: Block):
        self.block = block
        self.captures: dict[Value, tuple[Value, BlockArgument]] = {}   # value -> (its outer value, argument)

    def defines(self, v: Value) -> bool:
        if isinstance(v, BlockArgument):
            return v.block is self.block
        return isinstance(v, OpResult) and v.op.parent is self.block


class _CapturingBuilder(Builder):
    """The trace's builder: an operand from outside the region being traced becomes a capture."""

    def __init__(self, ctx: TraceContext, block: Block, constraints):
        super().__init__(block, constraints=constraints)
        self.ctx = ctx

    def create(self, name: str, operands: Sequence[Value] = (), attrs=None, result_types=None,
               regions: Sequence[Region] = (), loc: Location | None = None) -> Operation:
        return super().create(name, [self.ctx.local(v) for v in operands], attrs, result_types, regions, loc)


ACTIVE: list[TraceContext] = []      # the traces running now, innermost last (jl.fori_loop & co. read it)


class TraceContext:
    """The program under construction and what tracing it has captured so far."""

    def __init__(self, program: Program, function_name: str):
        self.program = program
        self.function_name = function_name
        self.builder: Builder = _CapturingBuilder(self, program.body, program.constraints)
        self.frames: list[RegionFrame] = []     # regions being traced, innermost last
        self._constants: dict[tuple, Value] = {}
        self._captured: dict[int, tuple[np.ndarray, Value]] = {}
        # Scopes are the user functions called below the frame that creates this context (the
        # one that calls the traced function). Frames are kept while tracing so that a frame's
        # id is never taken for a later call's: each call is a scope of its own.
        self._caller = sys._getframe(1)
        self._frame_scopes: dict[int, tuple[Any, tuple[str, ...]]] = {}   # id(frame) -> (frame, its scope)
        self._calls: dict[tuple[str, ...], int] = {}     # scope -> calls so far: later calls get _1, _2...
        self._loops = LoopTracker()
        self._ops_per_line: Counter[tuple[str, int]] = Counter()
        self._ops = 0

    @contextlib.contextmanager
    def active(self) -> Iterator[TraceContext]:
        """Marks this trace as running (explicit control flow traces into it)."""
        ACTIVE.append(self)
        try:
            yield self
        finally:
            ACTIVE.remove(self)

    # -- regions --------------------------------------------------------------------
    @contextlib.contextmanager
    def region(self, block: Block, seed: Sequence[Value] = ()) -> Iterator[RegionFrame]:
        """Ops recorded inside go into `block`; outside values they read become captures, `seed`'s first
        and in its order (so that an op's regions take their captures in one order)."""
        frame = RegionFrame(block)
        saved = (self.builder.block, self.builder.before, self._constants, dict(self._captured))
        self.frames.append(frame)
        self.builder.block, self.builder.before, self._constants = block, None, {}
        try:
            for v in seed:
                self.local(v)
            yield frame
        finally:
            self.frames.pop()
            self.builder.block, self.builder.before, self._constants, self._captured = saved

    def local(self, v: Value, depth: int | None = None) -> Value:
        """`v` as the region being traced sees it: itself, or the argument that captures it."""
        depth = len(self.frames) - 1 if depth is None else depth
        if depth < 0:
            return v
        frame = self.frames[depth]
        if frame.defines(v):
            return v
        if v not in frame.captures:
            outer = self.local(v, depth - 1)
            frame.captures[v] = (outer, frame.block.add_arg(v.type))
        return frame.captures[v][1]

    def is_local(self, v: Value) -> bool:
        """Whether `v` belongs to the region being traced (always, outside any region)."""
        return not self.frames or self.frames[-1].defines(v)

    # -- emitting ops -------------------------------------------------------------
    def location(self) -> Location | None:
        frame, user, callee = sys._getframe(1), [], None
        while frame is not None and frame is not self._caller:
            if is_user_file(frame.f_code.co_filename):
                user.append((frame, callee))
            callee = frame
            frame = frame.f_back
        if not user:            # traced code that is not the user's (a jitlab wrapper): the caller's line
            while frame is not None and not is_user_file(frame.f_code.co_filename):
                frame = frame.f_back
            return Location(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name) if frame else None
        inner = user[0][0]
        scope = self._scope(user[::-1]) if frame is not None else ()
        return Location(inner.f_code.co_filename, inner.f_lineno, inner.f_code.co_name, scope)

    def _scope(self, frames: list) -> tuple[str, ...]:
        """The scope of the innermost of `frames` (outermost first, each with the frame it calls): one name
        per function call below the traced function, then the loops (and their iterations) that the
        innermost function is running. A call made inside a loop is a scope of its own (`block_3`), which
        reads better than `for L12 / #3 / block` for the common loop over layers."""
        path: tuple[str, ...] = ()
        for depth, (f, _) in enumerate(frames):
            name = f.f_code.co_name
            # comprehensions, lambdas and the functions a captured loop or branch runs belong to their function
            if depth > 0 and not name.startswith(("<", "_jl_")):
                known = self._frame_scopes.get(id(f))
                if known is None or known[0] is not f:
                    n = self._calls.get(path + (name,), 0)
                    self._calls[path + (name,)] = n + 1
                    known = self._frame_scopes[id(f)] = (f, path + (name if n == 0 else f"{name}_{n}",))
                path = known[1]
        f, callee = frames[-1]
        return path + self._loops.scope(f, callee)

    def where(self) -> str:
        loc = self.location()
        return f"in {self.function_name}" + (f" at {loc.file}:{loc.line}" if loc else "")

    def emit(self, name: str, operands: Sequence[Value], **attrs: Any) -> list[Tracer]:
        """Records op `name` and returns tracers for its results."""
        loc = self.location()
        try:
            op = self.builder.create(name, list(operands), attrs, loc=loc)
        except JitlabError as e:
            raise type(e)(f"{e} ({self.where()})") from None
        self._count(loc)
        return [Tracer(r, self) for r in op.results]

    def _count(self, loc: Location | None) -> None:
        """Warns once when the program passes LONG_TRACE ops: an unrolled loop, most likely."""
        self._ops_per_line[(loc.file, loc.line) if loc else ("?", 0)] += 1
        self._ops += 1
        if self._ops != LONG_TRACE:
            return
        (file, line), n = self._ops_per_line.most_common(1)[0]
        warnings.warn_explicit(
            f"tracing {self.function_name} has recorded {LONG_TRACE} ops, {n} of them at {file}:{line}: "
            "a Python loop that is not captured as one scf op is unrolled while tracing, so the program and "
            "its compile time grow with the trip count (the program's loops say why each was unrolled); "
            "give the loop fewer iterations, write its body so that it is captured (docs/control-flow.md), "
            "or over whole arrays (one op per step instead of one per element)", LongTraceWarning, file, line)

    def op(self, name: str, *operands: Value, **attrs: Any) -> Tracer:
        return self.emit(name, operands, **attrs)[0]

    # -- constants and captured arrays --------------------------------------------
    def constant(self, value, dtype=None) -> Tracer:
        array = np.asarray(value, dtype=dtype)
        if array.dtype == object or array.dtype.kind not in "biufc":
            raise TraceError(f"cannot use a value of type {type(value).__name__} as an array ({self.where()})")
        key = (array.dtype.str, array.shape, array.tobytes())
        if key not in self._constants:
            op = self.builder.create("np.constant", attrs={"value": Dense(array)}, loc=self.location())
            self._constants[key] = op.result
        return Tracer(self._constants[key], self)

    def capture(self, array: np.ndarray, name_hint: str | None = None) -> Tracer:
        """A numpy array the function closes over: a constant if small, else a weight."""
        if array.size <= CONSTANT_LIMIT:
            return self.constant(array)
        if id(array) in self._captured and self._captured[id(array)][0] is array:
            return Tracer(self._captured[id(array)][1], self)
        base = name_hint or f"w{len(self.program.weights)}"
        name, k = base, 1
        while name in self.program.weights:
            name, k = f"{base}_{k}", k + 1
        frozen = np.array(array, copy=True)
        frozen.setflags(write=False)
        self.program.weights[name] = frozen
        op = self.builder.create("np.weight", attrs={"name": name},
                                 result_types=[TensorType(array.shape, array.dtype)], loc=self.location())
        op.result.name = name
        self._captured[id(array)] = (array, op.result)
        return Tracer(op.result, self)

    def lift(self, x, dtype_like: Tracer | None = None) -> Tracer:
        """Turns any operand (tracer, array, numpy or Python scalar) into a tracer."""
        if isinstance(x, Tracer):
            if x.ctx is not self:
                raise TraceError(f"a traced array from another trace was used ({self.where()}); "
                                 "jitted functions cannot leak traced values")
            return x
        if isinstance(x, np.ndarray):
            return self.capture(x, _find_name(x))
        if isinstance(x, (bool, int, float, complex)) and dtype_like is not None:
            return self.constant(x, weak_dtype(dtype_like.dtype, x))
        if isinstance(x, (bool, int, float, complex, np.generic, list, tuple)):
            return self.constant(x)
        raise TraceError(f"cannot use a {type(x).__name__} as an array ({self.where()})")


def weak_dtype(array_dtype: np.dtype, scalar) -> np.dtype:
    """The dtype numpy 2 gives a Python scalar next to an array (NEP 50 weak scalars)."""
    return np.result_type(array_dtype, scalar) if not isinstance(scalar, bool) or array_dtype.kind == "b" \
        else np.result_type(array_dtype, np.bool_)


def _find_name(array: np.ndarray) -> str | None:
    """The variable name the user gave a captured array, looked up in the calling frames."""
    frame = sys._getframe(1)
    while frame is not None:
        if is_user_file(frame.f_code.co_filename):
            for scope in (frame.f_locals, frame.f_globals):
                for name, value in scope.items():
                    if value is array and not name.startswith("_"):
                        return name
            return None
        frame = frame.f_back
    return None


class Tracer(np.lib.mixins.NDArrayOperatorsMixin):
    """An array under tracing: a shape, a dtype and the IR value that will hold it."""

    __array_priority__ = 1000
    # An in-place write rebinds `_value` and bumps `_version`; `_view` (an inplace.View) says which
    # array this one views, so that it re-reads its base after writes to it and writes through.
    __slots__ = ("_value", "ctx", "_version", "_view")

    def __init__(self, value: Value, ctx: TraceContext):
        self._value, self.ctx, self._version, self._view = value, ctx, 0, None

    @property
    def value(self) -> Value:
        """The IR value this array holds now."""
        if self._view is not None:
            self._view.refresh(self)
        return self._value

    # -- array attributes ---------------------------------------------------------
    @property
    def shape(self) -> tuple[Dim, ...]:
        return self.value.type.shape

    @property
    def dtype(self) -> np.dtype:
        return self.value.type.dtype

    @property
    def ndim(self) -> int:
        return self.value.type.rank

    @property
    def size(self) -> Dim:
        return self.value.type.size

    @property
    def T(self) -> Tracer:
        return self.transpose()

    @property
    def mT(self) -> Tracer:
        from . import numpy_api

        return numpy_api.swapaxes(self, -1, -2)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a rank-0 traced array")
        if not isinstance(self.shape[0], int):
            raise TraceError(f"len() of a traced array with symbolic first dim {self.shape[0]} "
                             f"({self.ctx.where()})")
        return self.shape[0]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __repr__(self) -> str:
        return f"Tracer(%{self.value.name or '?'} : {self.value.type})"

    # -- numpy dispatch -----------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        from . import numpy_api

        if any(isinstance(x, _deferred()) for x in inputs):
            return NotImplemented       # numpy asks the selection (or window) next
        return numpy_api.apply_ufunc(self.ctx, ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        from . import numpy_api

        if any(issubclass(t, _deferred()) for t in types):
            return NotImplemented
        return numpy_api.apply_function(self.ctx, func, args, kwargs)

    def __array__(self, dtype=None, copy=None):
        raise TraceError(f"a traced array has no value while tracing: it cannot be converted to a "
                         f"numpy array ({self.ctx.where()}); write np.stack([...]) instead of "
                         "np.array([...]) of traced arrays, x instead of np.asarray(x), and keep the "
                         "computation in numpy functions jitlab supports")

    def _concrete(self, what: str, advice: str):
        raise TraceError(f"{what} of a traced array is not known while tracing ({self.ctx.where()}): {advice}")

    def __bool__(self):
        self._concrete("the truth value", "data-dependent Python control flow (if, while, and, or) cannot be "
                       "compiled; use np.where(cond, a, b), np.maximum or np.minimum instead, or pass the "
                       "deciding value with static_argnums")

    def __float__(self):
        self._concrete("the float value", "keep it an array (x.astype(np.float64), np.sqrt rather than "
                       "math.sqrt), or pass the value with static_argnums")

    def __int__(self):
        self._concrete("the int value", "keep it an array (x.astype(np.int64)), or pass the value with "
                       "static_argnums")

    def __index__(self):
        self._concrete("the index value", "sizes, ranges and Python indices must be Python ints; use "
                       "x.shape for sizes, np.take(a, i) for a traced index, or pass the value with "
                       "static_argnums")

    def __setitem__(self, key, value):
        from . import inplace

        inplace.setitem(self, key, value)

    def __hash__(self):
        return id(self)

    def __pow__(self, exponent):
        # numpy's `array ** scalar` on floats takes fast paths (square, sqrt, reciprocal) that
        # round differently from np.power; the traced program must compute what numpy computes.
        # On integers and bools only the Python int 2 takes its fast path (bool ** 2 is int8).
        fast = {2: np.square, 0.5: np.sqrt, -1: np.reciprocal, 1: np.positive}
        if self.dtype.kind in "fc" and isinstance(exponent, (int, float)) and not isinstance(exponent, bool) \
                and exponent in fast:
            return fast[exponent](self)
        if type(exponent) is int and exponent == 2:
            return np.square(self)
        return np.power(self, exponent)

    # -- methods: thin forwards to the numpy implementations ---------------------
    def __getitem__(self, key):
        from . import indexing

        return indexing.getitem(self, key)

    def reshape(self, *shape, order="C"):
        from . import numpy_api

        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return numpy_api.reshape(self, shape, order=order)

    def transpose(self, *axes):
        from . import numpy_api

        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        return numpy_api.transpose(self, axes or None)

    def astype(self, dtype, copy=True):
        from . import numpy_api

        return numpy_api.astype(self, dtype)

    def flatten(self, order="C"):
        return self.reshape(-1, order=order).copy()

    def ravel(self, order="C"):
        return self.reshape(-1, order=order)

    @property
    def real(self) -> Tracer:
        return np.real(self)

    @real.setter
    def real(self, value):
        from . import numpy_api

        numpy_api.set_part(self, "real", value)

    @property
    def imag(self) -> Tracer:
        return np.imag(self)

    @imag.setter
    def imag(self, value):
        from . import numpy_api

        numpy_api.set_part(self, "imag", value)

    def conj(self):
        return np.conjugate(self)

    conjugate = conj

    def copy(self, order="C"):
        return Tracer(self.value, self.ctx)

    def fill(self, value):
        self[...] = value

    def sort(self, axis=-1, kind=None, order=None, *, stable=None):
        from . import numpy_api

        self[...] = numpy_api.sort(self, axis, kind, order, stable=stable)


def _deferred() -> tuple[type, ...]:
    """The stand-ins for arrays of a shape known only at run time, which handle numpy calls themselves."""
    from .selection import Selection
    from .windows import Window

    return Selection, Window


def _forward(name: str, impl_name: str):
    def method(self, *args, **kwargs):
        from . import numpy_api

        return getattr(numpy_api, impl_name)(self, *args, **kwargs)

    method.__name__ = name
    return method


for _name, _impl in [("sum", "reduce_sum"), ("prod", "reduce_prod"), ("max", "reduce_max"),
                     ("min", "reduce_min"), ("any", "reduce_any"), ("all", "reduce_all"),
                     ("mean", "mean"), ("argmax", "argmax"), ("argmin", "argmin"), ("var", "var"),
                     ("std", "std"), ("squeeze", "squeeze"), ("swapaxes", "swapaxes"), ("clip", "clip"),
                     ("dot", "dot"), ("round", "round_"), ("cumsum", "cumsum"), ("cumprod", "cumprod"),
                     ("repeat", "repeat"), ("argsort", "argsort")]:
    setattr(Tracer, _name, _forward(_name, _impl))

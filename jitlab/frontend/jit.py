"""`jl.trace` and `@jl.jit`: from a Python function over numpy arrays to a Program,
and a callable that keeps one compiled Executable per input signature."""

from __future__ import annotations

import functools
import inspect
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..backends.device_arrays import device_array_meta, is_numba_device_array
from ..errors import InputError, JitlabError, TraceError, UnsupportedOp
from ..ir.builder import FrontendClock
from ..ir.dtypes import as_dtype
from ..ir.program import Program
from ..ir.shapes import sym
from ..ir.types import TensorType
from ..runtime import compile_log
from ..runtime.signature import native_dtype
from . import recompiles
from .arguments import CallArguments
from .capture import converted
from .creation import TRACING_LOCK, routed_creation
from .pytree import TreeDef, flatten, unflatten
from .selection import Selection
from .trace_errors import defined_at, located
from .tracer import TraceContext, Tracer
from .windows import Window


@dataclass(frozen=True)
class Spec:
    """An input given by shape and dtype only; a str dim is a symbol (`spec(("B", 4))`)."""

    shape: tuple
    dtype: np.dtype

    @property
    def type(self) -> TensorType:
        return TensorType(tuple(sym(d) if isinstance(d, str) else d for d in self.shape), self.dtype)


def spec(shape, dtype="f32") -> Spec:
    """An abstract input for `jl.trace`: `jl.spec(("B", 784), np.float32)`."""
    return Spec(tuple(shape), as_dtype(dtype))


# ndarray subclasses whose operators mean something else than numpy's (`*` is a matrix product)
_OTHER_SEMANTICS = (np.matrix, np.ma.MaskedArray)


def _is_input_leaf(x) -> bool:
    if isinstance(x, (np.ndarray, np.generic, Spec, memoryview)):
        return True
    return not isinstance(x, Tracer) and (hasattr(x, "__array__") or device_array_meta(x) is not None)


@dataclass(frozen=True)
class _Static:
    """An argument named by static_argnums: a constant while tracing, part of the cache key."""

    value: Any


def _static_key(x):
    if isinstance(x, _Static):
        value = x.value
        if isinstance(value, np.ndarray):      # an array given as static is keyed by its contents
            return (_Static, value.dtype.str, value.shape, value.tobytes())
        return (_Static, _static_key(value))
    try:
        hash(x)
    except (TypeError, ValueError):       # a writable memoryview raises ValueError
        raise TraceError(f"argument {x!r} is neither an array nor hashable; pass arrays or Python "
                         "scalars, lists, tuples and dicts of them") from None
    return (type(x), x)


@dataclass
class Traced:
    """What tracing a function produced: the program and how to map values in and out."""

    program: Program
    in_tree: TreeDef
    input_mask: list[bool]        # which flattened argument leaves are program inputs
    out_tree: TreeDef
    # program inputs the function wrote into, by position: the first len(mutated) program
    # outputs are their new values, which the caller's arrays receive after each call
    mutated: tuple[int, ...] = ()


def _bind_arguments(fn: Callable, args: tuple, kwargs: dict) -> inspect.BoundArguments:
    """The call's arguments by parameter name, or an InputError.

    Defaults are not filled in: a default array is read by the function like any
    captured array, and some callables (ufuncs) reject their defaults passed explicitly."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):        # callables without one (some builtins) take what they take
        signature = inspect.Signature([inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL),
                                       inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD)])
    try:
        return signature.bind(*args, **kwargs)
    except TypeError as e:
        raise InputError(f"cannot call {getattr(fn, '__name__', fn)}{signature}: {e}") from None


def _flatten_arguments(bound: inspect.BoundArguments, static_argnums: tuple[int, ...]):
    """The arguments' leaves, their names, the structure, and which leaves are program inputs."""
    positional = [p.name for p in bound.signature.parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    outside = [i for i in static_argnums if not 0 <= i < len(positional)]
    if outside:
        raise InputError(f"static_argnums {static_argnums}: position {outside[0]} is no positional parameter "
                         f"of {bound.signature}")
    static = {positional[i] for i in static_argnums}
    arguments = {k: _Static(v) if k in static else v for k, v in bound.arguments.items()}
    leaves, names, tree = flatten(arguments, is_leaf=_is_input_leaf)
    return leaves, names, tree, [_is_input_leaf(x) for x in leaves]


def _leaf_type(leaf, name: str, dynamic: dict[str, dict[int, str]]) -> TensorType:
    if isinstance(leaf, Spec):
        return leaf.type
    if isinstance(leaf, _OTHER_SEMANTICS):
        raise InputError(f"input '{name}' is a {type(leaf).__name__}, whose operators differ from an "
                         "ndarray's; pass np.asarray(x)")
    array = device_array_meta(leaf) or np.asarray(leaf)
    dtype = as_dtype(native_dtype(array.dtype), f"input '{name}'")
    dims = dynamic.get(name, {})
    shape = tuple(sym(dims[i]) if i in dims else d for i, d in enumerate(array.shape))
    return TensorType(shape, dtype)


def trace_function(fn: Callable, args: tuple, kwargs: dict, name: str | None = None,
                   dynamic: dict[str, dict[int, str]] | None = None, static_argnums: tuple[int, ...] = (),
                   capture_loops: bool = True) -> Traced:
    """Runs `fn` on tracers for its array arguments (but those in `static_argnums`) and records the program.

    With `capture_loops` (the default), fn's `for ... in range`, `while` and `if` statements run
    converted (frontend/capture.py): as one scf op each where they can be, on traced values."""
    clock = FrontendClock()
    fn_name = name or getattr(fn, "__name__", "main")
    bound = _bind_arguments(fn, args, kwargs)
    leaves, names, in_tree, mask = _flatten_arguments(bound, static_argnums)
    types = [_leaf_type(x, n, dynamic or {}) for x, n, m in zip(leaves, names, mask) if m]
    program = Program(fn_name if fn_name.isidentifier() else "main", types,
                      [n for n, m in zip(names, mask) if m])
    ctx = TraceContext(program, fn_name)
    tracers = [Tracer(v, ctx) for v in program.inputs]
    inputs = iter(tracers)
    arguments = unflatten(in_tree, [next(inputs) if m else x for x, m in zip(leaves, mask)])
    bound.arguments.update({k: v.value if isinstance(v, _Static) else v for k, v in arguments.items()})
    run = converted(fn) if capture_loops else fn
    try:
        with routed_creation(fn, ctx), ctx.active():
            result = run(*bound.args, **bound.kwargs)
    except Exception as e:
        error = located(e, fn)
        if error is e:
            raise
        raise error from e
    outputs, out_tree = _results(fn, fn_name, ctx, result)
    mutated = tuple(i for i, (t, v) in enumerate(zip(tracers, program.inputs)) if t.value is not v)
    new_values = [tracers[i].value for i in mutated]
    for i, new in zip(mutated, new_values):
        if new.name is None:
            new.name = f"{program.inputs[i].name}_new"
    # New values first: donating the written inputs pairs outputs with inputs in order, so
    # each new value gets its own input's array (written in place where the plan allows).
    program.set_outputs(new_values + outputs)
    clock.stamp(program)
    specs = iter(Spec(v.type.shape, v.type.dtype) for v in program.inputs)
    program.retrace = Retrace(fn, bound.signature, in_tree, [next(specs) if m else x for x, m in zip(leaves, mask)],
                              program.input_names, fn_name, static_argnums, capture_loops)
    statics = [x for x, m in zip(leaves, mask) if not m]
    program.arguments = CallArguments(fn_name, bound.signature, in_tree, mask, statics,
                                      functools.partial(_flatten_arguments, static_argnums=static_argnums), _static_key)
    return Traced(program, in_tree, mask, out_tree, mutated)


@dataclass
class Retrace:
    """Traces the function again with its inputs at other shapes (dry runs at sizes a baked-in
    constant ties to the traced ones, such as a mean's gradient): inputs are specs, so nothing is
    allocated and no array op runs; the function's Python code does run again."""

    fn: Callable
    signature: inspect.Signature
    in_tree: TreeDef
    leaves: list            # the arguments' leaves, each input as its Spec (no array is kept)
    names: list[str]        # the program's input names, in the order of the Specs
    name: str
    static_argnums: tuple[int, ...]
    capture_loops: bool = True

    def __call__(self, shapes: dict[str, tuple[int, ...]]) -> Program:
        """The program traced with these inputs' static dims (by input name) set to the shapes given."""
        names = iter(self.names)
        leaves = [_resized(x, shapes.get(next(names))) if isinstance(x, Spec) else x for x in self.leaves]
        arguments = unflatten(self.in_tree, leaves)
        arguments = {k: v.value if isinstance(v, _Static) else v for k, v in arguments.items()}
        bound = inspect.BoundArguments(self.signature, arguments)
        return trace_function(self.fn, bound.args, bound.kwargs, self.name, None, self.static_argnums,
                              self.capture_loops).program


def _resized(spec: Spec, shape) -> Spec:
    """`spec` with its static dims from `shape` (its symbols stay symbols)."""
    if shape is None:
        return spec
    return Spec(tuple(d if not isinstance(d, int) else int(n) for d, n in zip(spec.shape, shape)), spec.dtype)


def _results(fn: Callable, fn_name: str, ctx: TraceContext, result) -> tuple[list, TreeDef]:
    """The program outputs for what the function returned, and its structure."""
    out_leaves, _, out_tree = flatten(result, is_leaf=lambda x: isinstance(x, Tracer))
    outputs = []
    for i, leaf in enumerate(out_leaves):
        if isinstance(leaf, Tracer):
            outputs.append(ctx.lift(leaf).value)
        elif isinstance(leaf, (np.ndarray, np.generic, int, float, bool)):
            outputs.append(ctx.lift(np.asarray(leaf)).value)
        elif isinstance(leaf, Selection):
            raise UnsupportedOp(f"{fn_name}{defined_at(fn)} returned x[mask] with a traced mask (output {i}): it has a "
                                "data-dependent shape; return np.where(mask, x, fill) and the "
                                "mask, or pass the mask with static_argnums")
        elif isinstance(leaf, Window):
            raise UnsupportedOp(f"{fn_name}{defined_at(fn)} returned a slice between traced bounds (output {i}): "
                                "its shape is known only at run time; return the whole array and the bounds, or "
                                "pass the bounds with static_argnums")
        else:
            raise TraceError(f"{fn_name}{defined_at(fn)} returned a {type(leaf).__name__} (output {i}); "
                             "return arrays, or tuples, lists and dicts of arrays")
    return outputs, out_tree


def trace(fn: Callable, *args, name: str | None = None, dynamic=None, static_argnums: int | tuple[int, ...] = (),
          capture_loops: bool = True, **kwargs) -> Program:
    """The operator-level Program of `fn` applied to example arrays (or `jl.spec`s); `capture_loops=False`
    unrolls every Python loop and refuses every branch on a traced value, as before issue 31."""
    return trace_function(fn, args, kwargs, name, dynamic, _argnums(static_argnums), capture_loops).program


def _argnums(argnums: int | tuple[int, ...]) -> tuple[int, ...]:
    return (argnums,) if isinstance(argnums, int) else tuple(argnums)


class JitFunction:
    """A function compiled on first call per input signature (shapes, dtypes, static values)."""

    def __init__(self, fn: Callable, level: str = "O1", target: str = "auto", dynamic=None,
                 donate_argnums: int | tuple[int, ...] = (), static_argnums: int | tuple[int, ...] = (),
                 capture_loops: bool = True, **options):
        from ..compiler import LEVEL_NAMES, check_options, resolve_target

        if level not in LEVEL_NAMES:
            raise JitlabError(f"unknown level {level!r}; levels are {', '.join(LEVEL_NAMES)}")
        check_options(options, resolve_target(target), "jl.jit")
        self.fn, self.level, self.target, self.dynamic, self.options = fn, level, target, dynamic or {}, options
        self._cache: dict[Any, tuple[Traced, Any]] = {}
        self._fast: dict[tuple, tuple[Traced, Any]] = {}   # positional arrays only: key by shapes/dtypes
        # Donated arguments' arrays receive the outputs of their type (see passes/donation.py).
        self.donate_argnums = _argnums(donate_argnums)
        # Static arguments are Python values while tracing (they may decide shapes and control flow).
        self.static_argnums = _argnums(static_argnums)
        self.capture_loops = capture_loops
        self.last = None
        self.compiles: list[recompiles.CompileRecord] = []    # every signature compiled, with why
        self._compiling = threading.RLock()       # threads missing the same signature compile it once
        # Names and docs only: copying fn's __dict__ would put a wrapped jit's or grad's own
        # fields (fn, level, caches) over this wrapper's, compiling the wrong function.
        functools.update_wrapper(self, fn, updated=())

    def _signature(self, leaves, names, mask, in_tree):
        key = [in_tree]
        for leaf, name, is_input in zip(leaves, names, mask):
            if is_input:
                key.append((name, _leaf_type(leaf, name, self.dynamic)))
            else:
                key.append(_static_key(leaf))
        return tuple(key)

    def lower(self, *args, **kwargs):
        """The Executable this function compiles to for these arguments."""
        return self._entry(args, kwargs)[1][1]

    def executable_for(self, args: tuple, kwargs: dict) -> tuple:
        """The Executable for these arguments and its flat inputs; it becomes `last` (jl.profile's entry)."""
        inputs, entry = self._entry(args, kwargs)
        self.last = entry[1]
        return entry[1], tuple(inputs)

    def _entry(self, args, kwargs):
        bound = _bind_arguments(self.fn, args, kwargs)
        leaves, names, in_tree, mask = _flatten_arguments(bound, self.static_argnums)
        key = self._signature(leaves, names, mask, in_tree)
        if key not in self._cache:
            # The tracing lock first, always: a function traced in one thread may compile this one
            # (called on arrays) while another thread compiling this one waits to trace it.
            with TRACING_LOCK, self._compiling:
                if key not in self._cache:
                    self._cache[key] = self._compile(bound, args, kwargs)
        return [x for x, m in zip(leaves, mask) if m], self._cache[key]

    def _compile(self, bound, args, kwargs) -> tuple[Traced, Any]:
        from ..compiler import compile

        start = time.perf_counter()
        traced = trace_function(self.fn, args, kwargs, dynamic=self.dynamic, static_argnums=self.static_argnums,
                                capture_loops=self.capture_loops)
        # The inputs the function writes into are donated to their new values (the first outputs,
        # in input order); the other donated arguments serve the function's own results.
        written = [traced.program.inputs[i].name for i in traced.mutated]
        donate = written + [n for n in _donated_inputs(bound, self.donate_argnums) if n not in written]
        options = dict(self.options, donate=tuple(donate)) if donate else self.options
        exe = compile(traced.program, self.level, self.target, **options)
        entry = recompiles.record(self.compiles, recompiles.signature(traced.program, bound, self.static_argnums),
                                  time.perf_counter() - start, exe)
        compile_log.annotate(exe, self.__qualname__, entry.reason, {k: str(v) for k, v in entry.signature.items()},
                             entry.seconds)
        return traced, exe

    def __call__(self, *args, **kwargs):
        fast_key = None if kwargs else _array_key(args)
        if fast_key is not None:
            entry = self._fast.get(fast_key)
            if entry is not None:
                traced, exe = entry
                self.last = exe
                if exe.fast is not None and not traced.mutated:
                    results = exe.fast(args)
                    if results is not None:
                        tree = traced.out_tree
                        return results[0] if tree.kind == "leaf" else unflatten(tree, list(results))
                return _run(traced, exe, args)
        elif any(isinstance(x, Tracer) for x in flatten((args, kwargs), is_leaf=lambda x: isinstance(x, Tracer))[0]):
            fn = converted(self.fn) if self.capture_loops else self.fn
            return fn(*args, **kwargs)          # called inside another trace: inline
        inputs, entry = self._entry(args, kwargs)
        if fast_key is not None and all(entry[0].input_mask):
            self._fast[fast_key] = entry
        self.last = entry[1]
        return _run(entry[0], entry[1], inputs)

    @property
    def cache_size(self) -> int:
        return len(self._cache)

    def __repr__(self) -> str:
        return f"<jl.jit {getattr(self.fn, '__name__', self.fn)} level={self.level} target={self.target}>"


def _array_key(args: tuple) -> tuple | None:
    """The shapes and dtypes of positional numpy arrays or numba device arrays (None if any argument
    is something else): the key of a call that needs no flattening."""
    key = []
    for a in args:
        if type(a) is np.ndarray:
            key.append((a.shape, a.dtype.num))
        elif is_numba_device_array(a):
            key.append((type(a), a.shape, a.dtype.num))
        else:
            return None
    return tuple(key)


def _donated_inputs(bound: inspect.BoundArguments, argnums: tuple[int, ...]) -> tuple[str, ...]:
    """The program input names of the array leaves of the positional arguments `argnums`."""
    names = []
    for i, (key, value) in enumerate(bound.arguments.items()):
        if i in argnums:
            leaves, leaf_names, _ = flatten(value, key, is_leaf=_is_input_leaf)
            names += [n for leaf, n in zip(leaves, leaf_names) if _is_input_leaf(leaf)]
    return tuple(names)


def _run(traced: Traced, exe, inputs) -> Any:
    """Runs the executable; writes the mutated arguments back; gives the function's results."""
    n = len(traced.mutated)
    if n:
        _check_writable(traced, inputs)
    results = exe(*inputs)
    if n:
        for i, new in zip(traced.mutated, results[:n]):
            # a donated input already holds its new value; a numpy scalar is immutable (`s += 1` rebinds)
            if new is not inputs[i] and isinstance(inputs[i], np.ndarray):
                np.copyto(inputs[i], new)
        results = results[n:]
    if traced.out_tree.kind == "leaf":
        return results[0]
    return unflatten(traced.out_tree, list(results))


def _check_writable(traced: Traced, inputs) -> None:
    """Each array the function writes into must be a writable ndarray sharing memory with no other input."""
    names = traced.program.input_names
    for i in traced.mutated:
        x = inputs[i]
        if isinstance(x, np.generic):
            continue
        if not isinstance(x, np.ndarray) or not x.flags.writeable:
            raise InputError(f"{traced.program.name} writes into its input '{names[i]}', but the argument is "
                             f"{'a read-only array' if isinstance(x, np.ndarray) else 'a ' + type(x).__name__}; "
                             "pass a writable numpy array (numpy would fail to write too)")
        for j, y in enumerate(inputs):
            if j != i and isinstance(y, np.ndarray) and np.may_share_memory(x, y):
                raise InputError(f"{traced.program.name} writes into its input '{names[i]}', which shares memory "
                                 f"with input '{names[j]}': numpy would let the write change what the function "
                                 "reads from the other, which a compiled program cannot do; pass a copy")


def jit(fn: Callable | None = None, *, level: str = "O1", target: str = "auto", dynamic=None,
        donate_argnums: int | tuple[int, ...] = (), static_argnums: int | tuple[int, ...] = (),
        capture_loops: bool = True, **options):
    """Compiles a numpy function: `@jl.jit` or `jl.jit(level="O2", target="cpu")(f)`.

    `static_argnums`: these positional arguments are passed to the function as they are,
    not traced (numpy scalars and arrays included); each distinct value compiles anew.
    Python scalars, strings and None are static without being named here.

    `donate_argnums` (as in JAX): the arrays of these positional arguments may be
    overwritten with outputs of the same shape and dtype, so a training step updates its
    weights in place; after the call such an array holds the new value, never the old.

    `capture_loops`: each `for i in range(...)` loop, `while` and `if` on a traced value becomes one
    scf op where it can (docs/control-flow.md); False unrolls every loop."""
    if fn is None:
        return lambda f: JitFunction(f, level, target, dynamic, donate_argnums, static_argnums, capture_loops,
                                     **options)
    return JitFunction(fn, level, target, dynamic, donate_argnums, static_argnums, capture_loops, **options)


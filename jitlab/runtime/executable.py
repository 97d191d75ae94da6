"""The Executable: a compiled program plus what runs it, checked at every call.

Results belong to the caller (runtime/ownership.py): none shares memory with an undonated
input, a weight or another result, and a later call never overwrites one.

Calls are safe from several threads: runners keep buffers, pools and arenas across calls,
so each executable runs one call at a time (O0, which keeps nothing, runs them at once).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from contextlib import contextmanager, nullcontext
from typing import Protocol

import numpy as np

from ..backends.device_arrays import device_array_meta, is_numba_device_array
from ..backends.fastcall import compile_fast_call
from ..errors import InputError, OutOfMemoryError
from ..ir.display import render_html
from ..ir.program import Program
from ..report import CompileReport, MemoryPlan
from ..units import format_bytes
from .donation import hand_back
from .dryrun import SystemFit, check_budget, out_of_memory, plan_for_level
from .ownership import outputs_to_check, owned_results
from .signature import bind_keywords, check_dims_nonnegative, check_inputs


class Runner(Protocol):
    """What runs a compiled program: its input arrays and symbol values -> its results, in output order."""

    def __call__(self, arrays: list[np.ndarray], bindings: dict[str, int]) -> Sequence[np.ndarray]: ...


class InPlaceRunner(Runner, Protocol):
    """A runner that writes outputs straight into donated inputs' arrays where that is safe (the
    host runners; a backend whose `donates_in_place` is true runs programs on one)."""

    def donate(self, program: Program, donations: list) -> None:
        """Writes these outputs (runtime/donation.py's Donations) into their inputs' arrays; sets
        `mode = "copy"` on those it cannot."""


def _taken_as_is(a) -> bool:
    """Whether compiled runners take this input without a copy (a writable C-contiguous array)."""
    flags = a.flags
    return flags.c_contiguous and flags.writeable


def to_host(a) -> np.ndarray:
    """A device array's contents as a numpy array (numpy arrays pass through)."""
    if device_array_meta(a) is None:
        return a
    if is_numba_device_array(a):
        return a.copy_to_host()
    from numba import cuda

    return cuda.as_cuda_array(a).copy_to_host()


class Executable:
    """Call it with numpy arrays (one per program input, by position or by input name); it returns a tuple of arrays."""

    def __init__(self, program: Program, level: str, target: str, report: CompileReport, runner: Runner,
                 source: Program | None = None, memory_limit: int | None = None, donations: list | None = None):
        self.program = program
        self.source = source if source is not None else program
        self.level, self.target = level, target
        self.report = report
        self._runner = runner
        self._on_device = target == "cuda" and level != "O0"    # takes device arrays as they are
        self.input_names = program.own_input_names     # as the model or function named them
        self._checked_bindings: set[tuple] = set()
        types = [v.type for v in program.inputs]
        # Static programs check each argument with two comparisons; errors take the slow path.
        self._static = [(t.dtype, t.shape) for t in types] if all(t.is_static for t in types) else None
        self.memory_limit = memory_limit      # bytes; a call whose planned peak is over it fails before running
        self.donations = donations or []      # outputs that go into donated input arrays (passes/donation.py)
        self._shared = [w for w in program.weights.values() if isinstance(w, np.ndarray)]
        self._check = outputs_to_check(program, runner)     # results that may share memory
        self._lock = nullcontext() if level == "O0" else threading.Lock()
        # Compiled host runners copy inputs that are not writable C-contiguous arrays (a
        # broadcast view, say); those copies count against the machine's memory too.
        self._copies_inputs = level != "O0" and not self._on_device
        self._fit = None if self._on_device else SystemFit(program, level, self._where)
        self._reinferred: dict[tuple, Program] = {}     # dry runs: this program re-inferred, by symbols given
        # set by the compiler: (program, bindings) -> the plan a compile of it with this one's settings makes
        self.replan: Callable[[Program, dict[str, int]], MemoryPlan] | None = None
        self._replanned: dict[tuple, MemoryPlan] = {}   # dry runs compiled anew, by input shapes
        self.donated_in_plan: tuple[str, ...] = ()     # set by the compiler: what plan-memory was told
        # A static call's steps as one generated function (backends/fastcall.py), written after the
        # first call has passed every check; None where the runner cannot write them out.
        self.fast: Callable[[Sequence], tuple | None] | None = None
        self._fast_written = False

    @property
    def _where(self) -> str:
        return f"@{self.program.name} at {self.level}"

    def _nested(self, args: tuple) -> bool:
        """Whether a call gives the traced function's own arguments (nested lists, tuples, dicts)
        rather than the program's inputs one by one."""
        arguments = self.source.arguments
        return arguments is not None and not arguments.takes_flat(args)

    def _bind(self, args: tuple, kwargs: dict) -> tuple[list, list[str]]:
        """The inputs in order from a call by keywords or with the function's own arguments, and
        the names its messages give them (an argument's path, `params[2]['w']`, for the latter)."""
        arguments = self.source.arguments
        own = self.program.by_own_names(kwargs)
        if arguments is None or (set(own) <= set(self.input_names) and arguments.takes_flat(args, len(own))):
            return bind_keywords(self.input_names, args, own, f"@{self.program.name}"), self.input_names
        return arguments.inputs(args, kwargs), arguments.input_paths

    def _fast_inputs(self, args) -> list | None:
        """The arguments as they are, when a static program's earlier call checked all that a call
        with them needs (their types, and that no input is copied); else None."""
        if self._static is None or len(args) != len(self._static) or not self._checked_bindings:
            return None
        copies, on_device = self._copies_inputs, self._on_device
        for a, (dtype, shape) in zip(args, self._static):
            # numba's device arrays as they are on a device target: the runner checks their layout
            if type(a) is not np.ndarray and not (on_device and is_numba_device_array(a)):
                return None
            # dtypes are compared by identity first: numpy's native ones are singletons
            if a.shape != shape or (a.dtype is not dtype and a.dtype != dtype):
                return None
            if copies:
                flags = a.flags
                if not (flags.c_contiguous and flags.writeable):
                    return None
        return list(args)

    def __call__(self, *args, **kwargs) -> tuple[np.ndarray, ...]:
        names = self.input_names
        if kwargs:
            args, names = self._bind(args, kwargs)
        elif self.fast is not None:
            results = self.fast(args)
            if results is not None:
                return results
        arrays = self._fast_inputs(args)
        if arrays is None and not kwargs and self._nested(args):
            args, names = self._bind(args, {})
            arrays = self._fast_inputs(args)
        if arrays is not None:
            if not self._fast_written:
                self._write_fast()
            return self._run(arrays, {})
        arrays, bindings = check_inputs(self.program, args, names)
        if not self._on_device:
            arrays = [to_host(a) for a in arrays]
        key = tuple(sorted(bindings.items()))
        if key not in self._checked_bindings:
            if bindings:
                check_dims_nonnegative(self.program, bindings)
                self.check_memory(bindings)
        if self._fit is not None:
            self._fit.check(bindings, self._input_copies(arrays))
        self._checked_bindings.add(key)
        return self._run(arrays, bindings)

    @contextmanager
    def general_path(self):
        """Every call inside takes the general path through the runner's steps (a profiler times them)."""
        fast, written = self.fast, self._fast_written
        self.fast, self._fast_written = None, True
        try:
            yield
        finally:
            self.fast, self._fast_written = fast, written

    def _write_fast(self) -> None:
        """The fast call, where the program is static, no result may share memory (nothing to check
        per call) and no input is donated."""
        self._fast_written = True
        write = getattr(self._runner, "write_fast", None)
        if write is None or self._static is None or self._check or self.donations or self._on_device:
            return
        self.fast = compile_fast_call(self._static, self._copies_inputs, self._lock, write)

    def _input_copies(self, arrays: list[np.ndarray]) -> int:
        """Bytes the runner copies inputs into."""
        if not self._copies_inputs:
            return 0
        return sum(a.nbytes for a in arrays if not _taken_as_is(a))

    def _run(self, arrays: list[np.ndarray], bindings: dict[str, int]) -> tuple[np.ndarray, ...]:
        with self._lock:
            try:
                results = self._runner(arrays, bindings)
                if type(results) is not list:
                    results = list(results)
            except MemoryError as e:
                raise self._out_of_memory(e, bindings, self._input_copies(arrays)) from e
            except InputError as e:
                raise with_op_lines(e, self.program) from None
            donated = set()
            if self.donations:
                results = hand_back(arrays, results, self.donations)
                donated = {d.output for d in self.donations if results[d.output] is arrays[d.input]}
            if self._check:
                owned_results(results, self._check, [*arrays, *self._shared], donated)
            return tuple(results)

    def _out_of_memory(self, error: MemoryError, bindings: dict[str, int], copies: int = 0) -> OutOfMemoryError:
        """The OutOfMemoryError for an allocation the system refused: the planned peak and the buffer."""
        buffer = getattr(error, "buffer", None)
        why = (f"could not be allocated: the system refused {buffer} ({format_bytes(error.nbytes)})"
               if buffer is not None else f"could not be allocated ({error})")
        oom = out_of_memory(self.plan(self.program, bindings), self._where, why, copies)
        oom.buffer = buffer
        return oom

    def _repr_html_(self) -> str | None:
        return render_html(self)

    def dry_run(self, shapes: dict | None = None) -> MemoryPlan:
        """The memory plan of a call with inputs of these shapes (by input name); nothing is
        run or allocated, so the shapes may be far beyond this machine."""
        from .dryrun import check_shapes
        from .reinfer import concretize

        shapes = self.program.by_own_names(shapes or {})
        check_shapes(self.program, shapes, self.input_names)
        try:
            program, bindings = self.program_for_shapes(shapes)
        except InputError:
            # a size baked into an op (a mean's gradient fills [512, 10]): run the passes anew there
            if self.replan is None:
                raise
            return self._replan(shapes)
        if program is not self.program and self._static is not None:      # a static program stays static
            plan = self.plan(concretize(program, bindings))
            plan.bindings = bindings            # the sizes the dry run put in, for messages and views
            return plan
        return self.plan(program, bindings)

    def plan(self, program: Program, bindings: dict[str, int] | None = None) -> MemoryPlan:
        """The plan this executable's level makes for `program` (itself, re-inferred) with its donations."""
        return plan_for_level(program, self.level, bindings, self.donated_in_plan)

    def _replan(self, shapes: dict) -> MemoryPlan:
        """The plan of a compile at these shapes: the source traced again (or re-inferred), its passes
        run with this executable's settings; no kernel is built."""
        from .dryrun import source_at

        key = tuple(sorted((k, tuple(int(d) for d in v)) for k, v in shapes.items()))
        if key not in self._replanned:
            program, bindings, sizes = source_at(self.source, shapes, self.input_names)
            plan = self.replan(program, bindings)
            plan.bindings = sizes
            self._replanned[key] = plan
        return self._replanned[key]

    def program_for_shapes(self, shapes: dict | None) -> tuple[Program, dict[str, int]]:
        """The compiled program with its types for these input shapes (by name), and the symbol
        values: static dims given other sizes become symbols, re-inferred (runtime/reinfer.py)."""
        from .dryrun import bindings_for_shapes
        from .reinfer import changed_dims, reinfer, symbols_for

        shapes = dict(shapes or {})
        symbols = symbols_for(changed_dims(self.program, shapes, self.input_names))
        key = tuple(sorted(symbols.items()))
        if key not in self._reinferred:
            self._reinferred[key] = reinfer(self.program, symbols, self.input_names) if symbols else self.program
        program = self._reinferred[key]
        return program, bindings_for_shapes(program, shapes, self.input_names)

    def profile(self, *args, repeats: int = 5, warmup: int = 1, **kwargs) -> dict:
        """Times this executable on these arguments, step by step (runtime/profile.py); the record
        goes into `report.profile` too."""
        from .profile import profile

        return profile(self, *args, repeats=repeats, warmup=warmup, **kwargs)

    def check_memory(self, bindings: dict[str, int]) -> None:
        """Raises OutOfMemoryError when a call with these symbol values would need more than memory_limit."""
        if self.memory_limit is not None:
            check_budget(self.plan(self.program, bindings), self.memory_limit, self._where)

    def __repr__(self) -> str:
        return (f"<Executable @{self.program.name} {self.level} on {self.target}: "
                f"inputs ({', '.join(self.input_names)})>")


def with_op_lines(error: InputError, program: Program) -> InputError:
    """A run-time InputError raised by an op's check (`np.take: an index is out of range`) with the
    source lines of the ops of that name appended, since a kernel's check cannot know its op's line."""
    text = str(error)
    name = text.split(":", 1)[0]
    if " from " in text or not name.startswith(("np.", "jit.", "mem.")):
        return error
    lines = sorted({f"{op.loc.file}:{op.loc.line}" for op in program.walk() if op.name == name and op.loc})
    if not lines:
        return error
    shown = ", ".join(lines[:3]) + (f" and {len(lines) - 3} more" if len(lines) > 3 else "")
    return type(error)(f"{text} (from the {name} at {shown})")

"""The Executable: a compiled program plus what runs it, checked at every call."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..ir.program import Program
from ..report import CompileReport, MemoryPlan
from .donation import hand_back
from .signature import bind_keywords, check_dims_nonnegative, check_inputs, device_array_meta, is_numba_device_array

Runner = Callable[[list[np.ndarray], dict[str, int]], Sequence[np.ndarray]]


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
        self.input_names = list(program.input_names)
        self._checked_bindings: set[tuple] = set()
        types = [v.type for v in program.inputs]
        # Static programs check each argument with two comparisons; errors take the slow path.
        self._static = [(t.dtype, t.shape) for t in types] if all(t.is_static for t in types) else None
        self.memory_limit = memory_limit      # bytes; a call whose planned peak is over it fails before running
        self.donations = donations or []      # outputs that go into donated input arrays (runtime/donation.py)

    def _fast_inputs(self, args) -> list[np.ndarray] | None:
        if self._static is None or len(args) != len(self._static):
            return None
        for a, (dtype, shape) in zip(args, self._static):
            if type(a) is not np.ndarray or a.dtype != dtype or a.shape != shape:
                return None
        return list(args)

    def __call__(self, *args, **kwargs) -> tuple[np.ndarray, ...]:
        if kwargs:
            args = bind_keywords(self.input_names, args, kwargs, f"@{self.program.name}")
        arrays = self._fast_inputs(args)
        if arrays is not None:
            return self._results(arrays, self._runner(arrays, {}))
        arrays, bindings = check_inputs(self.program, args, self.input_names)
        if not self._on_device:
            arrays = [to_host(a) for a in arrays]
        if bindings:
            key = tuple(sorted(bindings.items()))
            if key not in self._checked_bindings:
                check_dims_nonnegative(self.program, bindings)
                self.check_memory(bindings)
                self._checked_bindings.add(key)
        return self._results(arrays, self._runner(arrays, bindings))

    def _results(self, arrays: list[np.ndarray], results) -> tuple[np.ndarray, ...]:
        if self.donations:
            results = hand_back(arrays, list(results), self.donations)
        return tuple(results)

    def _repr_html_(self) -> str:
        from ..explore.reprs import executable_html

        return executable_html(self)

    def dry_run(self, shapes: dict | None = None) -> MemoryPlan:
        """The memory plan of a call with inputs of these shapes (by input name); nothing is
        run or allocated, so the shapes may be far beyond this machine."""
        from .dryrun import bindings_for_shapes, plan_for_level

        return plan_for_level(self.program, self.level, bindings_for_shapes(self.program, shapes, self.input_names))

    def check_memory(self, bindings: dict[str, int]) -> None:
        """Raises OutOfMemoryError when a call with these symbol values would need more than memory_limit."""
        if self.memory_limit is not None:
            from .dryrun import check_budget, plan_for_level

            check_budget(plan_for_level(self.program, self.level, bindings), self.memory_limit,
                         f"@{self.program.name} at {self.level}")

    def __repr__(self) -> str:
        return (f"<Executable @{self.program.name} {self.level} on {self.target}: "
                f"inputs ({', '.join(self.input_names)})>")

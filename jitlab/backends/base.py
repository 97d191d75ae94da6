"""The backend interface and registry.

A backend is two things, as in Paddle's custom-device plugins: a runtime (where arrays
live, how they move) and an engine (which ops it can compile, and compiling a
`jit.group` into a callable kernel). The built-in backends implement exactly this
interface, and third-party ones register through the `jitlab.backends` entry points.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ..errors import CompileError, JitlabError
from ..ir.core import Operation

INTERFACE_VERSION = 1


@dataclass
class Kernel:
    """A compiled group: `run(inputs, outputs)` writes the group's results into `outputs`."""

    key: str
    backend: str
    run: Callable[[Sequence[np.ndarray], Sequence[np.ndarray]], None]
    source: str = ""
    compile_seconds: float = 0.0
    cache_hit: bool = False
    miss_reason: str = ""
    choice: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


class Backend:
    """Base of all backends. Subclasses set `name` and override what they support."""

    name: ClassVar[str] = ""
    interface_version: ClassVar[int] = INTERFACE_VERSION
    device: ClassVar[str] = "cpu"
    translate_passes: ClassVar[tuple[str, ...]] = ()
    # True when the executor checks memory_limit against its own device memory; the host
    # plan's check is then skipped (it describes buffers this backend does not allocate).
    checks_memory_limit: ClassVar[bool] = False

    # -- engine hooks -------------------------------------------------------------
    def supports(self, op: Operation) -> str | None:
        """None if this backend can compile `op` inside a group, else the reason it cannot."""
        return f"the {self.name} backend compiles no ops"

    def fusion_kind(self, op: Operation) -> str:
        """How `op` takes part in fusion: elementwise, injective, view, reduction, contraction or opaque."""
        return "opaque"

    def compile_group(self, group: Operation, options: dict[str, Any]) -> Kernel:
        raise CompileError(f"the {self.name} backend cannot compile groups")

    def compile_program(self, program, report, options: dict[str, Any]):
        """O2: a runner for the whole scheduled, statically planned program, or None when
        this backend has none (the program then runs group by group, as at O1)."""
        return None

    # -- runtime hooks ----------------------------------------------------------------
    def allocate(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        return np.empty(shape, dtype)

    def free(self, array: Any) -> None:
        """Arrays are garbage collected; device backends return memory to their pool."""

    def copy_in(self, array: np.ndarray) -> Any:
        return array

    def copy_out(self, array: Any) -> np.ndarray:
        return np.asarray(array)

    def synchronize(self) -> None:
        """Host backends are always synchronous."""

    def executor(self, program, kernels: dict[int, Kernel], report, options: dict[str, Any]) -> Callable | None:
        """A runner for programs compiled for this backend's device; None runs them with the O1 executor."""
        return None


BACKENDS: dict[str, type[Backend]] = {}
_INSTANCES: dict[str, Backend] = {}


def register_backend(cls: type[Backend]) -> type[Backend]:
    """Class decorator for built-in backends; plugins come through entry points."""
    if cls.name in BACKENDS:
        raise ValueError(f"backend {cls.name!r} is registered twice")
    BACKENDS[cls.name] = cls
    return cls


def get_backend(name: str) -> Backend:
    """The backend instance for a target name (created on first use)."""
    if name not in _INSTANCES:
        _load_builtins()
        if name not in BACKENDS:
            raise JitlabError(f"unknown target {name!r}; backends are {', '.join(sorted(BACKENDS))}")
        _INSTANCES[name] = BACKENDS[name]()
    return _INSTANCES[name]


TARGET_BACKENDS = {"cpu": "numba_cpu", "cuda": "numba_cuda"}


def backend_for_target(target: str) -> Backend:
    """The backend that compiles groups for a target ("cpu" is numba_cpu)."""
    return get_backend(TARGET_BACKENDS.get(target, target))


def _load_builtins() -> None:
    from . import numba_cpu, numpy_backend  # noqa: F401  (register themselves)
    from .numba_cuda import backend  # noqa: F401  (registers itself; numba.cuda is imported on first use)

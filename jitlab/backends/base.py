"""The backend interface and registry.

A backend is two things, as in Paddle's custom-device plugins: a runtime (where arrays
live, how they move) and an engine (which ops it can compile, and compiling a
`jit.group` into a callable kernel). The built-in backends implement exactly this
interface, and third-party ones register through the `jitlab.backends` entry points.
"""

from __future__ import annotations

import enum
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, ClassVar

import numpy as np

from ..errors import CompileError, JitlabError, PluginError
from ..ir.core import Operation, OpResult, Value
from ..ir.opdef import Trait
from ..passes.capability import provide_backends
from ..registry import Registry
from ..report import FusionKind, KernelRecord, KernelTiming

INTERFACE_VERSION = 1


class ParamRole(enum.Enum):
    """What the caller passes to a generated function's parameter."""

    INPUT = "input"                 # the group's input `index` (a0, a1, ...)
    OUTPUT = "output"               # the group's output `index` (o0, ...)
    INTERMEDIATE = "intermediate"   # value `index` computed before the loop nest: a contraction's product (m0)
    DIM = "dim"                     # the extent of loop dim `index` (n0, ...)
    ARENA = "arena"                 # O2: the byte arena the plan puts temporaries in
    OFFSETS = "offsets"             # O2: each planned buffer's byte offset in it
    BLAS = "blas"                   # O2: the addresses of numpy's BLAS functions
    VALUE = "value"                 # O2: the array of program value `value`
    HOST = "host"                   # O2: the bytes of output `value`, where the plan lodges temporaries
    SYMBOL = "symbol"               # O2: the size symbol `value`'s binding


@dataclass(frozen=True)
class KernelParam:
    """One parameter of a generated function, as its code generator laid it out."""

    name: str                       # as spelled in the generated source
    role: ParamRole
    dtype: np.dtype                 # an array's element type, or a scalar's type
    ndim: int = 0                   # the rank the function takes an array at
    shape: tuple = ()               # the shape of the value passed (a flat kernel views it 1-D)
    index: int = 0                  # which input, output, intermediate or dim
    value: str = ""                 # the program value or symbol an O2 parameter carries

    @property
    def is_array(self) -> bool:
        return self.role not in (ParamRole.DIM, ParamRole.SYMBOL)


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
    # At each index every input is read before any output is written there, so an output may
    # share a donated input's array even when the group has several results.
    reads_before_writes: bool = False
    timing: KernelTiming | None = None      # where compile_seconds went, where the backend measures it
    # Which compiled code runs it (its kernel cache key): groups differing only in their sizes
    # share one; "" where nothing was generated (a library call alone)
    code: str = ""
    # The generated function's parameters (empty for a library kernel; a group cuda compiles into
    # several functions keeps each one's with its launcher).
    params: tuple[KernelParam, ...] = ()


def kernel_record(kernel: Kernel, group: Operation, choice: str | None = None, worker: bool = False) -> KernelRecord:
    """The report's record of `kernel`, compiled for `group` (the first group it serves)."""
    return KernelRecord(key=group.attrs["key"], backend=kernel.backend, source=kernel.source,
                        compile_seconds=kernel.compile_seconds, cache_hit=kernel.cache_hit,
                        miss_reason=kernel.miss_reason, group=group.attrs["id"],
                        choice=kernel.choice if choice is None else choice,
                        timing=kernel.timing or KernelTiming(), worker=worker, code=kernel.code)


def is_readonly(value: Value) -> bool:
    """Weights and constants (and views of them) reach kernels as read-only arrays."""
    while isinstance(value, OpResult) and value.op.has(Trait.VIEW):
        value = value.op.operands[0]
    return isinstance(value, OpResult) and (value.op.name == "np.weight" or value.op.has(Trait.CONSTANT))


class Backend:
    """Base of all backends. Subclasses set `name` and override what they support."""

    name: ClassVar[str] = ""
    interface_version: ClassVar[int] = INTERFACE_VERSION
    device: ClassVar[str] = "cpu"
    # The engine passes: they claim ops into jit.groups of an engine, in place of the
    # level's marking stage (`jl.compile(engine_passes=...)` or JITLAB_ENGINE_PASSES override them).
    translate_passes: ClassVar[tuple[str, ...]] = ("mark-subgraphs", "fuse")
    # Passes this backend needs after memory planning (e.g. assign-streams on cuda).
    late_passes: ClassVar[tuple[str, ...]] = ()
    # True when the executor checks memory_limit against its own device memory; the host
    # plan's check is then skipped (it describes buffers this backend does not allocate).
    checks_memory_limit: ClassVar[bool] = False
    # True when a contraction group may read an operand through a 2-D transpose inside it
    # (BLAS takes the stored matrix with a transpose flag): fusion then folds such transposes.
    folds_operand_transposes: ClassVar[bool] = False
    # True when compiled programs run on the host runners, which write an output straight into
    # a donated input's array where that is safe (passes/donation.py); fusion then keeps the
    # updates of donated inputs out of contraction epilogues, where they could not be. A backend
    # that says so and runs programs itself returns runtime.executable.InPlaceRunner runners.
    donates_in_place: ClassVar[bool] = True
    # The jl.compile options this backend reads beyond those every target takes (an unknown
    # option is an error, so a misspelt one is never ignored).
    options: ClassVar[tuple[str, ...]] = ()

    # -- engine hooks -------------------------------------------------------------
    def supports(self, op: Operation) -> str | None:
        """None if this backend can compile `op` inside a group, else the reason it cannot."""
        return f"the {self.name} backend compiles no ops"

    def fusion_kind(self, op: Operation) -> FusionKind:
        """How `op` takes part in fusion (a FusionKind, or its value as a string)."""
        return FusionKind.OPAQUE

    def compile_group(self, group: Operation, options: dict[str, Any]) -> Kernel:
        raise CompileError(f"the {self.name} backend cannot compile groups")

    def prepare(self, program, level: str, options: dict[str, Any]) -> None:
        """Called before the passes run on `program` for `level` (the executable cache did not have
        their result): may start work its compile will need, in the background."""

    def warm(self, cache, show: bool = True) -> list[str]:
        """Compiles ahead what this backend's first kernels would otherwise compile with them (its
        own helper functions, into the caches later processes read): `jitlab cache warm`. Returns
        what it did, one line each."""
        return []

    def prepare_kernels(self, groups: list[Operation], options: dict[str, Any]) -> list[Operation]:
        """Called before these groups are compiled (O1's, or those O2 calls between its segments; not
        when the executable cache gives their kernels): may start work they need in the background;
        returns them in the order to compile."""
        return groups

    def kernel_variant(self, group: Operation) -> str:
        """What besides its key keeps a group from sharing another group's kernel: which operands
        arrive read-only (a kernel compiled for a writable array does not take a read-only one)."""
        return "".join("r" if is_readonly(v) else "w" for v in group.operands)

    def sharing_key(self, group: Operation) -> str:
        """Groups with equal sharing keys run one Kernel: their keys and variants agree."""
        return group.attrs["key"] + self.kernel_variant(group)

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

    def peak_bandwidth(self) -> float | None:
        """Bytes per second this backend's device memory streams at its peak, for the bench's lower
        bounds; None where the bench measures it itself (the host) or nothing is known."""
        return None

    def measured_bounds(self) -> dict[str, Any] | None:
        """This backend's device measured for the roofline (runtime/bounds.py): {"device", "bandwidth"
        (copy, bytes/s), "flops" (FLOP/s, None: unknown), "how"}; None: the host's bounds apply."""
        return None

    def compile_loop(self, op: Operation, bodies: list, host: Callable, options: dict[str, Any],
                     nested: dict) -> tuple[Any, str]:
        """A control-flow op run as one native function (called with its operands, giving its results)
        from its compiled region programs `bodies`; or None and why it runs from the host. The loop is
        written, not compiled: its `build()` compiles it and says why it cannot run ('' when it can),
        and a loop inside another native loop is never built on its own. `host(region, values)` runs a
        region from the host, for the errors a native loop leaves to it; `nested` holds the native loops
        this backend wrote for the bodies' own loops, by op uid."""
        return None, f"the {self.name} backend runs loops from the host"

    def executor(self, program, kernels: dict[int, Kernel], report, options: dict[str, Any]) -> Callable | None:
        """A runner for programs compiled for this backend's device; None runs them with the O1 executor."""
        return None


BACKENDS: Registry[str, type[Backend]] = Registry("backend")
_INSTANCES: dict[str, Backend] = {}
ENTRY_POINT_GROUP = "jitlab.backends"
# Hooks a plugin must define itself: the base class's versions compile nothing.
ENGINE_HOOKS = ("supports", "fusion_kind", "compile_group")
RUNTIME_HOOKS = ("allocate", "free", "copy_in", "copy_out", "synchronize")
# The base class's runtime hooks keep arrays in host memory; a backend for another device
# must define these itself (free may stay: device arrays can be garbage collected too).
DEVICE_HOOKS = ("allocate", "copy_in", "copy_out", "synchronize")


class PluginWarning(UserWarning):
    """A backend plugin found at discovery could not be loaded; selecting it raises its PluginError."""


@dataclass
class _Plugins:
    """What entry-point discovery found: loaded plugin classes by target name, and the broken ones."""

    loaded: dict[str, str] = field(default_factory=dict)     # name -> "module:Class (dist)"
    broken: dict[str, PluginError] = field(default_factory=dict)
    done: bool = False


PLUGINS = _Plugins()


def register_backend(cls: type[Backend]) -> type[Backend]:
    """Class decorator for built-in backends (and backends defined in a session); plugins come
    through entry points and are checked by the same `validate_backend`."""
    problem = validate_backend(cls, cls.name if isinstance(cls, type) else "")
    if problem:
        raise PluginError(f"backend {getattr(cls, 'name', cls)!r} cannot be registered: {problem}")
    return BACKENDS.add(cls.name, cls)


def validate_backend(cls: Any, name: str, plugin: bool = False) -> str | None:
    """Why `cls` is not a usable backend class for target `name`, or None when it is."""
    if not (isinstance(cls, type) and issubclass(cls, Backend)):
        return f"{cls!r} is not a subclass of jitlab.backends.Backend"
    if cls.name != name or not name:
        return f"its class {cls.__name__} declares name {cls.name!r}, expected {name!r}"
    if cls.interface_version != INTERFACE_VERSION:
        return (f"it was built for backend interface version {cls.interface_version!r}, "
                f"this jitlab provides version {INTERFACE_VERSION}")
    required = (ENGINE_HOOKS if plugin else ()) + (DEVICE_HOOKS if cls.device != "cpu" else ())
    missing = [h for h in required if getattr(cls, h, None) is getattr(Backend, h)]
    missing += [h for h in ENGINE_HOOKS + RUNTIME_HOOKS if not callable(getattr(cls, h, None))]
    if missing:
        return f"it does not define the hook(s) {', '.join(dict.fromkeys(missing))}"
    return None


def get_backend(name: str) -> Backend:
    """The backend instance for a target name (created on first use)."""
    if name not in _INSTANCES:
        _load_builtins()
        if name in PLUGINS.broken and name not in BACKENDS:     # a clash never hides a built-in
            raise PLUGINS.broken[name]
        _INSTANCES[name] = _instantiate(name, BACKENDS.lookup(name, known=available_targets(), what="target"))
    return _INSTANCES[name]


def _instantiate(name: str, cls: type[Backend]) -> Backend:
    if name not in PLUGINS.loaded:
        return cls()
    try:
        return cls()
    except Exception as exc:  # a plugin's own bug must not escape as a crash of jitlab
        raise PluginError(f"backend plugin {name!r} ({PLUGINS.loaded[name]}) raised while starting: "
                          f"{type(exc).__name__}: {exc}") from exc


TARGET_BACKENDS = {"cpu": "numba_cpu", "cuda": "numba_cuda"}


def backend_for_target(target: str) -> Backend:
    """The backend that compiles groups for a target ("cpu" is numba_cpu)."""
    return get_backend(TARGET_BACKENDS.get(target, target))


provide_backends(backend_for_target)


def available_targets() -> list[str]:
    """Every name `jl.compile(target=...)` accepts: auto, the device aliases and each backend."""
    _load_builtins()
    return ["auto", *TARGET_BACKENDS, *sorted(BACKENDS)]


def resolve_target(target: str) -> str:
    """"auto" is cuda when a GPU (or numba's CUDA simulator) is there, else cpu; "cuda" must be
    there; any other name must be a registered backend (built in or a plugin)."""
    from .numba_cuda import device

    if target == "auto":
        return "cuda" if device.available() else "cpu"
    if not isinstance(target, str):
        raise JitlabError(f"a target is a name, got {type(target).__name__}; targets are "
                          f"{', '.join(available_targets())}")
    backend_for_target(target)          # unknown or broken targets fail here, naming the plugin
    if target == "cuda":
        device.require()
    return target


def _load_builtins() -> None:
    from . import numba_cpu, numpy_backend  # noqa: F401  (register themselves)
    from .numba_cuda import backend  # noqa: F401  (registers itself; numba.cuda is imported on first use)

    if not PLUGINS.done:
        load_plugins()


def load_plugins() -> dict[str, PluginError]:
    """(Re)discovers the `jitlab.backends` entry points; each broken one is a warning now and
    its PluginError when selected. Returns the broken ones by name."""
    for name in PLUGINS.loaded:
        BACKENDS.pop(name, None)
        _INSTANCES.pop(name, None)
    PLUGINS.loaded.clear()
    PLUGINS.broken.clear()
    PLUGINS.done = True
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            BACKENDS.add(ep.name, _load_entry_point(ep))
            PLUGINS.loaded[ep.name] = _describe(ep)
        except PluginError as error:
            PLUGINS.broken[ep.name] = error
            warnings.warn(str(error), PluginWarning, stacklevel=2)
    return dict(PLUGINS.broken)


def _load_entry_point(ep: metadata.EntryPoint) -> type[Backend]:
    where = f"backend plugin {ep.name!r} ({_describe(ep)})"
    if ep.name in BACKENDS:
        raise PluginError(f"{where} is ignored: the name {ep.name!r} is already a backend")
    try:
        cls = ep.load()
    except Exception as exc:  # any import-time failure of third-party code
        raise PluginError(f"{where} raised while loading: {type(exc).__name__}: {exc}") from exc
    problem = validate_backend(cls, ep.name, plugin=True)
    if problem:
        raise PluginError(f"{where} cannot be used: {problem}")
    return cls


def _describe(ep: metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return f"entry point {ep.group}:{ep.name} = {ep.value}" + (f" from {dist.name}" if dist else "")

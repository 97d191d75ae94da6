"""Kernels as native shared libraries, called without numba.

numba compiles a generated kernel once; numba_cpu/native_build.py links its machine code with a
small C runtime into a shared library with one C entry, `jitlab_entry(void **arrays, int64 *ints)`.
This module loads such libraries (dlopen) and calls them through a small C extension
(native_call.c, built once per machine by native_caller.py; cffi's C backend where it cannot be),
so a process whose kernels all come from disk never imports numba: importing it and readying its
typing and target contexts cost about half a second, more than a whole warm start may take.

A kernel's parallel loop is split by the caller: the entry's last two ints are (part, parts),
and each part runs on its own thread with the GIL released (both callers release it).

Nothing is loaded from a folder or file another user could have written (a library is code).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import math
import os
import platform
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import _cffi_backend
import numpy as np

from ..errors import JitlabError
from ..ir.shapes import evaluate_shape
from .cache_files import read_checked, warn_damaged, why_damaged
from .kernel_cache import NATIVE_FOLDER, why_untrusted, why_untrusted_folder
from .loopnest import PARALLEL_THRESHOLD
from .native_caller import caller

ENTRY = "jitlab_entry"
FORMAT = 1                # the entry's calling convention; a library of another format is rebuilt

_FFI = _cffi_backend.FFI()
_ENTRY_TYPE = _FFI.typeof("void(*)(void *[], int64_t[])")
_POINTERS = _FFI.typeof("void *[]")
_INTS = _FFI.typeof("int64_t[]")
_new, _from_buffer = _FFI.new, _FFI.from_buffer


@functools.cache
def host_cpu() -> str:
    """The processor's model and feature flags, hashed: numba compiles for the host CPU, and a
    library built on another one (a cache folder on a shared disk) could hold instructions this
    one lacks."""
    try:
        with open("/proc/cpuinfo") as f:
            lines = [ln for ln in f.read().splitlines() if ln.startswith(("model name", "flags", "Features"))]
        text = "\n".join(sorted(set(lines)))
    except OSError:
        text = f"{platform.machine()} {platform.processor()}"
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def library_path(folder: str, code: str) -> str:
    """Where the library of kernel code `code` lives in the kernel cache's folder."""
    return os.path.join(folder, NATIVE_FOLDER, f"{code}-{host_cpu()}.so")


# A split loop is cut into this many parts per thread, which the threads take as they come free
# (native_call.c), so that a thread that starts late costs little.
CHUNKS_PER_THREAD = 4


@functools.cache
def threads() -> int:
    """How many parts a parallel kernel is split into: numba's NUMBA_NUM_THREADS when set, else
    the cores this process may run on."""
    given = os.environ.get("NUMBA_NUM_THREADS", "").strip()
    if given.isdigit() and int(given) > 0:
        return int(given)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


@functools.cache
def pool() -> ThreadPoolExecutor:
    """The threads that run a split kernel's other parts through cffi (one fewer than `threads()`;
    the C caller has threads of its own)."""
    return ThreadPoolExecutor(max_workers=max(1, threads() - 1), thread_name_prefix="jitlab-kernel")


# A forked child (compile workers, a user's multiprocessing) has none of the parent's threads: it
# makes its own pool rather than wait on the parent's.
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=pool.cache_clear)


@dataclass
class NativeLibrary:
    """An entry of a shared library and the arrays it takes, loaded on first call."""

    path: str
    dtypes: tuple[str, ...]         # each array parameter's element type, in order
    ndims: tuple[int, ...]
    scalars: int                    # int64 parameters after the arrays (loop extents, size symbols)
    chunked: bool                   # the entry's last two ints split its parallel loop (part, parts)
    entry: str = ENTRY              # the entry's symbol: a library may have several (O2's segments)
    _fn: object = field(default=None, repr=False, compare=False)
    _handle: object = field(default=None, repr=False, compare=False)
    _kinds: tuple = field(default=(), repr=False, compare=False)      # (np.dtype, ndim) per array
    _address: int = field(default=0, repr=False, compare=False)
    _call: object = field(default=None, repr=False, compare=False)     # native_call.c's call, if it was built
    _code: bytes = field(default=b"", repr=False, compare=False)       # (type number, ndim) per array, for it

    def __post_init__(self) -> None:
        # dtype objects compare in ~0.1 us; dtype.name builds a string in ~2 us a call
        self._kinds = tuple((np.dtype(d), n) for d, n in zip(self.dtypes, self.ndims))
        self._code = bytes(x for dtype, n in self._kinds for x in (dtype.num, n))

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _fn=None, _handle=None, _address=0, _call=None)
        self.__post_init__()

    @classmethod
    def read(cls, so_path: str) -> list[NativeLibrary] | None:
        """The entries of the library at `so_path`, from its manifest beside it; None when there is
        none, of another format, or damaged (with a warning)."""
        m = read_manifest(so_path)
        if m is None or m.get("format") != FORMAT or not os.path.exists(so_path):
            return None
        try:
            return [cls(so_path, tuple(e["dtypes"]), tuple(e["ndims"]), e["scalars"], e["chunked"], e["entry"])
                    for e in m["entries"]]
        except (KeyError, TypeError):
            return None

    def manifest(self) -> dict:
        """What `read` needs of this entry."""
        return {"entry": self.entry, "dtypes": list(self.dtypes), "ndims": list(self.ndims), "scalars": self.scalars,
                "chunked": self.chunked}

    def load(self):
        """The entry, loaded now (dlopen) if it was not: a damaged or foreign file is a CacheError."""
        if self._fn is None:
            reason = why_untrusted_folder(os.path.dirname(self.path)) or why_untrusted(self.path)
            if reason is not None:
                raise NativeLoadError(f"not loading the native kernel {self.path}: {reason}")
            damaged = why_damaged(self.path)
            if damaged is not None:
                raise NativeLoadError(f"the native kernel {self.path} is damaged ({damaged})", damaged)
            try:
                handle = ctypes.CDLL(self.path, mode=os.RTLD_LOCAL)
                address = ctypes.cast(getattr(handle, self.entry), ctypes.c_void_p).value
            except (OSError, AttributeError) as e:
                raise NativeLoadError(f"cannot load the native kernel {self.path}: {e}") from None
            module = caller()
            self._call = module.call if module is not None else None
            self._handle, self._fn, self._address = handle, _FFI.cast(_ENTRY_TYPE, address), address
        return self._fn

    def call(self, arrays: list[np.ndarray], scalars: tuple[int, ...], parallel: bool, parts: int = 0) -> None:
        """Runs the kernel on `arrays` (C-contiguous, of the dtypes it was built for) and the int
        scalars (loop extents); split across threads when `parallel` and the kernel can be split,
        into `parts` parts, or CHUNKS_PER_THREAD per thread when 0."""
        if self._fn is None:
            self.load()
        workers, parts = self.split(parallel, parts)
        if self._call is not None:
            self._call(self._address, arrays, scalars, self._code, parts, workers)
            return
        if workers < 2 or parts < 2:
            for part in range(max(parts, 1)):
                self._call_cffi(arrays, scalars, part, parts)
            return
        futures = [pool().submit(self._call_cffi, arrays, scalars, k, parts) for k in range(1, parts)]
        self._call_cffi(arrays, scalars, 0, parts)
        for f in futures:
            f.result()

    def split(self, parallel: bool, parts: int = 0) -> tuple[int, int]:
        """(threads, parts) of a call: parts 0 where the entry is not split."""
        if not self.chunked:
            return 1, 0
        workers = threads() if parallel else 1
        return workers, parts or (workers * CHUNKS_PER_THREAD if workers > 1 else 1)

    def _call_cffi(self, arrays: list[np.ndarray], scalars: tuple[int, ...], part: int, parts: int) -> None:
        """Part `part` of native_call.c's call through cffi, where that caller could not be built."""
        if len(arrays) != len(self._kinds):
            raise JitlabError(f"native kernel {os.path.basename(self.path)}: {len(arrays)} arrays passed, "
                              f"{len(self._kinds)} expected (a jitlab bug)")
        ints: list[int] = []
        for k, (a, (dtype, ndim)) in enumerate(zip(arrays, self._kinds)):
            if (a.dtype is not dtype and a.dtype != dtype) or a.ndim != ndim:
                raise JitlabError(f"native kernel {os.path.basename(self.path)}: argument {k} is a {a.dtype} "
                                  f"{a.ndim}-d array where it was built for {dtype} {ndim}-d (a jitlab bug)")
            ints += a.shape
        ints += scalars
        if parts:
            ints += (part, parts)
        # from_buffer refuses an array that is not C-contiguous: the kernel indexes it as one
        self._fn(_new(_POINTERS, [_from_buffer(a) for a in arrays]), _new(_INTS, ints))


class NativeLoadError(JitlabError):
    """A native kernel library that cannot be loaded."""

    def __init__(self, message: str, damaged: str = ""):
        super().__init__(message)
        self.damaged = damaged          # why the file is damaged: a warning, and the library is built again


def read_manifest(so_path: str) -> dict | None:
    """The manifest beside the library at `so_path` (a checked file, cache_files.py); None when
    there is none or it is damaged (with a warning: the library is built again)."""
    path = so_path[:-3] + ".json"
    try:
        manifest = json.loads(read_checked(path))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:       # DamagedFile, or JSON that is not
        warn_damaged(path, str(e))
        return None
    return manifest if isinstance(manifest, dict) else None


@dataclass
class CallLayout:
    """How a generated kernel's arguments come from a group's inputs, outputs and intermediates,
    and the extents of its loops."""

    slots: tuple[tuple[int, int], ...]   # per array parameter: (0 inputs | 1 outputs | 2 intermediates, index)
    plain: bool                          # every input then every output: no per-argument lookup
    flat: bool                           # the loop runs over 1-D views of every array
    reshape: bool                        # some argument is not 1-D already and must be viewed so
    space: tuple                         # the loop extents, ints and size symbols
    static_space: tuple[int, ...] | None
    # the static extents with the last two dims as one (a conv epilogue over H*W pixels), or None
    merged: tuple[int, ...] | None = None

    @functools.cached_property
    def static_size(self) -> int | None:
        return math.prod(self.static_space) if self.static_space is not None else None

    def arguments(self, inputs, outputs, bindings: dict[str, int] | None, extra: Sequence[np.ndarray]
                  ) -> tuple[list, tuple, int]:
        """The arrays to pass, the loop extents and the number of iterations."""
        if self.plain:
            args = [*inputs, *outputs]
        else:
            sources = (inputs, outputs, extra)
            args = [sources[kind][i] for kind, i in self.slots]
        if self.flat:
            # The outputs have the full size; an input broadcast whole has size 1 even when the
            # output is empty (a size-0 broadcast), so the inputs cannot give the loop's length.
            size = outputs[0].size
            if self.reshape:
                args = [a.reshape(-1) for a in args]
            return args, (size,), size
        if self.merged is not None:
            # arrays the kernel does not index (a conv's input and filter) may merge or not alike
            tail = self.static_space[-2:]
            # the merged length spelled out: an empty array cannot infer a -1
            args = [a.reshape(a.shape[:-2] + (1, tail[0] * tail[1])) if a.shape[-2:] == tail else a for a in args]
            return args, self.merged, math.prod(self.merged)
        if self.static_space is not None:
            return args, self.static_space, self.static_size
        dims = evaluate_shape(self.space, bindings or {})
        return args, dims, math.prod(dims)


@dataclass
class NativeKernel:
    """A generated kernel's native library, called as the numba kernel it was built from (a
    Kernel's `run`); it pickles, so a warm start can take it from the executable cache."""

    layout: CallLayout
    library: NativeLibrary

    portable = True             # runs without numba: the executable cache may keep it

    def load(self) -> None:
        """Loads the library now: a missing or damaged one raises NativeLoadError here, not at a call."""
        self.library.load()

    def __call__(self, inputs, outputs, bindings: dict[str, int] | None = None, extra: Sequence[np.ndarray] = ()
                 ) -> None:
        args, dims, size = self.layout.arguments(inputs, outputs, bindings, extra)
        self.library.call(args, tuple(dims), size >= PARALLEL_THRESHOLD)

    def write_fast(self, w, inputs: list[str], outputs: list[str], in_shapes: list[tuple], out_shapes: list[tuple]
                   ) -> bool:
        """This call with static shapes written into `w` (backends/fastcall.py) as
        `arguments` and `call` would make it: one call of the C caller; False through cffi."""
        layout, library = self.layout, self.library
        library.load()
        if library._call is None or (not layout.plain and any(kind == 2 for kind, _ in layout.slots)):
            return False
        names, shapes = [*inputs, *outputs], [*in_shapes, *out_shapes]
        if not layout.plain:
            order = [k if kind == 0 else len(inputs) + k for kind, k in layout.slots]
            names, shapes = [names[k] for k in order], [shapes[k] for k in order]
        if layout.flat:
            dims = (math.prod(out_shapes[0]),)
            if layout.reshape:
                names = [n if len(s) == 1 else f"{n}.reshape(-1)" for n, s in zip(names, shapes)]
        elif layout.merged is not None:
            tail = tuple(layout.static_space[-2:])
            names = [f"{n}.reshape({tuple(s[:-2]) + (1, tail[0] * tail[1])!r})" if tuple(s[-2:]) == tail else n
                     for n, s in zip(names, shapes)]
            dims = layout.merged
        elif layout.static_space is not None:
            dims = layout.static_space
        else:
            return False
        workers, parts = library.split(math.prod(dims) >= PARALLEL_THRESHOLD)
        w.line(f"{w.ref(library._call, 'call')}({library._address}, [{', '.join(names)}], "
               f"{tuple(int(d) for d in dims)!r}, {w.ref(library._code, 'code')}, {parts}, {workers})")
        return True


@dataclass
class NativeSegment:
    """A native entry called with a generated function's positional arguments: its arrays and its
    int64 scalars, told apart by `arrays` (O2's segments)."""

    library: NativeLibrary
    arrays: tuple[bool, ...]          # per parameter: whether it is an array

    portable = True

    def load(self) -> None:
        self.library.load()

    def __post_init__(self) -> None:
        self._only_arrays = all(self.arrays)

    def __getstate__(self) -> dict:
        return {"library": self.library, "arrays": self.arrays}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.__post_init__()

    def write_fast(self, w, args: list[str]) -> bool:
        """This call written into `w` (backends/fastcall.py) as one call of the C caller; False through cffi."""
        library = self.library
        library.load()
        if library._call is None:
            return False
        arrays = [a for a, is_array in zip(args, self.arrays) if is_array]
        scalars = "".join(f"{a}, " for a, is_array in zip(args, self.arrays) if not is_array)
        w.line(f"{w.ref(library._call, 'call')}({library._address}, [{', '.join(arrays)}], ({scalars}), "
               f"{w.ref(library._code, 'code')}, {1 if library.chunked else 0}, 1)")
        return True

    def __call__(self, *args) -> None:
        if self._only_arrays:
            self.library.call(list(args), (), False)
            return
        self.library.call([a for a, is_array in zip(args, self.arrays) if is_array],
                          tuple([a for a, is_array in zip(args, self.arrays) if not is_array]), False)

"""The executable cache: a program after its pipeline, with its report, on disk.

A new process compiling a program it compiled before (same structure, level, target,
pipeline, options, and the same jitlab, numba, numpy and Python) reads the post-pass
program and its report (memory plan, schedule, groups with their kernel keys) from here
instead of running the passes; lowering then finds the kernels in the kernel cache.

An entry is one file: a header line (the key parts, sizes and checksums of what follows)
and two pickles, the part a call needs and the report's pass records and graph, which
only the explorer reads and which are unpickled on first access. Weights are not stored:
the entry names the source program's weights, which the loaded program takes again. A
weight a pass computed (folded) is stored, and the entry then keeps a digest of the
source's weights, compared on every load.

Safety, as the kernel cache (backends/kernel_cache.py, whose checks this uses): entries are
written atomically; a corrupt, truncated or foreign entry is ignored with a CacheWarning
and replaced; nothing is unpickled from a folder or file another user could have written.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import hashlib
import json
import mmap
import os
import pickle
import re
import sys
import time
import warnings
import zlib
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np

from ..backends.cache_files import write_atomic
from ..backends.kernel_cache import KernelCache, default_cache, why_untrusted, why_untrusted_folder
from ..errors import CacheWarning
from ..report import CompileReport, ExecutableCacheRecord

ENV_VAR = "JITLAB_EXECUTABLE_CACHE"      # "0" turns the cache off for the process
MAGIC = b"jitlab executable 2\n"
ALIGN = 64                                # where each array's bytes start in an entry
FOLDER = "executables"
LAZY_FIELDS = ("passes", "graph")        # report fields only the explorer reads, unpickled on first access
UNKEYED_OPTIONS = ("cache", "progress")  # options that do not change what the passes produce
# IPython runs a notebook cell as <tmp>/ipykernel_<pid>/<hash of the cell's code>.py: the folder
# changes with every kernel, the file name only with the code.
CELL_FOLDER = re.compile(r"(?<=[/\\])ipykernel_\d+(?=[/\\])")


def enabled(options: dict) -> bool:
    """Whether this compile may use the cache: the option, else the environment variable."""
    flag = options.get("executable_cache")
    if flag is None:
        return os.environ.get(ENV_VAR, "1").strip().lower() not in ("0", "false", "no", "off")
    return bool(flag)


@functools.cache
def versions() -> str:
    """The libraries an entry depends on, jitlab's own source included (an edited pass must not
    find the programs an older one produced)."""
    import importlib.metadata

    from ..version import __version__

    try:
        numba = importlib.metadata.version("numba")
    except importlib.metadata.PackageNotFoundError:
        numba = "none"
    return (f"jitlab {__version__} ({_source_hash()}), numba {numba}, numpy {np.__version__}, "
            f"python {sys.version.split()[0]}")


def _source_hash() -> str:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    digest = hashlib.sha256()
    for folder, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        for name in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(folder, name)
            digest.update(os.path.relpath(path, root).encode())
            with open(path, "rb") as f:
                digest.update(f.read())
    return digest.hexdigest()[:16]


def key_parts(program, level: str, target: str, pipeline: str, options: dict) -> dict[str, str]:
    """The named parts of an entry's key; a miss on disk says which differ."""
    from ..ir.printer import print_program

    keyed = {k: v for k, v in sorted(options.items()) if k not in UNKEYED_OPTIONS}
    # Locations are keyed (the cached program shows them) but not a notebook kernel's process
    # id, so a notebook's warm start hits in a new kernel; load() moves them into this one's folder.
    text = CELL_FOLDER.sub("ipykernel", print_program(program, locs=True))
    return {"structure": hashlib.sha256(text.encode()).hexdigest()[:24],
            "level": level, "target": target, "pipeline": pipeline, "options": repr(keyed),
            "versions": versions(), "extensions": extensions_hash(target)}


def extensions_hash(target: str) -> str:
    """A hash of the code outside jitlab that can change what the passes produce: passes
    registered by the user or a plugin, and the target's backend when a plugin gives it (an
    edited pass must not find what the old one made)."""
    from ..backends.base import backend_for_target
    from ..passes.manager import PASSES

    backend = type(backend_for_target(target))       # first: loading the backends registers plugins' passes
    classes = [cls for cls in PASSES.values() if not cls.__module__.startswith("jitlab.")]
    classes += [backend] if not backend.__module__.startswith("jitlab.") else []
    digest = hashlib.sha256()
    for cls in sorted(classes, key=lambda c: (c.__module__, c.__qualname__)):
        digest.update(f"{cls.__module__}.{cls.__qualname__}:{_code_of(cls)}".encode())
    return digest.hexdigest()[:16]


def _code_of(cls) -> str:
    """The text of the module defining `cls`, else of the class; its id when neither can be read
    (an entry then serves this process only)."""
    import inspect

    try:
        return inspect.getsource(sys.modules[cls.__module__])
    except (OSError, TypeError, KeyError):
        try:
            return inspect.getsource(cls)
        except (OSError, TypeError):
            return f"id {id(cls)}"


@dataclasses.dataclass
class Entry:
    """Where an entry lives, and the key it is for."""

    path: str
    parts: dict[str, str]
    trusted: bool
    key_seconds: float = 0.0      # hashing the program and finding the folder


def entry_for(program, level: str, target: str, pipeline: str, options: dict) -> Entry:
    """The entry for this compile (key_parts, then locate), timed."""
    start = time.perf_counter()
    entry = locate(key_parts(program, level, target, pipeline, options), options)
    entry.key_seconds = time.perf_counter() - start
    return entry


def locate(parts: dict[str, str], options: dict) -> Entry:
    """The entry's path in the kernel cache's folder (the one `options["cache"]` or
    $JITLAB_CACHE_DIR names), and whether files there may be unpickled."""
    cache: KernelCache = options.get("cache") or default_cache()
    folder = os.path.join(cache.directory, FOLDER)
    key = KernelCache.full_key(parts)
    path = os.path.join(folder, f"{key}.pkl")
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        reason = why_untrusted_folder(folder) or why_untrusted(path)
    except OSError as e:
        reason = str(e)
    if reason is not None:
        warnings.warn(f"jitlab: not using the executable cache at {folder}: {reason} (its entries are "
                      "pickles); compiling without it", CacheWarning, stacklevel=4)
    return Entry(path, parts, reason is None)


def load(entry: Entry, source) -> tuple | None:
    """The cached (program, report) for `source`, or None on a miss (with a warning when an
    entry was there but could not be used)."""
    if not entry.trusted:
        return None
    start = time.perf_counter()
    try:
        data = _mapped(entry.path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        return _unusable(entry, f"unreadable ({e})")
    try:
        header, core, lazy, buffers = _split(data)
    except ValueError as e:
        return _unusable(entry, f"corrupt ({e})")
    if header["parts"] != entry.parts:
        differ = sorted(k for k in entry.parts.keys() | header["parts"].keys()
                        if entry.parts.get(k) != header["parts"].get(k))
        return _unusable(entry, f"foreign (its {', '.join(differ)} differ)")
    if header["weights"] is not None and header["weights"] != weights_digest(source.weights):
        return None           # the folded weights were computed from other weight values
    try:
        with _gc_paused():
            stored = pickle.loads(core, buffers=buffers)
        program = _with_weights(stored["program"], stored["weights"], source)
        _into_this_kernel(program, source)
    except Exception as e:  # a damaged pickle can raise almost any exception type
        return _unusable(entry, f"corrupt ({type(e).__name__}: {e})")
    report = _lazy_report(stored["report"], lazy)
    report.executable_cache = ExecutableCacheRecord(hit=True, path=entry.path, key_seconds=entry.key_seconds,
                                                    load_seconds=time.perf_counter() - start)
    return program, report


def store(entry: Entry, program, report: CompileReport, source) -> ExecutableCacheRecord:
    """Writes the post-pass program and its report (before lowering adds to it); returns the
    report's record of the miss."""
    if not entry.trusted:
        return ExecutableCacheRecord(hit=False, path=entry.path, reason="the folder is not private")
    own = {name: None if source.weights.get(name) is w else w for name, w in program.weights.items()}
    folded = any(w is not None for w in own.values())
    light = dataclasses.replace(report, **{f: _EMPTY[f]() for f in LAZY_FIELDS})
    kept, program.weights = program.weights, {}
    buffers: list[pickle.PickleBuffer] = []
    try:
        core = pickle.dumps({"program": program, "weights": own, "report": light}, protocol=5,
                            buffer_callback=buffers.append)
    finally:
        program.weights = kept
    lazy = pickle.dumps({f: getattr(report, f) for f in LAZY_FIELDS}, protocol=5)
    raws = [b.raw() for b in buffers]
    # each array's bytes start at a multiple of ALIGN from the page-aligned mapping (`_mapped`)
    body, places = bytearray(core + lazy), []
    for raw in raws:
        body += bytes(-len(body) % ALIGN)       # the header is padded to a multiple of ALIGN too
        places.append([len(body), raw.nbytes])
        body += raw
    header = {"parts": entry.parts, "weights": weights_digest(source.weights) if folded else None,
              "sizes": [len(core), len(lazy)], "buffers": places,
              "crc": [zlib.crc32(core), zlib.crc32(lazy), *(zlib.crc32(raw) for raw in raws)]}
    text = json.dumps(header, sort_keys=True).encode()
    text += b" " * (-(len(MAGIC) + len(text) + 1) % ALIGN) + b"\n"
    try:
        write_atomic(entry.path, MAGIC + text + bytes(body))
    except OSError as e:
        warnings.warn(f"jitlab: could not write the executable cache entry {entry.path}: {e}", CacheWarning,
                      stacklevel=3)
        return ExecutableCacheRecord(hit=False, path=entry.path, reason=str(e))
    return ExecutableCacheRecord(hit=False, path=entry.path, stored=True, key_seconds=entry.key_seconds)


_EMPTY = {"passes": list, "graph": lambda: None}

KERNELS = ".kernels"                      # beside an entry: its lowered kernels, when they keep
KERNELS_MAGIC = b"jitlab kernels 1\n"


@dataclasses.dataclass
class KeptKernels:
    """O1's lowered kernels by sharing key, as the executable cache keeps them."""

    kernels: dict

    @property
    def portable(self) -> bool:
        return bool(self.kernels) and all(getattr(k.run, "portable", False) for k in self.kernels.values())

    def load(self) -> None:
        for kernel in self.kernels.values():
            kernel.run.load()


def store_kernels(record: ExecutableCacheRecord | None, kept) -> bool:
    """Writes what lowering made of an entry (KeptKernels, or a backend's kept O2 runner) beside it
    when it runs without compiling anything (`kept.portable`: native libraries, numpy): a warm start
    then takes it as it is and never imports a compiler. Returns whether it wrote it."""
    if record is None or not (record.stored or record.hit) or not getattr(kept, "portable", False):
        return False
    try:
        data = pickle.dumps(kept, protocol=5)
    except Exception:  # something in it does not pickle: not kept
        return False
    try:
        write_atomic(record.path + KERNELS, KERNELS_MAGIC + zlib.crc32(data).to_bytes(4, "little") + data)
    except OSError:
        return False
    return True


def load_kernels(record: ExecutableCacheRecord | None):
    """What `store_kernels` kept beside the entry `record` hit, loaded (its libraries opened), or
    None: nothing kept, unreadable, or a library gone (then lowering compiles again)."""
    if record is None or not record.hit:
        return None
    path = record.path + KERNELS
    if why_untrusted(path) is not None:
        return None
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    head = len(KERNELS_MAGIC) + 4
    if not data.startswith(KERNELS_MAGIC) or int.from_bytes(data[head - 4:head], "little") != zlib.crc32(data[head:]):
        warnings.warn(f"jitlab: the kept kernels {os.path.basename(path)} are damaged ({len(data)} bytes, no "
                      "matching checksum); compiling them again", CacheWarning, stacklevel=3)
        return None
    try:
        with _gc_paused():
            kept = pickle.loads(data[head:])
        kept.load()
    except Exception:  # a library that no longer loads (damaged ones warn): compile again
        return None
    return kept


def entries(cache: KernelCache) -> list[str]:
    """The paths of the entries in the kernel cache's folder."""
    folder = os.path.join(cache.directory, FOLDER)
    try:
        return [os.path.join(folder, n) for n in sorted(os.listdir(folder)) if n.endswith(".pkl")]
    except OSError:
        return []


def clear(cache: KernelCache) -> int:
    """Deletes every entry (with the kernels kept beside it); returns how many."""
    paths = entries(cache)
    for path in paths:
        os.unlink(path)
        if os.path.exists(path + KERNELS):
            os.unlink(path + KERNELS)
    return len(paths)


def weights_digest(weights: dict[str, np.ndarray]) -> str:
    """A digest of the weights' names, types, shapes and values: SHA-256 of each weight's, which
    processors compute in hardware, on the cores at once (hashlib lets go of the GIL). ResNet-50's
    100 MB took 0.07 s on one core (blake2b took 0.2 s of a 0.9 s warm start)."""
    def one(item: tuple[str, np.ndarray]) -> bytes:
        name, a = item
        a = np.asarray(a)
        if a.size > 1 and not any(a.strides):      # one value broadcast (an ONNX fill): that value
            digest = hashlib.sha256(f"{name}:{a.dtype.str}:{a.shape}:fill".encode())
            digest.update(np.asarray(a[(0,) * a.ndim]).tobytes())
            return digest.digest()
        a = np.ascontiguousarray(a)
        digest = hashlib.sha256(f"{name}:{a.dtype.str}:{a.shape}".encode())
        digest.update(a.data if a.size else b"")
        return digest.digest()

    return hashlib.sha256(b"".join(_threads().map(one, sorted(weights.items())))).hexdigest()[:32]


@functools.cache
def _threads() -> ThreadPoolExecutor:
    """Threads that checksum and hash an entry's parts side by side."""
    return ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1)), thread_name_prefix="jitlab-digest")


# a forked child has none of its parent's threads: it starts its own
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_threads.cache_clear)


def _mapped(path: str):
    """The entry's bytes as a private copy-on-write mapping: the weights in it become arrays without
    a copy (ResNet-50's 94 MB: read and sliced, 0.3 s of a 1 s warm start; mapped, 0.04 s), and
    writable ones, as kernels compiled for writable arrays take them. jitlab replaces an entry by
    renaming a new file over it, which leaves a mapping of the old one intact."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return b""
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)


def _split(data) -> tuple[dict, memoryview, bytes, list[memoryview]]:
    """An entry's header, its core pickle, its lazy pickle and the out-of-band buffers of the
    core's arrays, each checked against its CRC."""
    if not data[:len(MAGIC)] == MAGIC:
        raise ValueError("not an executable cache entry")
    end = data.find(b"\n", len(MAGIC))
    if end < 0:
        raise ValueError("no header")
    try:
        header = json.loads(bytes(data[len(MAGIC):end]))
        sizes, crcs, places = header["sizes"], header["crc"], header["buffers"]
        header["parts"], header["weights"]      # noqa: B018  (both must be there)
        body = memoryview(data)[end + 1:]
        spans = [(0, sizes[0]), (sizes[0], sizes[0] + sizes[1])] + [(at, at + n) for at, n in places]
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"bad header: {e}") from None
    if max(stop for _, stop in spans) != len(body) or len(crcs) != len(spans):
        raise ValueError(f"{len(body)} bytes after the header, {max(stop for _, stop in spans)} expected (truncated?)")
    parts = [body[start:stop] for start, stop in spans]
    if list(_threads().map(zlib.crc32, parts)) != crcs:
        raise ValueError("checksum mismatch")
    return header, parts[0], bytes(parts[1]), parts[2:]


def _unusable(entry: Entry, why: str) -> None:
    warnings.warn(f"jitlab: executable cache entry {os.path.basename(entry.path)} is {why}; "
                  "running the passes again", CacheWarning, stacklevel=4)
    return None


def _with_weights(program, own: dict, source):
    """The loaded program with its weights: the source's arrays, or the ones a pass computed."""
    missing = [n for n, w in own.items() if w is None and n not in source.weights]
    if missing:
        raise ValueError(f"the program has no weight {missing[0]!r}")
    program.weights = {n: source.weights[n] if w is None else w for n, w in own.items()}
    return program


def _into_this_kernel(program, source) -> None:
    """Moves the loaded program's notebook-cell locations into the cell folder of this process's
    source program (the key matched them up to the folder)."""
    folder = next((m.group() for op in source.walk() if op.loc is not None
                   for m in [CELL_FOLDER.search(op.loc.file)] if m), None)
    if folder is None:
        return
    for op in program.walk():
        if op.loc is not None and CELL_FOLDER.search(op.loc.file):
            op.loc = dataclasses.replace(op.loc, file=CELL_FOLDER.sub(folder, op.loc.file))


@contextmanager
def _gc_paused():
    """Unpickling makes many small objects at once; collecting midway only costs time."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class _Lazy:
    """A report field read from the entry's second pickle the first time it is read."""

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, report, owner=None):
        if report is None:
            return self
        _unpickle_pending(report)
        return report.__dict__[self.name]

    def __set__(self, report, value) -> None:
        _unpickle_pending(report)        # else a later read of the other field would undo this
        report.__dict__[self.name] = value


def _unpickle_pending(report) -> None:
    pending = report.__dict__.pop("_pending", None)
    if pending is not None:
        with _gc_paused():
            report.__dict__.update(pickle.loads(pending))


class CachedReport(CompileReport):
    """A report read from the executable cache: its pass records and graph are unpickled
    the first time something reads them (the explorer does; running does not)."""

    passes = _Lazy()
    graph = _Lazy()

    def __reduce_ex__(self, protocol):
        return CompileReport, (), {f.name: getattr(self, f.name) for f in dataclasses.fields(CompileReport)}


def _lazy_report(light: CompileReport, lazy: bytes) -> CachedReport:
    report = CachedReport.__new__(CachedReport)
    report.__dict__.update({k: v for k, v in light.__dict__.items() if k not in LAZY_FIELDS})
    report.__dict__["_pending"] = lazy
    return report

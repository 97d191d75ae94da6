"""The compile cache: generated kernel modules in memory and on disk.

numba caches compiled code only for functions defined in a file, so each generated
kernel is written as a module into the cache folder and imported; numba's own
`cache=True` then reloads its machine code in a later process. An entry's key has
named parts (group structure, input signature, backend, library versions, and the
`support_hash` of the modules the kernel calls into); on a miss
the report says which part differed from the entries on disk.

Safety: files are written atomically and flushed to the disk (two processes may compile at
once; a crash or a full disk leaves the old file or the new one); an entry whose text does not
match what would be generated is rewritten with a warning, and is run from that text, never
from bytecode Python kept for it. Every other file the cache holds carries a check trailer
(cache_files.py; numba's own files too, numba_files.py), so a damaged one is a warning and a
rebuild, never a dead process. Loading
an entry runs what is on disk: Python's bytecode for the module and numba's index files,
which are pickles. So before each import, every folder those come from (the cache
folder, its `__pycache__`, numba's cache folder for the module, wherever NUMBA_CACHE_DIR
puts it) and every file in them that belongs to the module must be owned by this user
and writable by nobody else. When one is not, the cache moves to a private temporary
folder with a warning; where numba's folder is still shared from there (NUMBA_CACHE_DIR),
the module's functions keep their compiled code in memory only.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import stat
import sys
import tempfile
import warnings
from dataclasses import dataclass
from types import ModuleType

import platformdirs

from ..errors import CacheWarning
from .cache_files import DamagedFile, read_checked, warn_damaged, write_atomic, write_checked

NATIVE_FOLDER = "native"      # native kernel libraries (backends/native.py), beside the modules
ENV_VAR = "JITLAB_CACHE_DIR"
_TEMPORARY_PREFIX = "jitlab-cache-"
_TEMPORARY = os.path.join(tempfile.gettempdir(), _TEMPORARY_PREFIX)    # private folders made in place of one


@dataclass
class CacheEntry:
    """A loaded kernel module and how it was found."""

    module: ModuleType
    hit: bool
    miss_reason: str = ""


@functools.cache
def support_hash(*modules: str) -> str:
    """A hash of the modules a generated kernel calls into (helpers, fast math, device functions).

    numba's cache checks only the kernel's own file, so code compiled against an older version of
    one of these would be loaded again after it changed; their text is therefore part of the key."""
    digest = hashlib.sha256()
    for name in modules:
        with open(importlib.util.find_spec(name).origin, "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()[:16]


def default_directory() -> str:
    return os.environ.get(ENV_VAR) or platformdirs.user_cache_dir("jitlab")


def why_untrusted(path: str) -> str | None:
    """Why another user could have written the folder or file at `path` (None: only we can, or it
    does not exist)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return f"{path} belongs to another user"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{path} is writable by other users"
    return None


def why_untrusted_folder(folder: str) -> str | None:
    """why_untrusted for a folder and the folders above it: another user able to rename an
    ancestor's entries (one that user owns, or writable by others without the sticky bit, as /tmp
    has it) could put a folder of theirs in its place."""
    reason = why_untrusted(folder)
    parent, folder = os.path.dirname(os.path.abspath(folder)), os.path.abspath(folder)
    while reason is None and parent != folder:
        st = os.stat(parent)
        if hasattr(os, "getuid") and st.st_uid not in (os.getuid(), 0):
            reason = f"{parent} above it belongs to another user"
        elif st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
            reason = f"{parent} above it is writable by other users"
        parent, folder = os.path.dirname(parent), parent
    return reason


def _numba_folder(path: str) -> str | None:
    """The folder numba keeps the compiled code of the module at `path` in, chosen as numba does."""
    from numba.core import caching

    impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl

    def probe():
        """Stands for the module's functions: numba's locators read only its line number."""

    for locator_class in impl._locator_classes:
        locator = locator_class.from_function(probe, path)
        if locator is not None:
            return locator.get_cache_path()
    return None


class KernelCache:
    """Kernel modules keyed by their named key parts."""

    def __init__(self, directory: str | None = None):
        self.requested = directory or default_directory()
        self.directory = self._usable_directory(self.requested)
        self.modules: dict[str, ModuleType] = {}

    def _usable_directory(self, path: str) -> str:
        try:
            os.makedirs(path, mode=0o700, exist_ok=True)
            reason = why_untrusted_folder(path)
            if reason is None:
                return path
            reason = reason.replace(path, "it")
        except OSError as e:
            reason = str(e)
        return self._private_instead(path, reason)

    @staticmethod
    def _private_instead(path: str, reason: str) -> str:
        warnings.warn(f"jitlab: not using the kernel cache at {path}: {reason} (numba's cache files are "
                      "pickles); compiling into a private temporary folder instead", CacheWarning, stacklevel=4)
        return tempfile.mkdtemp(prefix=_TEMPORARY_PREFIX)

    @staticmethod
    def full_key(parts: dict[str, str]) -> str:
        text = json.dumps(parts, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:24]

    def load(self, parts: dict[str, str], source: str) -> CacheEntry:
        """The module for these key parts, from memory, disk, or freshly written."""
        key = self.full_key(parts)
        if key in self.modules:
            return CacheEntry(self.modules[key], True)
        path, hit, reason = self._place(parts, key, source)
        untrusted = self.untrusted(path)
        if untrusted is not None and not self.directory.startswith(_TEMPORARY):
            self.directory = self._private_instead(self.directory, untrusted)
            path, hit, reason = self._place(parts, key, source)
            untrusted = self.untrusted(path)
        module = module_from_source(f"jitlab_kernel_{key}", path, source)
        if untrusted is None:
            _check_numba_files(module)
        if untrusted is not None:
            _keep_compiled_code_in_memory(module, untrusted)
        self.modules[key] = module
        return CacheEntry(module, hit, reason)

    def _place(self, parts: dict[str, str], key: str, source: str) -> tuple[str, bool, str]:
        """The module's path in the cache folder, with `source` written there unless it already was."""
        untrusted = why_untrusted_folder(self.directory)
        if untrusted is not None:
            self.directory = self._private_instead(self.directory, untrusted)
        path = os.path.join(self.directory, f"{parts.get('backend', 'kernel')}_{key}.py")
        hit, reason = self._check_file(path, source, parts)
        if not hit:
            write_atomic(path, source.encode("utf-8"))
        if not hit or not self._parts_whole(path[:-3] + ".json"):
            write_checked(path[:-3] + ".json", json.dumps(parts, indent=1, sort_keys=True).encode())
        return path, hit, reason

    def untrusted(self, path: str) -> str | None:
        """Why what importing the module at `path` would load (the module, Python's bytecode, numba's
        index and code) might not be ours: a folder or file another user owns or may write."""
        stem = os.path.basename(path)[:-3]
        folders = dict.fromkeys([self.directory, os.path.join(self.directory, "__pycache__"), _numba_folder(path)])
        for folder in filter(None, folders):
            names = [n for n in _listdir(folder) if n.startswith(stem + ".")]
            reason = why_untrusted_folder(folder) or next(
                filter(None, (why_untrusted(os.path.join(folder, n)) for n in names)), None)
            if reason is not None:
                return reason
        return None

    def _check_file(self, path: str, source: str, parts: dict[str, str]) -> tuple[bool, str]:
        try:
            with open(path, encoding="utf-8") as f:
                on_disk = f.read()
        except FileNotFoundError:
            return False, self.explain_miss(parts)
        except (OSError, UnicodeDecodeError) as e:
            on_disk = f"<unreadable: {e}>"
        if on_disk == source:
            return True, ""
        warnings.warn(f"jitlab: kernel cache entry {os.path.basename(path)} is corrupt or foreign; "
                      "recompiling it", CacheWarning, stacklevel=4)
        self.clear_compiled(path)
        return False, "the entry on disk was corrupt or foreign and was rewritten"

    def explain_miss(self, parts: dict[str, str]) -> str:
        """Which key part differs from the closest entry on disk with the same structure (a kernel
        module, or a native library's manifest, which holds its key parts)."""
        best: list[str] | None = None
        prefix = f"{parts.get('backend', 'kernel')}_"
        native = os.path.join(self.directory, NATIVE_FOLDER)
        paths = [os.path.join(self.directory, n) for n in _listdir(self.directory) if n.startswith(prefix)]
        paths += [os.path.join(native, n) for n in _listdir(native)]
        for path in paths:
            if not path.endswith(".json"):
                continue
            try:
                other = json.loads(read_checked(path))
                other = other.get("parts", other)
            except (OSError, ValueError, AttributeError):       # damaged: no help in explaining
                continue
            if other.get("structure") != parts.get("structure"):
                continue
            differing = sorted(k for k in parts.keys() | other.keys() if parts.get(k) != other.get(k))
            if best is None or len(differing) < len(best):
                best = differing
        if best is None:
            return "no entry for this group structure yet"
        if not best:
            return "the entry on disk could not be used and was built again"
        return "the " + ", ".join(best) + " differ" + ("s" if len(best) == 1 else "") + " from the cached entry"

    @staticmethod
    def _parts_whole(path: str) -> bool:
        """Whether the key parts beside a module (which explain later misses) are whole."""
        try:
            read_checked(path)
            return True
        except FileNotFoundError:
            return False
        except (OSError, DamagedFile) as e:
            warn_damaged(path, str(e), "writing it again")
            return False

    @staticmethod
    def clear_compiled(path: str) -> int:
        """Removes numba's compiled-code files for the module at `path`; returns how many."""
        folder = os.path.join(os.path.dirname(path), "__pycache__")
        stem = os.path.basename(path)[:-3]
        names = [n for n in _listdir(folder) if n.startswith(stem + ".")]
        for name in names:
            os.unlink(os.path.join(folder, name))
        return len(names)

    def clear(self) -> int:
        """Deletes every entry, native libraries included; returns how many kernel modules and
        libraries were removed."""
        removed = 0
        for name in _listdir(self.directory):
            if name.endswith((".py", ".json")):
                os.unlink(os.path.join(self.directory, name))
                removed += name.endswith(".py")
        for sub in ("__pycache__", NATIVE_FOLDER):
            for name in _listdir(os.path.join(self.directory, sub)):
                path = os.path.join(self.directory, sub, name)
                if os.path.isfile(path):
                    os.unlink(path)
                    removed += name.endswith(".so")
        self.modules.clear()
        return removed

    def info(self) -> dict[str, object]:
        def size(folder: str) -> int:
            paths = (os.path.join(folder, n) for n in _listdir(folder))
            return sum(os.path.getsize(p) for p in paths if os.path.isfile(p))

        names = _listdir(self.directory)
        native = os.path.join(self.directory, NATIVE_FOLDER)
        return {"directory": self.directory, "kernels": sum(n.endswith(".py") for n in names),
                "native_libraries": sum(n.endswith(".so") for n in _listdir(native)),
                "bytes": size(self.directory) + size(os.path.join(self.directory, "__pycache__")) + size(native)}


def module_from_source(name: str, path: str, source: str) -> ModuleType:
    """The module of generated `source`, the text of the file at `path` (which numba's cache is
    keyed to), run from that text: not from bytecode Python may have kept for the file, which
    nothing checks."""
    spec = importlib.util.spec_from_loader(name, loader=None, origin=path)
    module = importlib.util.module_from_spec(spec)
    module.__file__ = path
    sys.modules[name] = module
    exec(compile(source, path, "exec"), module.__dict__)
    return module


def _check_numba_files(module: ModuleType) -> None:
    """Has the module's cached numba functions write and check their cache files (numba_files.py)."""
    from .numba_files import checked

    for value in vars(module).values():
        if hasattr(value, "enable_caching") and hasattr(value, "_cache"):
            checked(value)


def _keep_compiled_code_in_memory(module: ModuleType, reason: str) -> None:
    """Turns numba's on-disk cache off for the module's functions (their cache folder is shared)."""
    from numba.core.caching import NullCache

    warnings.warn(f"jitlab: numba's cache folder is not private ({reason}); compiled kernels stay in memory",
                  CacheWarning, stacklevel=4)
    for value in vars(module).values():
        if hasattr(value, "enable_caching") and hasattr(value, "_cache"):
            value._cache = NullCache()


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


_DEFAULT: KernelCache | None = None


def default_cache() -> KernelCache:
    """The process-wide cache (re-created when JITLAB_CACHE_DIR changes)."""
    global _DEFAULT
    if _DEFAULT is None or _DEFAULT.requested != default_directory():
        _DEFAULT = KernelCache()
    return _DEFAULT

"""The compile cache: generated kernel modules in memory and on disk.

numba caches compiled code only for functions defined in a file, so each generated
kernel is written as a module into the cache folder and imported; numba's own
`cache=True` then reloads its machine code in a later process. An entry's key has
named parts (group structure, input signature, backend, library versions, and the
`support_hash` of the modules the kernel calls into); on a miss
the report says which part differed from the entries on disk.

Safety: files are written atomically (two processes may compile at once); an entry
whose text does not match what would be generated is rewritten with a warning; the
cache is used only in a folder owned by this user and writable by nobody else,
because numba's index files are pickles.
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

ENV_VAR = "JITLAB_CACHE_DIR"


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


def _is_private(path: str) -> bool:
    st = os.stat(path)
    owned = not hasattr(os, "getuid") or st.st_uid == os.getuid()
    return owned and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


class KernelCache:
    """Kernel modules keyed by their named key parts."""

    def __init__(self, directory: str | None = None):
        self.requested = directory or default_directory()
        self.directory = self._usable_directory(self.requested)
        self.modules: dict[str, ModuleType] = {}

    def _usable_directory(self, path: str) -> str:
        try:
            os.makedirs(path, mode=0o700, exist_ok=True)
            if _is_private(path):
                return path
            reason = "it is writable by other users (numba's cache files are pickles)"
        except OSError as e:
            reason = str(e)
        warnings.warn(f"jitlab: not using the kernel cache at {path}: {reason}; compiling into a "
                      "private temporary folder instead", RuntimeWarning, stacklevel=3)
        return tempfile.mkdtemp(prefix="jitlab-cache-")

    @staticmethod
    def full_key(parts: dict[str, str]) -> str:
        text = json.dumps(parts, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:24]

    def load(self, parts: dict[str, str], source: str) -> CacheEntry:
        """The module for these key parts, from memory, disk, or freshly written."""
        key = self.full_key(parts)
        if key in self.modules:
            return CacheEntry(self.modules[key], True)
        path = os.path.join(self.directory, f"{parts.get('backend', 'kernel')}_{key}.py")
        hit, reason = self._check_file(path, source, parts)
        if not hit:
            self._write(path, source)
            self._write(path[:-3] + ".json", json.dumps(parts, indent=1, sort_keys=True))
        module = self._import(key, path)
        self.modules[key] = module
        return CacheEntry(module, hit, reason)

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
                      "recompiling it", RuntimeWarning, stacklevel=4)
        self.clear_compiled(path)
        return False, "the entry on disk was corrupt or foreign and was rewritten"

    def explain_miss(self, parts: dict[str, str]) -> str:
        """Which key part differs from the closest entry on disk with the same structure."""
        best: list[str] | None = None
        prefix = f"{parts.get('backend', 'kernel')}_"
        for name in _listdir(self.directory):
            if not (name.startswith(prefix) and name.endswith(".json")):
                continue
            try:
                with open(os.path.join(self.directory, name), encoding="utf-8") as f:
                    other = json.load(f)
            except (OSError, ValueError):
                continue
            if other.get("structure") != parts.get("structure"):
                continue
            differing = sorted(k for k in parts.keys() | other.keys() if parts.get(k) != other.get(k))
            if best is None or len(differing) < len(best):
                best = differing
        if best is None:
            return "no entry for this group structure yet"
        return "the " + ", ".join(best) + " differ" + ("s" if len(best) == 1 else "") + " from the cached entry"

    def _write(self, path: str, text: str) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".py")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    def _import(self, key: str, path: str) -> ModuleType:
        name = f"jitlab_kernel_{key}"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module

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
        """Deletes every entry; returns how many kernel modules were removed."""
        removed = 0
        for name in _listdir(self.directory):
            if name.endswith((".py", ".json")):
                os.unlink(os.path.join(self.directory, name))
                removed += name.endswith(".py")
        for name in _listdir(os.path.join(self.directory, "__pycache__")):
            os.unlink(os.path.join(self.directory, "__pycache__", name))
        self.modules.clear()
        return removed

    def info(self) -> dict[str, object]:
        names = _listdir(self.directory)
        size = sum(os.path.getsize(os.path.join(self.directory, n)) for n in names
                   if os.path.isfile(os.path.join(self.directory, n)))
        compiled = _listdir(os.path.join(self.directory, "__pycache__"))
        size += sum(os.path.getsize(os.path.join(self.directory, "__pycache__", n)) for n in compiled)
        return {"directory": self.directory, "kernels": sum(n.endswith(".py") for n in names), "bytes": size}


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

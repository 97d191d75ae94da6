"""numba's cache files for jitlab's functions, written whole and checked before use (cache_files.py).

numba keeps a function's compiled code in an index (.nbi: a pickle naming a data file per
signature) and data files (.nbc: pickles of object code and LLVM bitcode), and loads them as they
are: a short or changed file is an exception in the middle of a compile, or machine code that no
compiler made. jitlab's functions (its helper modules' and the generated kernels') write both with
cache_files' trailer instead, atomically; a damaged one is a CacheWarning and a compile, as though
it were not there, and that compile writes it anew. numba finds the files where it always does
(`checked` keeps numba's choice of folder and names), so the cache `jitlab cache warm` fills is the
one later processes read.
"""

from __future__ import annotations

import os
import pickle
import warnings
from typing import TypeVar

from numba.core.caching import IndexDataCacheFile

from ..errors import CacheWarning
from .cache_files import DamagedFile, payload_of, warn_damaged, write_checked
from .kernel_cache import why_untrusted, why_untrusted_folder

F = TypeVar("F")
_WARNED: set[str] = set()          # numba folders found shared, warned of once
_HEAD = b"jitlab numba cache\n"     # before the pickle: a file that starts with a pickle is numba's own format


class CheckedCacheFile(IndexDataCacheFile):
    """numba's index and data files of one function, each with a check trailer."""

    @classmethod
    def replacing(cls, plain: IndexDataCacheFile) -> CheckedCacheFile:
        checked = cls.__new__(cls)
        checked.__dict__.update(plain.__dict__)
        return checked

    def load(self, key):
        return None if self._shared() else super().load(key)

    def save(self, key, data) -> None:
        if not self._shared():
            super().save(key, data)

    def _shared(self) -> bool:
        """Whether another user could write numba's folder for these files (NUMBA_CACHE_DIR on a
        shared folder, say): their pickles are then neither read nor written, with a warning once."""
        reason = why_untrusted_folder(self._cache_path) if os.path.isdir(self._cache_path) else None
        if reason is not None and self._cache_path not in _WARNED:
            _WARNED.add(self._cache_path)
            warnings.warn(f"jitlab: numba's cache folder {self._cache_path} is not private ({reason}); jitlab's "
                          "functions keep their compiled code in memory", CacheWarning, stacklevel=4)
        return reason is not None

    def _load_index(self) -> dict:
        data = self._read(self._index_path)
        if data is None:
            return {}
        version, stamp, overloads = data
        # another numba, or an edited source file: stale, not damaged (numba's own rule)
        return overloads if (version, stamp) == (self._version, self._source_stamp) else {}

    def _save_index(self, overloads: dict) -> None:
        write_checked(self._index_path, _HEAD + self._dump((self._version, self._source_stamp, overloads)))

    def _load_data(self, name: str):
        return self._read(self._data_path(name))

    def _save_data(self, name: str, data) -> None:
        write_checked(self._data_path(name), _HEAD + self._dump(data))

    @staticmethod
    def _read(path: str):
        """The checked pickle at `path`; None when it is not there, is in numba's own format (written
        before jitlab checked its files: a miss, which the compile overwrites) or is damaged (with a
        warning)."""
        try:
            reason = why_untrusted(path)
            if reason is not None:
                raise DamagedFile(f"not loading it: {reason}")
            with open(path, "rb") as f:
                data = f.read()
            if data.startswith(b"\x80"):
                return None
            payload = payload_of(data)
            if not payload.startswith(_HEAD):
                raise DamagedFile("it does not start as jitlab writes numba's files")
            return pickle.loads(payload[len(_HEAD):])
        except FileNotFoundError:
            return None
        except (OSError, DamagedFile) as e:
            warn_damaged(path, str(e), "compiling again")
            return None
        except Exception as e:  # noqa: BLE001  (a class its pickle names is gone)
            warn_damaged(path, f"{type(e).__name__}: {e}", "compiling again")
            return None


def checked(dispatcher: F) -> F:
    """`dispatcher` (a numba function compiled with cache=True) with its cache files checked."""
    cache = getattr(dispatcher, "_cache", None)
    plain = getattr(cache, "_cache_file", None)
    if isinstance(plain, IndexDataCacheFile) and not isinstance(plain, CheckedCacheFile):
        cache._cache_file = CheckedCacheFile.replacing(plain)
    return dispatcher


def njit_cached(**options):
    """numba's `njit(cache=True, **options)` with the cache files checked: for jitlab's own modules."""
    from numba import njit

    return lambda fn: checked(njit(cache=True, **options)(fn))

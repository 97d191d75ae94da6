"""Files of the kernel cache, written whole and checked before anything loads them.

A file that a full disk or a killed writer left short, or whose bytes changed on disk, must be
found before it is used: the dynamic loader maps a shared library and touches pages past a short
file's end (SIGBUS: the process dies where an exception was due), and a pickle or object code read
as it is may do as badly. So each file is written to a temporary file in its own folder, flushed to
the disk and renamed into place (a reader sees the old file or the new one, whole), and ends with a
trailer holding its payload's size and SHA-256. A reader checks the trailer before anything else;
a file it does not match is damaged: a CacheWarning, and the caller builds the file again.

The trailer follows the payload so that the file stays what it was: the loader ignores bytes after
a shared library's segments. Kernel modules (Python source) carry none: each is compared whole with
the source it should hold (kernel_cache.py).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import warnings

from ..errors import CacheWarning

_MARK = b"\n#jitlab-check "
_TRAILER_SIZE = len(_MARK) + 16 + 1 + 64 + 1          # mark, size (hex), space, SHA-256 (hex), newline


class DamagedFile(ValueError):
    """A cache file whose trailer does not match its bytes (short, changed, or never finished)."""


def trailer(payload: bytes) -> bytes:
    """The trailer that `write_checked` appends to `payload`."""
    return _MARK + f"{len(payload):016x} {hashlib.sha256(payload).hexdigest()}\n".encode()


def payload_of(data: bytes) -> bytes:
    """The payload of a checked file's bytes; DamagedFile saying why when its trailer does not match."""
    if len(data) < _TRAILER_SIZE or not data[-_TRAILER_SIZE:].startswith(_MARK):
        raise DamagedFile(f"it has no check trailer ({len(data)} bytes: cut short or not written by jitlab)")
    payload = data[:-_TRAILER_SIZE]
    if data[-_TRAILER_SIZE:] != trailer(payload):
        raise DamagedFile(f"its bytes do not match its check trailer ({len(data)} bytes)")
    return payload


def read_checked(path: str) -> bytes:
    """The payload of the checked file at `path` (FileNotFoundError when there is none)."""
    with open(path, "rb") as f:
        return payload_of(f.read())


def write_checked(path: str, payload: bytes) -> None:
    """Writes `payload` and its trailer to `path` atomically."""
    write_atomic(path, payload + trailer(payload))


def write_atomic(path: str, data: bytes) -> None:
    """Writes `data` to `path` through a private temporary file beside it, flushed to the disk
    before it is renamed into place, so that a reader (or the next process after a crash or a full
    disk) sees the whole old file or the whole new one, never a part."""
    folder = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=os.path.splitext(path)[1])
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    _sync_folder(folder)


def _sync_folder(folder: str) -> None:
    """Flushes the folder's entries, so that the rename survives a crash too."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:          # some file systems cannot sync a folder: the rename stands anyway
        pass
    finally:
        os.close(fd)


def warn_damaged(path: str, why: str, then: str = "building it again") -> None:
    """The warning for a damaged cache file."""
    warnings.warn(f"jitlab: kernel cache file {path} is damaged ({why}); {then}", CacheWarning, stacklevel=3)


_verified: set[tuple] = set()      # (path, inode, size, mtime) of files checked whole in this process


def why_damaged(path: str) -> str | None:
    """Why the checked file at `path` may not be loaded (None: it is whole); for files another
    program reads (shared libraries), checked once per version of the file in a process."""
    try:
        st = os.stat(path)
    except OSError as e:
        return str(e)
    stamp = (path, st.st_ino, st.st_size, st.st_mtime_ns)
    if stamp in _verified:
        return None
    try:
        read_checked(path)
    except (OSError, DamagedFile) as e:
        return str(e)
    _verified.add(stamp)
    return None

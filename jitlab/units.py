"""Byte counts read from people ("4GiB", "512 MB") and written for them ("1.50 KiB")."""

from __future__ import annotations

import re

from .errors import JitlabError

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 10**3, "kib": 1 << 10, "m": 1 << 20, "mb": 10**6, "mib": 1 << 20,
          "g": 1 << 30, "gb": 10**9, "gib": 1 << 30, "t": 1 << 40, "tb": 10**12, "tib": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*$")


def parse_bytes(limit: int | str) -> int:
    """A byte count from an int or a string such as "4GiB", "512 MB" or "1.5G" (K/M/G/T are binary)."""
    if isinstance(limit, bool) or not isinstance(limit, (int, str)):
        raise JitlabError(f"memory_limit must be an int or a string like '4GiB', got {type(limit).__name__}")
    if isinstance(limit, int):
        value = limit
    else:
        m = _SIZE.match(limit)
        if m is None or m.group(2).lower() not in _UNITS:
            raise JitlabError(f"cannot read memory_limit {limit!r}: give a number and a unit "
                              "(B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)")
        value = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if value <= 0:
        raise JitlabError(f"memory_limit must be positive, got {limit!r}")
    return value


def format_bytes(n: int) -> str:
    """`n` bytes for people: 1536 -> '1.50 KiB'."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n} B" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")

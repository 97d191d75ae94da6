"""Every compile of this process, in order: what `jl.explore.session()` lists, as tlparse
lists torch.compile's. Entries keep their Executable only weakly: the index never keeps a
program's kernels and buffers alive after their owner dropped them."""

from __future__ import annotations

import itertools
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

_LOCK = threading.Lock()
_COUNTER = itertools.count()


@dataclass
class CompileEntry:
    """One compile: which program at which level and target, when, how long, from which cache and why."""

    index: int
    program: str
    level: str
    target: str
    started: float                 # time.time() when the compile began
    seconds: float
    cache: dict[str, Any]          # the executable cache's outcome and the kernel cache's hits / kernels
    function: str = ""             # the jitted function's qualified name; "" for a direct jl.compile
    reason: str = "jl.compile"     # why it compiled: a jitted function's first call or what changed
    signature: dict[str, str] = field(default_factory=dict)
    executable: Any = field(default=None, repr=False)    # a weakref to the Executable

    def exe(self) -> Any:
        """The Executable, or None once it was garbage collected."""
        return self.executable() if self.executable is not None else None

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "program": self.program, "function": self.function, "level": self.level,
                "target": self.target, "started": self.started, "seconds": self.seconds, "cache": dict(self.cache),
                "reason": self.reason, "signature": dict(self.signature), "alive": self.exe() is not None}


ENTRIES: list[CompileEntry] = []


def cache_state(report) -> dict[str, Any]:
    """The executable cache's outcome (hit, miss stored, or off and why) and the kernel cache's hits."""
    exe_cache = report.executable_cache
    if exe_cache is None:
        passes = "off"
    else:
        passes = "hit" if exe_cache.hit else ("miss, stored" if exe_cache.stored else f"miss ({exe_cache.reason})")
    hits = sum(1 for k in report.kernels if k.cache_hit)
    return {"executable": passes, "kernel_hits": hits, "kernels": len(report.kernels)}


def add(exe, started: float, seconds: float) -> CompileEntry:
    """Records the compile that made `exe`."""
    report = exe.report
    with _LOCK:
        entry = CompileEntry(next(_COUNTER), report.program or "program", exe.level, exe.target, started, seconds,
                             cache_state(report), executable=weakref.ref(exe))
        ENTRIES.append(entry)
    return entry


def annotate(exe, function: str, reason: str, signature: dict[str, str], seconds: float) -> None:
    """Names the jitted function whose call compiled `exe`, why, and the seconds its trace added."""
    with _LOCK:
        for entry in reversed(ENTRIES):
            if entry.exe() is exe:
                entry.function, entry.reason, entry.signature, entry.seconds = function, reason, signature, seconds
                return


def entries() -> list[CompileEntry]:
    with _LOCK:
        return list(ENTRIES)

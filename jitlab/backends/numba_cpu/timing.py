"""Where numba's compile time goes: its compiler events sorted into typing, LLVM, its other
passes and its disk cache (see numba.core.event)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import ExitStack

from numba.core import event

from ...report import KernelTiming

TYPING_PASSES = frozenset({"nopython_type_inference", "partial_type_inference"})
EVENTS = ("numba:compile", "numba:run_pass", "numba:llvm_lock")


class NumbaClock(event.Listener):
    """Seconds of one thread's numba events, each counted once: an event's time less its nested events'."""

    def __init__(self):
        self.thread = threading.get_ident()
        self.stack: list[list] = []          # [category, start, seconds of nested events]
        self.seconds = {"typing": 0.0, "llvm": 0.0, "numba_other": 0.0}
        self.compiling = 0                   # numba:compile events open
        # the start of the first counted event and the end of the last: numba's passes also run
        # outside compile events (a cfunc compiles at its decoration), and what lies before and
        # after these, not counted again, is numba's cache
        self.first: float | None = None
        self.last: float | None = None

    def on_start(self, ev: event.Event) -> None:
        if threading.get_ident() != self.thread:
            return
        now = time.perf_counter()
        if ev.kind == "numba:compile":
            self.compiling += 1
        category = self._category(ev)
        if category is not None and self.first is None:
            self.first = now
        self.stack.append([category, now, 0.0])

    def on_end(self, ev: event.Event) -> None:
        if threading.get_ident() != self.thread or not self.stack:
            return
        now = time.perf_counter()
        category, start, nested = self.stack.pop()
        if category is not None:
            self.seconds[category] += now - start - nested
            self.last = now
        if self.stack:
            self.stack[-1][2] += now - start
        if ev.kind == "numba:compile":
            self.compiling -= 1

    def _category(self, ev: event.Event) -> str | None:
        if ev.kind == "numba:llvm_lock":
            # outside a compile, LLVM loads object code from numba's cache: counted as the cache's
            return "llvm" if self.compiling else None
        if ev.kind == "numba:run_pass":
            name = ev.data["name"].split(" [", 1)[0]
            return "typing" if name in TYPING_PASSES else "numba_other"
        return "numba_other"


def timed_compile(dispatcher, signature: tuple) -> KernelTiming:
    """Compiles `dispatcher` for `signature` and says where the time went (see `timed`)."""
    return timed(lambda: dispatcher.compile(signature))


def timed(work: Callable[[], object]) -> KernelTiming:
    """Runs `work` (numba compiling something) and says where the time went. Readying numba's
    contexts comes first (the first compile of a process pays it, cache hit or not); then time
    outside numba's events (NumbaClock.first, .last) is its disk cache: before the first, the
    lookup and load, after the last, the save."""
    from numba.core.registry import cpu_target

    begin = time.perf_counter()
    cpu_target.typing_context.refresh()
    cpu_target.target_context.refresh()
    clock = NumbaClock()
    with ExitStack() as stack:
        for kind in EVENTS:
            stack.enter_context(event.install_listener(kind, clock))
        start = time.perf_counter()
        work()
        end = time.perf_counter()
    first = clock.first if clock.first is not None else end
    last = clock.last if clock.last is not None else end
    return KernelTiming(numba_init=start - begin, numba_cache_read=first - start, numba_cache_write=end - last,
                        **clock.seconds)

"""The progress bar of a kernel's compile that compiles jitlab's own helper functions: numba's
cache lacks them the first time after an install where `jitlab cache warm` has not run (warm.py),
and then a 2-op program's first compile takes seconds rather than a fraction of one.

The bar opens when numba starts compiling a helper, not before: numba announces a compile
("numba:compile") only for a signature its cache does not hold, so a process whose helpers are
cached (by `jitlab cache warm`, or by an earlier process's kernels) shows no bar.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from numba.core.caching import FunctionCache
from numba.core.event import Listener, install_listener

from ...progress import progress

BAR = "numba compiles jitlab's helpers once per install (`jitlab cache warm` does it ahead)"


def _is_helper(dispatcher) -> bool:
    """Whether `dispatcher` is one of jitlab's own cached functions (not a generated kernel's)."""
    module = getattr(getattr(dispatcher, "py_func", None), "__module__", "") or ""
    return module.startswith("jitlab.") and isinstance(getattr(dispatcher, "_cache", None), FunctionCache)


class _HelperCompiles(Listener):
    """Opens the bar at the first helper numba compiles on the watching thread (a cache miss: numba
    announces no compile for a signature its cache holds), and names each helper as it starts."""

    def __init__(self, label: str, stack: ExitStack) -> None:
        self.label, self.stack, self.thread, self.bar = label, stack, threading.get_ident(), None

    def on_start(self, event) -> None:
        dispatcher = event.data["dispatcher"]
        if threading.get_ident() != self.thread or not _is_helper(dispatcher):
            return
        if self.bar is None:
            self.bar = self.stack.enter_context(progress(1, BAR, min_total=1, unit="kernel"))
            self.bar.step(self.label)
        self.bar.show(f"{self.label}: {dispatcher.py_func.__qualname__}")

    def on_end(self, event) -> None:
        """Nothing to do: the bar closes with the kernel's compile."""


@contextmanager
def first_compile(label: str) -> Iterator[None]:
    """A progress bar over a kernel's compile, shown once numba compiles one of jitlab's helpers for
    it (numba's cache lacks that helper: the first compile after an install, without `jitlab cache
    warm`); a kernel whose helpers are all in the cache shows none."""
    with ExitStack() as stack, install_listener("numba:compile", _HelperCompiles(label, stack)):
        yield

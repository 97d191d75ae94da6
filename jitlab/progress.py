"""Progress of long compiler work (compiling many kernels): a bar naming the item in hand,
a widget in notebooks and text in terminals (tqdm.auto picks).

    with progress(len(groups), "compiling") as p:
        for group in groups:
            p.step(group.key)       # now compiling this one
            compile_group(group)
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

MIN_TOTAL = 2


class Progress:
    """The handle `progress` yields: `step(name)` says which item is being worked on now."""

    def __init__(self, bar: Any | None):
        self.bar = bar
        self.current: str | None = None
        self.done = 0

    def step(self, name: str) -> None:
        """Counts the previous item as done and shows `name` as the one in hand."""
        self._finish_current()
        self.current = name
        if self.bar is not None:
            self.bar.set_postfix_str(name, refresh=True)

    def show(self, detail: str) -> None:
        """Shows `detail` (what the item in hand is doing now) without counting anything done."""
        if self.bar is not None:
            self.bar.set_postfix_str(detail, refresh=True)

    def _finish_current(self) -> None:
        if self.current is not None:
            self.done += 1
            if self.bar is not None:
                self.bar.update(1)
        self.current = None


def _interactive() -> bool:
    """A person is watching: a notebook kernel, or a terminal on stderr."""
    return "ipykernel" in sys.modules or sys.stderr.isatty()


@contextmanager
def progress(total: int, desc: str = "compiling", *, min_total: int = MIN_TOTAL, file: IO[str] | None = None,
             disable: bool = False, unit: str = "kernel") -> Iterator[Progress]:
    """A progress bar over `total` items, shown only when there are at least `min_total` of them."""
    bar = None
    if total >= min_total and not disable and (file is not None or _interactive()):
        from tqdm.auto import tqdm

        bar = tqdm(total=total, desc=desc, unit=unit, leave=False, file=file, dynamic_ncols=True)
    handle = Progress(bar)
    try:
        yield handle
        handle._finish_current()
    finally:
        if bar is not None:
            bar.close()

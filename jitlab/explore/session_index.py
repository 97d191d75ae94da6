"""`jl.explore.session()`: every compile and recompile of this process in one index, each with
its reason, time, cache state and a link to its own explorer page (as tlparse indexes
torch.compile's). The entries come from the compile log (runtime/compile_log.py)."""

from __future__ import annotations

import pathlib
import re
import time
from dataclasses import dataclass
from typing import Any

from ..errors import JitlabError
from ..runtime import compile_log
from .session import from_object


def entry_title(entry: compile_log.CompileEntry) -> str:
    return f"#{entry.index} {entry.function or '@' + entry.program} {entry.level} {entry.target}"


def page_name(stem: str, entry: compile_log.CompileEntry) -> str:
    """The file a saved index links compile `entry` to, beside the index."""
    name = re.sub(r"[^\w.-]+", "_", entry.function or entry.program).strip("_") or "program"
    return f"{stem}-{entry.index:03d}-{name}.html"


def index_data(entries: list[compile_log.CompileEntry]) -> dict[str, Any]:
    """The Session view's data: every compile's record, oldest first, numbered by function."""
    rows, seen = [], {}
    for e in entries:
        key = e.function or f"@{e.program}"
        seen[key] = seen.get(key, 0) + 1
        rows.append({**e.to_dict(), "name": key, "nth": seen[key], "page": None,
                     "clock": time.strftime("%H:%M:%S", time.localtime(e.started))})
    return {"title": "jitlab session: every compile of this process", "session": {"compiles": rows}}


@dataclass
class IndexSession:
    """The work an index widget does on request: build one compile's page, save them all."""

    entries: list[compile_log.CompileEntry]
    data: dict[str, Any]

    def entry(self, index: int) -> compile_log.CompileEntry:
        for e in self.entries:
            if e.index == index:
                return e
        raise JitlabError(f"no compile #{index} in this session's index")

    def page_data(self, index: int) -> dict[str, Any]:
        """Compile `index`'s explorer data, for a page that asks the kernel nothing more."""
        entry = self.entry(index)
        exe = entry.exe()
        if exe is None:
            raise JitlabError(f"compile #{index} ({entry_title(entry)}) was garbage collected: nothing to show")
        session = from_object(exe)
        return session.static_data(session.build(entry_title(entry)))

    def handle(self, message: dict[str, Any]) -> dict[str, Any] | None:
        if message.get("type") != "page":
            return None
        try:
            return {"type": "page", "index": message["index"], "data": self.page_data(int(message["index"]))}
        except (JitlabError, KeyError, ValueError, TypeError) as e:
            return {"type": "page", "index": message.get("index"), "error": f"{type(e).__name__}: {e}"}

    def static_data(self, data: dict[str, Any]) -> dict[str, Any]:
        return {**data, "static": True}

    def save_pages(self, path: pathlib.Path) -> dict[str, Any]:
        """Writes each living compile's page beside `path`; the index's data, linking them."""
        from . import html

        rows = []
        for row, entry in zip(self.data["session"]["compiles"], self.entries):
            row = dict(row)
            if entry.exe() is not None:
                row["page"] = page_name(path.stem, entry)
                html.write(path.parent / row["page"], {"data": self.page_data(entry.index), "view": "all",
                                                       "selection": {}}, entry_title(entry))
            rows.append(row)
        return self.static_data({**self.data, "session": {"compiles": rows}})


def session_index() -> IndexSession:
    """An index over every compile this process has made so far."""
    entries = compile_log.entries()
    return IndexSession(entries, index_data(entries))

"""The explorer widget: a thin anywidget class over the data `model.build` makes.

The browser code (widgets/*.js) draws every view from the synced `data`; selection is
synced back so Python can read what the user picked. Work that needs the compiler's
objects (pass graph diffs, dry runs) is asked for by message; the browser lays the
graph out itself.
"""

from __future__ import annotations

import pathlib
from typing import Any

import anywidget
import traitlets

from . import html
from .assets import bundle, stylesheet
from .session import Session

VIEWS = ("all", "graph", "passes", "fusion", "schedule", "memory", "kernels", "compare", "session")


class Explorer(anywidget.AnyWidget):
    """Linked views of one compilation (or a comparison of several)."""

    _esm = bundle()
    _css = stylesheet()
    data = traitlets.Dict().tag(sync=True)
    view = traitlets.Unicode("all").tag(sync=True)
    selection = traitlets.Dict().tag(sync=True)

    def __init__(self, session: Session, data: dict[str, Any], view: str = "all", **kwargs):
        super().__init__(data=data, view=view, **kwargs)
        self.session = session
        self.on_msg(self._on_message)

    def _on_message(self, _widget, content: dict[str, Any], _buffers) -> None:
        reply = self.session.handle(content)
        if reply is not None:
            self.send(reply)

    def save(self, path: str | pathlib.Path) -> pathlib.Path:
        """Writes the same views as one self-contained offline HTML file."""
        # The widget's own data: a comparison's is not its first session's. A session index writes
        # each compile's page beside its own.
        save_pages = getattr(self.session, "save_pages", None)
        data = save_pages(pathlib.Path(path)) if save_pages else self.session.static_data(dict(self.data))
        state = {"data": data, "view": self.view, "selection": dict(self.selection)}
        return html.write(path, state, self.data.get("title", "jitlab explorer"))

    def repro(self, path: str | pathlib.Path, inputs, *, group: int | None = None,
              pass_index: int | None = None) -> pathlib.Path:
        """Saves a replayable repro: the input of pass run `pass_index`, or group `group`, with inputs."""
        from .repro import export

        return export(self.session, path, inputs, group=group, pass_index=pass_index)

    def __repr__(self) -> str:
        d = self.data
        return (f"<jl.explore {d.get('title', '')} {d.get('level') or 'program'}: {len(d.get('ops', {}))} ops, "
                f"{len(d.get('groups', []))} groups, {len(d.get('passes', []))} pass runs>")

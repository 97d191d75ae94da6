"""The explorer: `jl.explore(x)` shows one compilation in linked notebook views, and
`.save("report.html")` writes the same views to one offline file.

Everything here only reads the CompileReport; the widget itself (anywidget, ipywidgets)
is imported on first use.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import repro, reprs  # noqa: F401  (reprs registers the notebook reprs of Program and Executable)
from .session import Session, from_object


class ExploreAPI:
    """`jl.explore(x)`: all views; `jl.explore.graph(x)` and friends: one view alone."""

    def __call__(self, x: Any, view: str = "all", title: str = ""):
        """The explorer widget for a jitted function (its last call), an Executable or a Program."""
        from .widget import VIEWS, Explorer

        if view not in VIEWS:
            from ..errors import JitlabError

            raise JitlabError(f"unknown explorer view {view!r}; views are {', '.join(VIEWS)}")
        session = from_object(x)
        return Explorer(session, session.build(title), view)

    def graph(self, x: Any):
        return self(x, "graph")

    def passes(self, x: Any):
        return self(x, "passes")

    def fusion(self, x: Any):
        return self(x, "fusion")

    def schedule(self, x: Any):
        return self(x, "schedule")

    def memory(self, x: Any):
        return self(x, "memory")

    def kernels(self, x: Any):
        return self(x, "kernels")

    def compare(self, *xs: Any, args: Sequence[Any] | None = None, labels: Sequence[str] | None = None,
                repeats: int = 5):
        """Two or more compilations side by side; with `args` (inputs) each is profiled on them first
        (`repeats` timed calls), so the view shows its time, its kernels' and its scopes'."""
        from .compare_view import compare_session
        from .widget import Explorer

        session, data = compare_session(xs, args, labels, repeats)
        return Explorer(session, data, "compare")

    def session(self):
        """Every compile and recompile of this process so far: reason, time, cache state, and its page."""
        from .session_index import session_index
        from .widget import Explorer

        index = session_index()
        return Explorer(index, index.data, "session")

    @staticmethod
    def load_repro(path):
        """(Program, inputs) from a repro file: `jl.compile(program)(*inputs)` replays it."""
        return repro.load(path)

    def __repr__(self) -> str:
        return "<jl.explore: call with a jitted function, an Executable or a Program>"


explore = ExploreAPI()

__all__ = ["ExploreAPI", "Session", "explore", "from_object"]

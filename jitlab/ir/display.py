"""Rich notebook display, drawn by whoever registers a renderer: the explorer registers
Program's and Executable's when jitlab is imported (explore/reprs.py), so the IR and the
runtime know nothing of HTML and import nothing above them."""

from __future__ import annotations

from collections.abc import Callable

HTML_RENDERERS: dict[type, Callable[[object], str]] = {}


def register_html(cls: type, render: Callable[[object], str]) -> None:
    """`render(obj)` gives the HTML that notebooks show for an instance of `cls`."""
    HTML_RENDERERS[cls] = render


def render_html(obj: object) -> str | None:
    """HTML for `obj` from the renderer of its class (or a base); None lets the notebook fall
    back to the text repr."""
    render = next((HTML_RENDERERS[c] for c in type(obj).__mro__ if c in HTML_RENDERERS), None)
    return None if render is None else render(obj)

"""Syntax highlighting of generated kernel source, as HTML spans styled by explorer.css."""

from __future__ import annotations

import html


def highlight_python(source: str) -> str:
    """Python source as HTML with Pygments' short token classes (`k`, `nf`, `mi`, ...)."""
    if not source:
        return ""
    try:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import PythonLexer
    except ImportError:
        return html.escape(source)
    return highlight(source, PythonLexer(), HtmlFormatter(nowrap=True))

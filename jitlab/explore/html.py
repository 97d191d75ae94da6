"""Static HTML export: the same browser code and data in one offline file, no kernel."""

from __future__ import annotations

import json
import pathlib
from typing import Any

from .assets import bundle, stylesheet

TEMPLATE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="jitlab explorer">
<title>{title}</title>
<style>
body {{ margin: 12px; font-family: system-ui, sans-serif; }}
{css}
</style>
</head>
<body class="jl-static">
<div id="jl-root"></div>
<script type="application/json" id="jl-data">{data}</script>
<script type="module">
{js}
const state = JSON.parse(document.getElementById("jl-data").textContent);
explorerWidget.render({{ model: staticModel(state), el: document.getElementById("jl-root") }});
</script>
</body>
</html>
"""


def _script_safe(text: str) -> str:
    """JSON that cannot close the <script> element holding it."""
    return text.replace("<", "\\u003c")


def page(state: dict[str, Any], title: str) -> str:
    """The whole HTML document for widget state `state` (its synced traits)."""
    import html as html_lib

    js = bundle().replace("export default explorerWidget;", "")
    return TEMPLATE.format(title=html_lib.escape(title), css=stylesheet(), js=js,
                           data=_script_safe(json.dumps(state, default=str)))


def write(path: str | pathlib.Path, state: dict[str, Any], title: str) -> pathlib.Path:
    path = pathlib.Path(path)
    path.write_text(page(state, title), encoding="utf-8")
    return path

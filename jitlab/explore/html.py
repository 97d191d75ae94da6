"""Static HTML export: the same browser code and data in one offline file, no kernel.

The data is JSON, gzipped and base64-encoded (ResNet-50 at O1: 2.8 MB of JSON, a 0.48 MB
page); the page inflates it with the browser's own DecompressionStream, nothing fetched."""

from __future__ import annotations

import base64
import gzip
import json
import pathlib
import re
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
<script type="application/octet-stream" id="jl-data" data-encoding="gzip+base64">{data}</script>
<script type="module">
{js}
const root = document.getElementById("jl-root");
try {{
  const packed = Uint8Array.from(atob(document.getElementById("jl-data").textContent.trim()), (c) => c.charCodeAt(0));
  const json = await new Response(new Blob([packed]).stream().pipeThrough(new DecompressionStream("gzip"))).text();
  // The data as saved (the views add to their copy), for scripts and tests: `await window.jitlabData()`.
  window.jitlabData = async () => JSON.parse(json);
  explorerWidget.render({{ model: staticModel(JSON.parse(json)), el: root }});
}} catch (e) {{
  root.textContent = `This page could not unpack its data (${{e}}): open it in a browser with ` +
    "DecompressionStream (Chromium 80+, Firefox 113+, Safari 16.4+).";
  throw e;
}}
</script>
</body>
</html>
"""

_DATA = re.compile(r'<script type="application/octet-stream" id="jl-data" data-encoding="gzip\+base64">(.*?)</script>',
                   re.S)


def pack(state: dict[str, Any]) -> str:
    """`state` as gzipped JSON in base64 (which never holds `<`, so it cannot close its <script>)."""
    raw = json.dumps(state, default=str, separators=(",", ":")).encode("utf-8")
    return base64.b64encode(gzip.compress(raw, compresslevel=9, mtime=0)).decode("ascii")


def read_state(page_text: str) -> dict[str, Any]:
    """The state a saved page holds (the inverse of `page`)."""
    m = _DATA.search(page_text)
    if m is None:
        raise ValueError("not a saved jitlab explorer page (no jl-data element)")
    return json.loads(gzip.decompress(base64.b64decode(m.group(1))))


def page(state: dict[str, Any], title: str) -> str:
    """The whole HTML document for widget state `state` (its synced traits)."""
    import html as html_lib

    js = bundle().replace("export default explorerWidget;", "")
    return TEMPLATE.format(title=html_lib.escape(title), css=stylesheet(), js=js, data=pack(state))


def write(path: str | pathlib.Path, state: dict[str, Any], title: str) -> pathlib.Path:
    path = pathlib.Path(path)
    path.write_text(page(state, title), encoding="utf-8")
    return path

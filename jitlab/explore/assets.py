"""The browser side: finds `widgets/` (beside the package in a checkout, inside it in a
wheel) and joins its ES modules into the one module anywidget and the HTML export load."""

from __future__ import annotations

import functools
import pathlib
import re

ENTRY = "explorer.js"
_IMPORT = re.compile(r'^import\s*\{[^}]*\}\s*from\s*"\./([\w.-]+)";\s*$', re.M)
_EXPORT = re.compile(r"^export\s+(?=(async\s+)?(function|const|let|class)\b)", re.M)


def widgets_dir() -> pathlib.Path:
    """The folder holding explorer.js and explorer.css."""
    package = pathlib.Path(__file__).resolve().parent.parent
    for candidate in (package / "widgets", package.parent / "widgets"):
        if (candidate / ENTRY).is_file():
            return candidate
    raise FileNotFoundError(f"jitlab's widget files are missing (looked in {package / 'widgets'} and "
                            f"{package.parent / 'widgets'}); reinstall jitlab")


def _ordered(folder: pathlib.Path, name: str, seen: dict[str, str]) -> None:
    """Appends `name` after the local modules it imports (depth first, each once)."""
    if name in seen:
        return
    seen[name] = ""
    text = (folder / name).read_text(encoding="utf-8")
    for dep in _IMPORT.findall(text):
        _ordered(folder, dep, seen)
    del seen[name]
    seen[name] = _EXPORT.sub("", _IMPORT.sub("", text))


@functools.lru_cache(maxsize=1)
def bundle() -> str:
    """All local modules joined in dependency order; only the entry's `export default` remains."""
    seen: dict[str, str] = {}
    _ordered(widgets_dir(), ENTRY, seen)
    return "\n".join(f"// ---- {name}\n{text}" for name, text in seen.items())


@functools.lru_cache(maxsize=1)
def stylesheet() -> str:
    return (widgets_dir() / "explorer.css").read_text(encoding="utf-8")

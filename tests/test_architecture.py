"""docs/architecture.md holds: the import-linter contracts in pyproject.toml pass; checked a second
way on grimp's import graph, no two of jitlab's packages import each other; the page's recipes name
files and functions that exist."""

import itertools
import pathlib
import re

import grimp
import numpy as np
from importlinter.cli import lint_imports

import jitlab as jl
from jitlab.explore.reprs import program_html
from jitlab.ir.display import HTML_RENDERERS, render_html

try:
    import tomllib
except ImportError:          # Python 3.10: import-linter brings tomli
    import tomli as tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _contract(contract_id: str) -> dict:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return next(c for c in config["contracts"] if c["id"] == contract_id)


def test_import_contracts_hold(capsys):
    code = lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True, no_logo=True)
    assert code == 0, capsys.readouterr().out


def test_no_two_packages_import_each_other():
    graph = grimp.build_graph("jitlab", cache_dir=None)
    assert "jitlab.units" in graph.modules and jl.__file__.startswith(str(ROOT))   # this checkout's jitlab
    # Imports that the layers contract still ignores are on their way out (issue 18); the
    # rest of the graph must already be free of cycles.
    for line in _contract("layers").get("ignore_imports", []):
        importer, imported = (name.strip() for name in line.split("->"))
        graph.remove_import(importer=importer, imported=imported)
    packages = sorted(graph.find_children("jitlab"))
    cycles = []
    for a, b in itertools.combinations(packages, 2):
        there = graph.find_shortest_chain(a, b, as_packages=True)
        back = graph.find_shortest_chain(b, a, as_packages=True)
        if there and back:
            cycles.append(f"{' -> '.join(there)}  and back  {' -> '.join(back)}")
    assert len(packages) > 15 and not cycles, "\n".join(cycles)


def test_the_ir_draws_html_through_the_explorers_hook():
    program = jl.trace(lambda x: x + 1, np.ones(3, np.float32))
    assert HTML_RENDERERS[jl.Program].__module__ == "jitlab.explore.reprs"
    assert program._repr_html_() == program_html(program)
    assert render_html(object()) is None          # nothing registered: the notebook shows the text repr


def test_the_architecture_page_names_what_exists():
    """Every path the page names exists, and each name a recipe step cites is defined in a file
    that step names (a renamed function breaks the recipe, and this test)."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    moved = re.search(r"### What moved where.*?(?=\n## )", page, re.S).group(0)     # names old paths too
    current = page.replace(moved, "")
    paths = set(re.findall(r"(?<![\w./])((?:docs|examples|notebooks|jitlab|widgets|tests)/[\w./<>-]*\w)", current))
    assert paths and sorted(p for p in paths if "<" not in p and not (ROOT / p).exists()) == []
    recipes = page.split("## Recipes", 1)[1]
    missing = []
    for step in re.split(r"\n(?=\d+\. )", recipes):
        files = [ROOT / p for p in re.findall(r"`((?:jitlab|widgets|tests)/[\w./]+\.(?:py|js))`", step)]
        texts = "\n".join(f.read_text() for f in files)
        for token in re.findall(r"`@?([A-Za-z_][\w.]*)(?:\([^`]*\))?`", step):
            name = token.split(".")[-1]
            defined = re.search(DEFINITION.format(re.escape(name)), texts, re.M) or ("." in token and token in texts)
            if files and not defined:
                missing.append(f"{name} (step: {step.strip()[:60]}...)")
    assert missing == [], "\n".join(missing)


DEFINITION = r"(?:def|class|const|function)\s+{0}\b|^\s*{0}\s*[:=(]|^\s*\w+\s*=\s*{0}\b|\b{0}\s*=\s"

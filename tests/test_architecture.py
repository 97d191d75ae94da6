"""docs/architecture.md holds: the import-linter contracts in pyproject.toml pass; checked a second
way on grimp's import graph, no two of jitlab's packages import each other; the page's recipes name
files and functions that exist."""

import ast
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



def _imported_modules(tree: ast.Module, package: str) -> dict[str, str]:
    """The names a module binds to jitlab's modules by its imports, with the module each is."""
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bound.update({a.asname: a.name for a in node.names if a.asname and a.name.startswith("jitlab.")})
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, package)
            for a in node.names:
                if base.startswith("jitlab") and _is_module(f"{base}.{a.name}"):
                    bound[a.asname or a.name] = f"{base}.{a.name}"
    return bound


def _absolute(node: ast.ImportFrom, package: str) -> str:
    parts = package.split(".")
    base = parts[:len(parts) - node.level + 1] if node.level else []
    return ".".join(base + ([node.module] if node.module else []))


def _is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_names_taken(path: str, source: str) -> list[str]:
    """`from .m import _name` and `m._name` in the module at `path` (under ROOT), m another of jitlab's."""
    parts = pathlib.PurePosixPath(path).with_suffix("").parts
    package = ".".join(parts[:-1])                 # an __init__.py's package is its folder, as a module's
    tree = ast.parse(source)
    taken = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and _absolute(node, package).startswith("jitlab"):
            taken += [f"from {_absolute(node, package)} import {a.name}" for a in node.names if _private(a.name)]
    modules = _imported_modules(tree, package)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name) \
                and node.value.id in modules:
            taken.append(f"{modules[node.value.id]}.{node.attr}")
    return [f"{path}: {name}" for name in taken]


def test_no_module_takes_another_modules_private_names():
    """A helper one module shares with others has a public name: a leading underscore means 'only here'."""
    taken = [t for path in sorted((ROOT / "jitlab").rglob("*.py"))
             for t in _private_names_taken(path.relative_to(ROOT).as_posix(), path.read_text())]
    assert taken == [], "\n".join(taken)


def test_the_private_name_check_sees_both_spellings():
    source = ("from .indexing import _hidden, shown\nfrom . import tracer\nfrom ..ir import shapes as s\n"
              "import jitlab.frontend.inplace as inplace\n"
              "x = tracer._state, s._sym, inplace._own, tracer.public, shown._field, self._mine\n")
    assert _private_names_taken("jitlab/frontend/probe.py", source) == [
        "jitlab/frontend/probe.py: from jitlab.frontend.indexing import _hidden",
        "jitlab/frontend/probe.py: jitlab.frontend.tracer._state",
        "jitlab/frontend/probe.py: jitlab.ir.shapes._sym",
        "jitlab/frontend/probe.py: jitlab.frontend.inplace._own"]

"""What the numba backends share lives in backends/loopnest.py (and backends/indexing.py): the cuda
backend takes none of the CPU backend's private names and words its own reasons."""

import ast
from pathlib import Path

import numpy as np
import pytest

import jitlab as jl
from jitlab.backends.base import get_backend
from jitlab.backends.loopnest import REDUCTIONS, identity, literal

BACKENDS = Path(jl.__file__).parent / "backends"


def imported_names(module: Path) -> list[tuple[str, str]]:
    """(module, name) of every `from ... import name` in a file, relative modules resolved against backends/."""
    out = []
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.ImportFrom):
            package = module.parent.relative_to(BACKENDS.parent.parent).parts
            base = ".".join(package[:len(package) - node.level + 1]) if node.level else ""
            where = ".".join(p for p in (base, node.module or "") if p)
            out += [(where, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            out += [(alias.name, "") for alias in node.names]
    return out


@pytest.mark.parametrize("module", sorted(p.name for p in (BACKENDS / "numba_cuda").glob("*.py")))
def test_the_cuda_backend_imports_no_private_name_of_the_cpu_backend(module):
    for where, name in imported_names(BACKENDS / "numba_cuda" / module):
        if "numba_cpu" in where:
            assert not name.startswith("_"), f"{module} imports {name} from {where}"
            assert not where.split(".")[-1].startswith("_"), f"{module} imports the private module {where}"


def test_the_import_scan_sees_relative_imports():
    names = imported_names(BACKENDS / "numba_cuda" / "codegen.py")
    assert ("jitlab.backends.loopnest", "REDUCTIONS") in names
    assert ("jitlab.backends.numba_cpu.codegen", "KernelSource") in names


def test_no_backend_edits_another_backends_reason_text():
    for path in BACKENDS.rglob("*.py"):
        assert '.replace("numba_cpu"' not in path.read_text(), path


@pytest.mark.parametrize("target", ["numba_cpu", "numba_cuda"])
def test_reasons_name_the_backend_that_gives_them(target):
    program = jl.trace(lambda x: np.exp(x) + 1, np.ones(4, np.float16))
    exp = next(op for op in program.body.ops if op.name == "np.exp")
    reason = get_backend(target).supports(exp)
    assert reason == f"float16 is not supported by {target}"


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "int64", "uint16", "bool"])
def test_a_reductions_identity_leaves_every_value_as_it_is(name, dtype):
    fn = getattr(np, "sum" if name == "np.mean" else name.split(".")[1])    # a mean accumulates a sum
    start = eval(identity(REDUCTIONS[name][0], np.dtype(dtype)), {"np": np})
    dtype = np.dtype(dtype)
    info = np.finfo(dtype) if dtype.kind == "f" else np.iinfo(dtype) if dtype.kind in "iu" else None
    values = [False, True] if info is None else [info.min, info.max, 0, 1, -1 if dtype.kind != "u" else 2]
    for v in np.array(values, dtype):
        pair = np.array([start, v], dtype)
        assert pair[0] == start and fn(pair) == (bool(v) if name in ("np.any", "np.all") else v)


def test_literals_round_trip():
    for value, dtype in [(0.1, "float32"), (-np.inf, "float64"), (np.nan, "float32"), (7, "int8"),
                         (1 + 2j, "complex64"), (True, "bool")]:
        got = eval(literal(value, np.dtype(dtype)), {"np": np})
        np.testing.assert_array_equal(np.asarray(got, dtype), np.asarray(value, dtype))

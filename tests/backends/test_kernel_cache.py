"""The compile cache: reuse across processes, safety against corrupt, foreign or shared folders."""

import json
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jitlab as jl
from jitlab.backends.kernel_cache import KernelCache
from tests.budget import first_fast

SCRIPT = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    import jitlab as jl
    x = np.linspace(-2, 2, 4096, dtype=np.float32).reshape(64, 64)
    exe = jl.compile(jl.trace(lambda x: np.tanh(x * 2.0) - x.max(axis=1, keepdims=True), x), level="O1")
    out = exe(x)[0]
    k = exe.report.kernels[0]
    print(json.dumps({"hit": k.cache_hit, "reason": k.miss_reason, "seconds": k.compile_seconds,
                      "sum": float(out.sum())}))
""")


def run_process(cache_dir, native: bool = False):
    """SCRIPT in a new process; its kernel runs as numba dispatchers (the cache of numba's modules
    these tests check) unless `native` (its native library: tests/backends/test_native.py)."""
    env = dict(os.environ, JITLAB_CACHE_DIR=str(cache_dir), PYTHONPATH=os.getcwd(),
               JITLAB_NATIVE="1" if native else "0")
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=True)
    import json

    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("native", first_fast(False, True))     # native: test_native.py's warm starts too
def test_second_process_loads_kernels_from_disk(tmp_path, native):
    first = run_process(tmp_path, native)
    second = run_process(tmp_path, native)
    assert not first["hit"] and first["reason"] == "no entry for this group structure yet"
    assert second["hit"] and second["sum"] == first["sum"]


@pytest.mark.parametrize("native", first_fast("1", "0"))
def test_two_processes_compiling_at_once_both_succeed(tmp_path, native):
    env = dict(os.environ, JITLAB_CACHE_DIR=str(tmp_path), PYTHONPATH=os.getcwd(), JITLAB_NATIVE=native)
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT], env=env, stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    outputs = [p.communicate()[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs


def test_corrupt_entry_is_rewritten_with_a_warning(tmp_path, monkeypatch):
    monkeypatch.setenv("JITLAB_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("JITLAB_NATIVE", "0")
    run_process(tmp_path)
    (entry,) = [p for p in tmp_path.iterdir() if p.suffix == ".py"]
    entry.write_text(entry.read_text()[:120])                      # truncated
    x = np.linspace(-2, 2, 4096, dtype=np.float32).reshape(64, 64)
    with pytest.warns(RuntimeWarning, match="corrupt or foreign"):
        exe = jl.compile(jl.trace(lambda x: np.tanh(x * 2.0) - x.max(axis=1, keepdims=True), x), level="O1")
    assert exe.report.kernels[0].miss_reason == "the entry on disk was corrupt or foreign and was rewritten"
    expected = np.tanh(x * 2.0) - x.max(axis=1, keepdims=True)
    np.testing.assert_allclose(exe(x)[0], expected, rtol=1e-5, atol=1e-6)


@pytest.mark.slow      # tests/backends/test_cache_faults.py damages each kind of numba cache file by default
def test_corrupt_numba_index_is_recompiled(tmp_path):
    run_process(tmp_path)
    for index in (tmp_path / "__pycache__").glob("*.nbi"):
        index.write_bytes(b"\x80\x04not a pickle")
    assert run_process(tmp_path)["sum"] == run_process(tmp_path)["sum"]


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")
def test_folder_writable_by_others_is_not_used(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.warns(RuntimeWarning, match="writable by other users"):
        cache = KernelCache(str(shared))
    assert cache.directory != str(shared)


class Planted:
    """A pickle that makes a folder when loaded: proof that a planted index ran."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return os.mkdir, (self.marker,)


def plant_indexes(folder, marker) -> int:
    """Replaces numba's index files in `folder` by pickles that run code; how many."""
    indexes = list(folder.glob("*.nbi"))
    for index in indexes:
        index.write_bytes(pickle.dumps(Planted(marker)))
    return len(indexes)


def run_warned(cache_dir, **env):
    """run_process, also returning what the process warned."""
    env = dict(os.environ, JITLAB_CACHE_DIR=str(cache_dir), PYTHONPATH=os.getcwd(), JITLAB_NATIVE="0", **env)
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")
def test_a_planted_index_in_a_shared_pycache_is_never_loaded(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o755)
    expected, _ = run_warned(cache)
    pycache = cache / "__pycache__"
    pycache.chmod(0o777)                      # the top folder is private, numba's is not
    marker = tmp_path / "planted-code-ran"
    assert plant_indexes(pycache, marker)
    got, warned = run_warned(cache)
    assert not marker.exists()
    assert "__pycache__ is writable by other users" in warned
    assert got["sum"] == expected["sum"]


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="needs chown")
def test_an_index_owned_by_another_user_is_never_loaded(tmp_path):
    expected, _ = run_warned(tmp_path)
    marker = tmp_path / "planted-code-ran"
    assert plant_indexes(tmp_path / "__pycache__", marker)
    for index in (tmp_path / "__pycache__").glob("*.nbi"):
        os.chown(index, 4242, 4242)
    got, warned = run_warned(tmp_path)
    assert not marker.exists()
    assert "belongs to another user" in warned
    assert got["sum"] == expected["sum"]


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")
def test_a_shared_numba_cache_dir_gets_no_compiled_code(tmp_path):
    shared = tmp_path / "numba-shared"
    shared.mkdir()
    shared.chmod(0o777)
    got, warned = run_warned(tmp_path / "cache", NUMBA_CACHE_DIR=str(shared))
    assert "compiled kernels stay in memory" in warned
    assert not list(shared.rglob("*.nbi"))
    assert got["sum"] == run_warned(tmp_path / "cache")[0]["sum"]


def test_miss_names_the_key_part_that_differs(tmp_path):
    cache = KernelCache(str(tmp_path))
    parts = {"structure": "g1", "signature": "(f32,)", "backend": "numba_cpu", "versions": "v1"}
    cache.load(parts, "X = 1\n")
    other = KernelCache(str(tmp_path))
    entry = other.load(dict(parts, versions="v2"), "X = 2\n")
    assert not entry.hit and entry.miss_reason == "the versions differs from the cached entry"
    assert other.load(parts, "X = 1\n").hit
    assert other.info()["kernels"] == 2
    assert other.clear() == 2 and other.info()["kernels"] == 0


def test_key_changes_with_the_modules_kernels_call_into(tmp_path, monkeypatch):
    # numba's cache checks only the kernel's own file: a fix in a helper module must change the key.
    from jitlab.backends.kernel_cache import support_hash
    from jitlab.backends.numba_cpu.kernels import SUPPORT_MODULES, key_parts_for

    helper = tmp_path / "kernel_support_mod.py"
    helper.write_text("def f(x):\n    return x + 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = support_hash("kernel_support_mod")
    helper.write_text("def f(x):\n    return x + 2\n")
    support_hash.cache_clear()
    assert support_hash("kernel_support_mod") != before
    assert key_parts_for("g", "", "src")["support"] == support_hash(*SUPPORT_MODULES)


def test_the_key_covers_every_module_the_kernels_reach():
    # library.conv2d_nb reads conv_operands.conv_views: a module imported by a listed one (within the
    # package) is code a cached kernel may run, so it must be in the key as well
    import ast
    import importlib

    from jitlab.backends.numba_cpu.kernels import SUPPORT_MODULES

    listed = set(SUPPORT_MODULES)
    for name in SUPPORT_MODULES:
        module = importlib.import_module(name)
        tree = ast.parse(open(module.__file__).read())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                assert f"{module.__package__}.{node.module}" in listed, (name, node.module)

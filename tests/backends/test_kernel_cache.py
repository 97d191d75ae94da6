"""The compile cache: reuse across processes, safety against corrupt, foreign or shared folders."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jitlab as jl
from jitlab.runtime.kernel_cache import KernelCache

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


def run_process(cache_dir):
    env = dict(os.environ, JITLAB_CACHE_DIR=str(cache_dir), PYTHONPATH=os.getcwd())
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=True)
    import json

    return json.loads(out.stdout.strip().splitlines()[-1])


def test_second_process_loads_kernels_from_disk(tmp_path):
    first = run_process(tmp_path)
    second = run_process(tmp_path)
    assert not first["hit"] and first["reason"] == "no entry for this group structure yet"
    assert second["hit"] and second["sum"] == first["sum"]


def test_two_processes_compiling_at_once_both_succeed(tmp_path):
    env = dict(os.environ, JITLAB_CACHE_DIR=str(tmp_path), PYTHONPATH=os.getcwd())
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT], env=env, stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    outputs = [p.communicate()[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs


def test_corrupt_entry_is_rewritten_with_a_warning(tmp_path, monkeypatch):
    monkeypatch.setenv("JITLAB_CACHE_DIR", str(tmp_path))
    run_process(tmp_path)
    (entry,) = [p for p in tmp_path.iterdir() if p.suffix == ".py"]
    entry.write_text(entry.read_text()[:120])                      # truncated
    x = np.linspace(-2, 2, 4096, dtype=np.float32).reshape(64, 64)
    with pytest.warns(RuntimeWarning, match="corrupt or foreign"):
        exe = jl.compile(jl.trace(lambda x: np.tanh(x * 2.0) - x.max(axis=1, keepdims=True), x), level="O1")
    assert exe.report.kernels[0].miss_reason == "the entry on disk was corrupt or foreign and was rewritten"
    expected = np.tanh(x * 2.0) - x.max(axis=1, keepdims=True)
    np.testing.assert_allclose(exe(x)[0], expected, rtol=1e-5, atol=1e-6)


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
    from jitlab.backends.numba_cpu.backend import SUPPORT_MODULES, _key_parts_for
    from jitlab.runtime.kernel_cache import support_hash

    helper = tmp_path / "kernel_support_mod.py"
    helper.write_text("def f(x):\n    return x + 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = support_hash("kernel_support_mod")
    helper.write_text("def f(x):\n    return x + 2\n")
    support_hash.cache_clear()
    assert support_hash("kernel_support_mod") != before
    assert _key_parts_for("g", "", "src")["support"] == support_hash(*SUPPORT_MODULES)

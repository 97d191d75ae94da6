"""`jitlab cache warm` compiles jitlab's helper functions into the numba cache later processes read,
so that a first compile after installing loads them; without it, the first compile says so in a
progress bar."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent("""
    import json
    import numpy as np
    import jitlab as jl
    import jitlab.progress
    jitlab.progress._interactive = lambda: True          # the bar as a notebook or terminal shows it
    x = np.linspace(-3, 3, 4096, dtype=np.float32).reshape(64, 64)
    got = jl.jit(lambda x: np.tanh(x) * 2.0)(x)
    np.testing.assert_allclose(got, np.tanh(x) * 2.0, rtol=1e-5, atol=1e-6)
    from jitlab.backends.numba_cpu.fastmath import TABLE
    stats = TABLE[("np.tanh", "", "float32")].fn.stats
    print(json.dumps({"hits": sum(stats.cache_hits.values()), "misses": sum(stats.cache_misses.values())}))
""")
BAR = "numba compiles jitlab's helpers once per install"


def run(command, tmp_path, cache: str):
    env = dict(os.environ, PYTHONPATH=os.getcwd(), NUMBA_CACHE_DIR=str(tmp_path / "numba"),
               JITLAB_CACHE_DIR=str(tmp_path / cache))
    done = subprocess.run([sys.executable, *command], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_the_helpers_a_first_compile_compiles_are_kept_for_the_next_process(tmp_path):
    cold = run(["-c", CHILD], tmp_path, "first")
    assert json.loads(cold.stdout.splitlines()[-1])["misses"] == 1 and BAR in cold.stderr
    again = run(["-c", CHILD], tmp_path, "second")         # a new process and kernel cache: the kernel compiles
    assert json.loads(again.stdout.splitlines()[-1]) == {"hits": 1, "misses": 0}
    # numba's cache holds this kernel's helpers though not the others `jitlab cache warm` compiles
    assert BAR not in again.stderr


@pytest.mark.slow
def test_a_warmed_numba_cache_serves_the_first_compile(tmp_path):
    """The bootstrap's order: `jitlab cache warm` in the new environment, then the first compile."""
    warm = run(["-m", "jitlab.cli", "cache", "warm"], tmp_path, "warm")
    assert str(tmp_path / "numba") in warm.stdout and "helper signatures" in warm.stdout
    first = run(["-c", CHILD], tmp_path, "first")
    assert json.loads(first.stdout.splitlines()[-1]) == {"hits": 1, "misses": 0}
    assert BAR not in first.stderr

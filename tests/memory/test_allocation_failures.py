"""An allocation the system refuses is an OutOfMemoryError naming the planned peak and the buffer,
never a raw MemoryError: O1's pool, O2's arena and an output buffer, each refused under an
address-space limit in a child process (the limit would hold this one too), with a call that
fits running afterwards."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent("""
    import json, resource, sys
    import numpy as np
    import jitlab as jl
    from jitlab.units import format_bytes

    level, program, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rng = np.random.default_rng(0)
    w1, b1 = rng.standard_normal((16, 32), dtype=np.float32), np.zeros(32, np.float32)
    w2, b2 = rng.standard_normal((32, 4), dtype=np.float32), np.zeros(4, np.float32)
    if program == "mlp":          # its hidden layer is a temporary: the pool's, or the arena's
        f = lambda x: np.maximum(x @ w1 + b1, 0) @ w2 + b2
    else:                         # one fused group: its result is the output buffer
        f = lambda x: np.tanh(x) * 2.0
    exe = jl.compile(jl.trace(f, jl.spec(("B", 16), np.float32)), level=level)
    small = rng.standard_normal((8, 16), dtype=np.float32)
    exe(small)
    x = np.ones((n, 16), np.float32)
    peak = exe.dry_run({"x": x.shape}).peak_bytes
    with open("/proc/self/status") as f_:
        vm = next(int(line.split()[1]) * 1024 for line in f_ if line.startswith("VmSize"))
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (vm + x.nbytes // 4, hard))     # less than any buffer the call needs
    try:
        exe(x)
        caught = None
    except Exception as e:
        caught = e
    resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
    np.testing.assert_allclose(exe(small)[0], f(small), rtol=1e-4, atol=1e-4)     # the executable still works
    print(json.dumps({"type": type(caught).__name__, "message": str(caught), "peak": format_bytes(peak),
                      "buffer": getattr(caught, "buffer", None), "is_jitlab": isinstance(caught, jl.JitlabError)}))
""")


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc/self/status")
@pytest.mark.parametrize("level, program, buffer", [
    ("O1", "mlp", "from the pool"),
    ("O2", "mlp", "the arena"),
    ("O1", "tanh", "output %"),
    pytest.param("O2", "tanh", "output %", marks=pytest.mark.slow),      # O1's output case at O2: one more child
])
def test_a_refused_allocation_is_an_out_of_memory_error_naming_peak_and_buffer(cache_dir, level, program, buffer):
    env = dict(os.environ, PYTHONPATH=os.getcwd(), JITLAB_CACHE_DIR=str(cache_dir))
    done = subprocess.run([sys.executable, "-c", CHILD, level, program, str(2_000_000)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["type"] == "OutOfMemoryError" and got["is_jitlab"], got
    assert f"the planned peak of {got['peak']}" in got["message"], got
    assert buffer in got["buffer"] and got["buffer"] in got["message"], got

"""Without a GPU or the simulator: target resolution, the error for target="cuda", no needless numba.cuda import."""

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import jitlab as jl
from jitlab.backends.numba_cuda import device

ROOT = Path(__file__).parent.parent.parent
needs_no_gpu = pytest.mark.skipif(device.available(), reason="a GPU is present: target='cuda' works here")


@needs_no_gpu
def test_target_cuda_without_gpu_says_how_to_enable_the_simulator():
    program = jl.trace(np.exp, np.ones(3, np.float32))
    with pytest.raises(jl.UnsupportedError, match="NUMBA_ENABLE_CUDASIM=1"):
        jl.compile(program, target="cuda")
    with pytest.raises(jl.UnsupportedError, match="target='cpu'"):
        jl.jit(np.exp, target="cuda")


@needs_no_gpu
def test_auto_target_is_cpu_without_gpu():
    f = jl.jit(lambda x: x + 1)
    f(np.ones(3, np.float32))
    assert f.last.target == "cpu"


@pytest.mark.skipif(any(os.path.exists(p) for p in device.DRIVER_FILES),
                    reason="an NVIDIA driver is present: target='auto' rightly asks numba.cuda for a GPU")
def test_cpu_work_does_not_import_numba_cuda():
    code = ("import sys, numpy as np, jitlab as jl\n"
            "f = jl.jit(lambda x: np.exp(x).sum(axis=0), target='cpu', progress=False)\n"
            "f(np.ones((3, 4), np.float32))\n"
            "jl.jit(lambda x: x + 1, progress=False)(np.ones(2, np.float32))\n"
            "assert 'numba.cuda' not in sys.modules, 'numba.cuda was imported'\n")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.skipif(any(os.path.exists(p) for p in device.DRIVER_FILES),
                    reason="an NVIDIA driver is present: a named CUDA module runs on it")
def test_a_cuda_module_named_alone_runs_under_the_simulator(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "JITLAB_TEST_GPU")}
    env.update(PYTHONPATH=str(ROOT), JITLAB_CACHE_DIR=str(tmp_path))
    test = "tests/cuda/test_kernels.py::test_elementwise_chain_is_one_grid_stride_kernel"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout[-3000:]


# the default run lowers each kernel kind on one float and one integer dtype (40 s); -m slow, on every
# dtype and with the larger bench programs too (80 s)
@pytest.mark.parametrize("quick", [True, pytest.param(False, marks=pytest.mark.slow)], ids=["quick", "all"])
def test_every_generated_kernel_lowers_to_ptx_with_its_barriers_intact(quick, tmp_path):
    # NVVM, not a GPU: `pip install "jitlab[ptx]"` (in the dev extra, so CI has it)
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "JITLAB_TEST_GPU")}
    env.update(PYTHONPATH=str(ROOT), JITLAB_CACHE_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-m", "jitlab.bench.cuda_selfcheck", "--ptx", "--random", "1",
                           *(["--quick"] if quick else [])], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=1200)
    if done.returncode == 3:
        pytest.skip(done.stdout.strip())
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    lowered = [line for line in done.stdout.splitlines() if line.startswith("PTX ok")]
    assert any(re.search(r"rows kernel, [1-9]\d* block barrier", line) for line in lowered)
    assert any("random" in line for line in lowered) and any("tile kernel" in line for line in lowered)
    # control flow's own kernels, from the loop bodies compiled as programs of their own
    assert {"induction", "np.dynamic_slice", "np.dynamic_update_slice", "np.concatenate"} <= {
        m.group(1) for m in (re.search(r"loop \w+: (\S+) kernel", line) for line in lowered) if m}

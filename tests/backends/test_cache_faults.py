"""A damaged file of the kernel cache is a warning and a rebuild in a new process, never a dead one.

Each kind of file the cache holds is cut short (to nothing, to a few bytes, to half, by one byte,
as a full disk or a killed writer leaves it) or has a byte flipped, in a cache that two processes
filled; a fresh process (a SIGBUS kills the process, so not this one) then compiles and runs the
same program. It must exit 0 with numpy's answer, having warned of the damage, and leave the file
whole again.
"""

import glob
import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass

import pytest

from jitlab.backends.cache_files import read_checked
from jitlab.runtime.executable_cache import _split

pytestmark = pytest.mark.xdist_group("cache-faults")     # its module fixture is made once, in one worker

CHILD = textwrap.dedent("""
    import warnings
    import numpy as np
    import jitlab as jl
    warnings.simplefilter("always")
    x = np.linspace(-3, 3, 4096, dtype=np.float32).reshape(64, 64)
    f = lambda x: np.mod(np.tanh(x * 2.0), 0.75) - x.max(axis=1, keepdims=True)
    got = jl.compile(jl.trace(f, x), level="O1")(x)[0]
    np.testing.assert_allclose(got, f(x), rtol=1e-5, atol=1e-5)
    print("right answer")
""")


def run_child(root: str, mode: str) -> subprocess.CompletedProcess:
    """CHILD in a new process on the cache at `root`: its kernel as a native library (`mode`
    "native") or as numba's cached dispatchers ("numba"); numba's own cache files under root/nb."""
    env = dict(os.environ, PYTHONPATH=os.getcwd(), JITLAB_CACHE_DIR=os.path.join(root, "jl"),
               NUMBA_CACHE_DIR=os.path.join(root, "nb"), JITLAB_EXECUTABLE_CACHE="1",
               JITLAB_NATIVE="1" if mode == "native" else "0")
    return subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=600)


@dataclass
class Kind:
    """A kind of cache file: its mode, where it is, what to delete so that the process reads it (a
    warm start reads no more than it needs), and whether reading it warns (a record nobody reads
    is only written again)."""

    mode: str
    pattern: str
    forces: tuple[str, ...] = ()
    read: bool = True


_HELPERS = "nb/*/scalar_semantics.*"               # numba's cache of jitlab's helper functions
_KERNEL_NUMBA = "nb/jl_*/numba_cpu_*"              # numba's cache of a generated kernel module
_LIBRARY = "jl/native/" + "[0-9a-f]" * 8 + "*.so"    # not the caller
_BUILD = ("jl/executables/*", _LIBRARY)     # what makes a process build the library again

KINDS = {
    "C caller library": Kind("native", "jl/native/caller-*.so"),
    "kernel library": Kind("native", _LIBRARY),
    "kernel library manifest": Kind("native", "jl/native/*.json", ("jl/executables/*",)),
    "C runtime object": Kind("native", "jl/native/runtime-*.o", _BUILD),
    "kernel library source": Kind("native", "jl/native/*.py", _BUILD, read=False),
    "executable cache entry": Kind("native", "jl/executables/*.pkl"),
    "kept kernels": Kind("native", "jl/executables/*.kernels"),
    "helpers' numba index": Kind("native", _HELPERS + ".nbi", _BUILD),
    "helpers' numba data": Kind("native", _HELPERS + ".nbc", _BUILD),
    "kernel module": Kind("numba", "jl/numba_cpu_*.py"),
    "kernel module key": Kind("numba", "jl/numba_cpu_*.json"),
    "kernel module's numba index": Kind("numba", _KERNEL_NUMBA + ".nbi"),
    "kernel module's numba data": Kind("numba", _KERNEL_NUMBA + ".nbc"),
}
DAMAGES = ["half", "one byte short", "a byte flipped", "empty", "3 bytes", "last byte flipped"]


def damage(path: str, how: str) -> None:
    with open(path, "rb") as f:
        data = bytearray(f.read())
    cut = {"empty": 0, "3 bytes": 3, "half": len(data) // 2, "one byte short": len(data) - 1}
    if how in cut:
        data = data[:cut[how]]
    else:
        data[len(data) // 2 if how == "a byte flipped" else -1] ^= 0x5A
    with open(path, "wb") as f:
        f.write(bytes(data))


def whole(path: str) -> bool:
    """Whether the file at `path` is whole by the check its reader makes."""
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".pkl"):
        _split(data)
    elif path.endswith(".kernels") or path.endswith(".py"):
        return len(data) > 100
    else:
        read_checked(path)
    return True


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """A cache filled by a cold and a warm run per mode, and the folder a test restores it to (the
    same path: numba keys a generated module's cache files by its folder's path)."""
    base = tmp_path_factory.mktemp("faults")
    made = {}
    for mode in ("native", "numba"):
        work = str(base / f"work-{mode}")
        if made:        # jitlab's helpers as the native run compiled them into numba's cache: not compiled twice
            shutil.copytree(os.path.join(made["native"][1], "nb"), os.path.join(work, "nb"), symlinks=True)
        for _ in range(2):
            done = run_child(work, mode)
            assert done.returncode == 0, done.stderr
        shutil.copytree(work, str(base / f"pristine-{mode}"), symlinks=True)
        made[mode] = (str(base / f"pristine-{mode}"), work)
    return made


def check_fault(pristine, kind_name: str, how: str) -> None:
    kind = KINDS[kind_name]
    source, work = pristine[kind.mode]
    shutil.rmtree(work)
    shutil.copytree(source, work, symlinks=True)
    targets = sorted(glob.glob(os.path.join(work, kind.pattern)))
    assert targets, f"the cache holds no {kind_name} ({kind.pattern})"
    for pattern in kind.forces:
        for path in glob.glob(os.path.join(work, pattern)):
            if path not in targets:
                os.unlink(path)
    for path in targets:
        damage(path, how)
    done = run_child(work, kind.mode)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-3000:]}"
    assert "right answer" in done.stdout
    if kind.read:
        for path in targets:
            assert os.path.basename(path) in done.stderr and "CacheWarning" in done.stderr, done.stderr[-3000:]
    assert all(whole(path) for path in targets)


@pytest.mark.parametrize("kind_name", list(KINDS))
def test_a_damaged_cache_file_is_a_warning_and_a_rebuild(pristine, kind_name):
    """Every kind of file, each cut or flipped at a place that rotates across the kinds; shared
    libraries cut to half, which the loader maps past the file's end (SIGBUS before they were checked)."""
    how = "half" if kind_name.endswith("library") else DAMAGES[list(KINDS).index(kind_name) % len(DAMAGES)]
    check_fault(pristine, kind_name, how)


@pytest.mark.slow
@pytest.mark.parametrize("how", DAMAGES)
@pytest.mark.parametrize("kind_name", list(KINDS))
def test_every_damage_of_every_cache_file_is_survived(pristine, kind_name, how):
    check_fault(pristine, kind_name, how)

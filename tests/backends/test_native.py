"""Native kernel libraries (backends/native.py, numba_cpu/native_build.py): split loops equal numpy,
kernels that need numba's runtime stay numba dispatchers and say why, damaged or shared files are
never loaded, and a warm start runs without importing numba."""

import concurrent.futures
import ctypes
import functools
import json
import math
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jitlab as jl
from jitlab.backends import native, native_caller
from jitlab.backends.cache_files import read_checked
from jitlab.backends.kernel_cache import KernelCache
from jitlab.backends.numba_cpu import conv_native, native_build
from jitlab.backends.numba_cpu.codegen import GeneratedKernel
from jitlab.backends.numba_cpu.native_build import RUNTIME_C, compiler, kernel_chunk, split_loop
from tests.autodiff.checks import op_fn
from tests.budget import first_fast

pytestmark = pytest.mark.skipif(compiler() is None, reason="no C compiler to link native libraries")

RNG = np.random.default_rng(7)


def compile_o1(fn, *args, cache_dir):
    return jl.compile(jl.trace(fn, *args), level="O1", cache=KernelCache(str(cache_dir)), executable_cache=False)


# One program per way codegen lays out its parallel loop, each past the parallel threshold.
SPLIT_CASES = {
    "flat elementwise": (lambda x: np.tanh(x) * 2.0 + 1.0, [(300, 200)]),
    "rows with a reduction": (lambda x: np.exp(x - x.max(axis=1, keepdims=True)) / 3.0, [(256, 300)]),
    "flattened outer dims": (lambda x, b: x * b + 1.0, [(64, 32, 32), (32, 1)]),
    "whole reduction then broadcast": (lambda x: x - x.mean(), [(300, 200)]),
    "3-d rows": (lambda x: x / x.sum(axis=2, keepdims=True), [(16, 40, 60)]),
}


@pytest.mark.parametrize("name", sorted(SPLIT_CASES))
def test_a_kernel_split_over_threads_equals_numpy(name, tmp_path, monkeypatch):
    fn, shapes = SPLIT_CASES[name]
    monkeypatch.setattr(native, "threads", lambda: 3)        # an odd split: parts of unequal length
    args = [RNG.random(s, dtype=np.float32) + 0.5 for s in shapes]
    exe = compile_o1(fn, *args, cache_dir=tmp_path)
    (kernel,) = exe.report.kernels
    assert "native library, split over threads" in kernel.choice
    np.testing.assert_allclose(exe(*args)[0], fn(*args), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("through", ["C caller", "cffi"])
def test_both_callers_run_a_kernel_and_refuse_a_mismatched_call(through, tmp_path, monkeypatch):
    if through == "cffi":
        monkeypatch.setattr(native, "caller", lambda: None)
    elif native_caller.caller() is None:
        pytest.fail(native_caller.why_not)        # a machine with cc and Python's headers builds it
    monkeypatch.setattr(native, "threads", lambda: 2)
    x = RNG.random((300, 200), dtype=np.float32)
    exe = compile_o1(lambda x: np.tanh(x) + 1.0, x, cache_dir=tmp_path)
    library = exe._runner.steps[0].kernel.run.library
    assert (library._call is not None) == (through == "C caller")
    np.testing.assert_allclose(exe(x)[0], np.tanh(x) + 1.0, rtol=1e-6, atol=1e-6)
    out = np.empty_like(x)
    x, out = x.ravel(), out.ravel()                        # the kernel runs over the flat arrays
    for wrong in ([x.astype(np.float64), out], [x.reshape(300, 200), out], [x], [x.astype(x.dtype.newbyteorder()), out]):
        with pytest.raises(jl.JitlabError, match="a jitlab bug"):
            library.call(wrong, (x.size,), False)
    if through == "C caller":      # cffi's from_buffer refuses it with a BufferError of its own
        with pytest.raises(jl.JitlabError, match="not C-contiguous"):
            library.call([np.repeat(x, 2)[::2], out], (x.size,), False)


def test_back_to_back_split_calls_never_run_a_part_of_an_earlier_call(tmp_path, monkeypatch):
    # a worker that wakes after its call ended must take no part of it, nor of the next one: each
    # call's parts write their own answer, so a stale or doubled part would show in the results
    monkeypatch.setattr(native, "threads", lambda: 2)
    x = RNG.random((300, 200), dtype=np.float32)
    exe = compile_o1(lambda x, s: x * s + 1.0, x, np.float32(1), cache_dir=tmp_path)
    assert "split over threads" in exe.report.kernels[0].choice
    for k in range(400):
        s = np.float32(k % 7 - 3)
        np.testing.assert_allclose(exe(x, s)[0], x * s + np.float32(1.0), rtol=1e-6, atol=1e-6)


def test_split_kernels_called_from_several_threads_and_a_forked_child_are_right(tmp_path, monkeypatch):
    # the C caller's threads serve one split call at a time; the others run their parts inline,
    # and a forked child, which has none of its parent's threads, starts its own
    monkeypatch.setattr(native, "threads", lambda: 3)
    xs = [RNG.random((256, 300), dtype=np.float32) + k for k in range(4)]
    def fn(x):
        return np.exp(x - x.max(axis=1, keepdims=True)) / 3.0

    copies = [compile_o1(fn, xs[0], cache_dir=tmp_path) for _ in xs]
    exe = copies[0]
    (kernel,) = exe.report.kernels
    assert "split over threads" in kernel.choice
    library = exe._runner.steps[0].kernel.run.library
    expected = [fn(x) for x in xs]

    def run(k):
        return [copies[k](xs[k])[0] for _ in range(20)]

    with concurrent.futures.ThreadPoolExecutor(4) as threads:
        for k, results in enumerate(threads.map(run, range(4))):
            for got in results:
                np.testing.assert_allclose(got, expected[k], rtol=1e-5)
    if library._call is not None and hasattr(os, "fork"):
        pid = os.fork()
        if pid == 0:
            try:
                os._exit(0 if np.allclose(exe(xs[1])[0], expected[1], rtol=1e-5) else 1)
            finally:
                os._exit(2)
        for _ in range(600):           # a child stuck waiting for its parent's threads would hang here
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.1)
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        assert done and os.waitstatus_to_exitcode(status) == 0


def test_split_loop_takes_exactly_one_prange():
    one = "def k_par(a0, n0):\n    for i0 in prange(n0):\n        a0[i0] = 1"
    assert split_loop(one, "k_par").splitlines()[:4] == [
        "def k_chunk(a0, n0, part_, parts_):", "    for i0_ in range(part_ * (n0) // parts_, (part_ + 1) * (n0) // parts_):",
        "        i0 = nonneg(i0_)", "        a0[i0] = 1"]
    two = one + "\n    for i1 in prange(n0):\n        a0[i1] = 2"
    assert split_loop(two, "k_par") is None
    writes = GeneratedKernel(par=one, seq="def k_seq(a0, n0):\n    pass", plan=None, flat=True, params=[])
    assert kernel_chunk(writes) == ("def k_chunk(a0, n0):\n    pass", False)      # a chain of writes: never split


def test_a_kernel_that_raises_stays_in_numba_and_says_why(tmp_path):
    def scatter(a, idx, v):
        out = a.copy()
        out[idx] = v
        return out

    a, idx, v = np.zeros(16, np.float32), np.array([3, 5]), np.ones(2, np.float32)
    exe = compile_o1(scatter, a, idx, v, cache_dir=tmp_path)
    assert any("numba dispatchers (no native library: its code raises errors" in k.choice for k in exe.report.kernels)
    np.testing.assert_array_equal(exe(a, idx, v)[0], scatter(a, idx, v))
    with pytest.raises(jl.InputError):
        exe(a, np.array([3, 99]), v)


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_the_same_code_for_another_dtype_gets_its_own_library(level, tmp_path):
    # O2's segment source names no parameter type: a float64 build once served a float32 program,
    # whose 0-d result went into a float64 copy and came back unwritten
    cache = KernelCache(str(tmp_path))
    for dtype in (np.float64, np.float32, np.float64):
        x = np.asarray(0.25, dtype)
        exe = jl.compile(jl.trace(lambda x: (-x, x), x), level=level, cache=cache, executable_cache=False)
        got = exe(x)
        assert got[0].dtype == dtype and got[0] == -x


@pytest.mark.parametrize("strides,pads,dilations,groups", first_fast(
    ((2, 2), (0, 1, 1, 0), (1, 1), 2), ((1, 1), (1, 1, 1, 1), (1, 1), 1), ((1, 2), (2, 2, 2, 2), (2, 2), 1),
    ((1, 1), (0, 0, 0, 0), (1, 1), 1), unpack=True))
def test_convolutions_with_native_epilogues_equal_o0(strides, pads, dilations, groups, run_kernels):
    x = RNG.standard_normal((2, 4, 40, 40), dtype=np.float32)
    w = RNG.standard_normal((6, 4 // groups, 3, 3), dtype=np.float32)
    conv = op_fn("np.conv2d", strides=strides, pads=pads, dilations=dilations, groups=groups)
    program = jl.trace(lambda x, w: np.maximum(conv(x, w), 0.0), x, w)
    # the run's kernel cache: the convolution library is built once for the tests that only use it
    exe = jl.compile(program, level="O1", cache=KernelCache(run_kernels), executable_cache=False)
    assert exe.report.kernels and all("im2col + BLAS conv, native library" in k.choice for k in exe.report.kernels)
    np.testing.assert_allclose(exe(x, w)[0], jl.compile(program, level="O0")(x, w)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.slow      # numba compiles its Winograd and im2col convolutions (20 s on CI)
def test_without_native_libraries_convolutions_run_numbas_threads_and_say_why(tmp_path, monkeypatch):
    monkeypatch.setenv(native_build.ENV_VAR, "0")
    x = RNG.standard_normal((1, 4, 16, 16), dtype=np.float32)
    w, v = RNG.standard_normal((2, 4, 4, 3, 3), dtype=np.float32)
    winograd, im2col = op_fn("np.conv2d", pads=(1, 1, 1, 1)), op_fn("np.conv2d", strides=(2, 2))
    program = jl.trace(lambda x: im2col(winograd(x, w), v), x)
    exe = jl.compile(program, level="O1", cache=KernelCache(str(tmp_path)), executable_cache=False)
    choices = [k.choice for k in exe.report.kernels]
    assert len(choices) == 2 and all("numba's threads (native kernels are off" in c for c in choices)
    assert any("Winograd" in c for c in choices)
    np.testing.assert_allclose(exe(x)[0], jl.compile(program, level="O0")(x)[0], rtol=1e-4, atol=1e-4)
    assert not list((tmp_path / "native").glob("*.so"))


def test_where_no_child_can_start_the_compile_builds_the_convolution_library_itself(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python"))     # starting it is an OSError
    x, w = RNG.standard_normal((1, 3, 12, 12), dtype=np.float32), RNG.standard_normal((5, 3, 3, 3), dtype=np.float32)
    conv = op_fn("np.conv2d", strides=(2, 2))
    program = jl.trace(lambda x, w: conv(x, w), x, w)
    exe = jl.compile(program, level="O1", cache=KernelCache(str(tmp_path)), executable_cache=False)
    assert "im2col + BLAS conv, native library" in exe.report.kernels[0].choice
    np.testing.assert_allclose(exe(x, w)[0], jl.compile(program, level="O0")(x, w)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("level", first_fast("O2", "O1"))
def test_where_the_passes_come_from_the_executable_cache_the_kernels_start_the_library_build(level, tmp_path,
                                                                                             monkeypatch):
    # Backend.prepare runs before passes that run; with the kernels to compile again and the
    # library gone since, prepare_kernels (O1's groups, O2's kernel calls) starts its build in a
    # child before they compile
    x = RNG.standard_normal((1, 32, 28, 28), dtype=np.float32)
    w = RNG.standard_normal((32, 32, 3, 3), dtype=np.float32)
    conv = op_fn("np.conv2d")                               # heavy enough for an O2 kernel call
    program = jl.trace(lambda x: np.maximum(conv(x, w), 0.0), x)
    cache = KernelCache(str(tmp_path))
    first = jl.compile(program, level=level, cache=cache, executable_cache=True)
    os.unlink(first.report.executable_cache.path + ".kernels")
    dtype = np.dtype(np.float32)
    os.unlink(native_build.located(conv_native._entries(dtype), conv_native._parts(dtype), cache)[1])
    started, start = [], conv_native.start

    def recording(dtype, cache):
        before = set(conv_native._building)
        start(dtype, cache)
        started.extend(set(conv_native._building) - before)

    monkeypatch.setattr(conv_native, "start", recording)
    exe = jl.compile(program, level=level, cache=cache, executable_cache=True)
    assert exe.report.executable_cache.hit and len(started) == 1 and not conv_native._building
    assert any("im2col + BLAS conv, native library" in k.choice for k in exe.report.kernels)
    np.testing.assert_allclose(exe(x)[0], jl.compile(program, level="O0")(x)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", first_fast(np.float32, np.float64))
def test_winograd_in_the_native_library_equals_o0(dtype, run_kernels):
    x = RNG.standard_normal((2, 5, 16, 14)).astype(dtype)          # 56 tiles: Winograd's
    w = RNG.standard_normal((7, 5, 3, 3)).astype(dtype) * 10        # a weight: its transform is kept
    conv = op_fn("np.conv2d", pads=(1, 1, 1, 1))
    program = jl.trace(lambda x: conv(x, w) + 1.0, x)
    exe = jl.compile(program, level="O1", cache=KernelCache(run_kernels), executable_cache=False)
    (kernel,) = exe.report.kernels
    assert "Winograd F(2x2,3x3) conv, 16 BLAS calls, native library" in kernel.choice
    reference = jl.compile(program, level="O0")
    for k in range(3):                                            # the second call reuses the filter's transform
        np.testing.assert_allclose(exe(x * k)[0], reference(x * k)[0], rtol=1e-4, atol=1e-3)
    assert not conv_native._building, "a child build was never waited for"


SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import jitlab as jl
    x = np.linspace(-2, 2, 64 * 600, dtype=np.float32).reshape(64, 600)
    exe = jl.compile(jl.trace(lambda x: np.tanh(x * 2.0) - x.max(axis=1, keepdims=True), x), level=sys.argv[1])
    out = exe(x)[0]
    k = exe.report.kernels[-1]
    print(json.dumps({"hit": k.cache_hit, "choice": k.choice, "numba": "numba" in sys.modules,
                      "kept": exe.report.stats.get("kernels_from_executable_cache", 0), "sum": float(out.sum())}))
""")


CONV_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import jitlab as jl
    from tests.autodiff.checks import op_fn
    rng = np.random.default_rng(0)
    # each conv heavy enough that O2 calls its kernel rather than inline it into a segment (in numba)
    x = rng.standard_normal((1, 32, 28, 28), dtype=np.float32)
    w, v = rng.standard_normal((2, 32, 32, 3, 3), dtype=np.float32)
    winograd, im2col = op_fn("np.conv2d", pads=(1, 1, 1, 1)), op_fn("np.conv2d")
    exe = jl.compile(jl.trace(lambda x: im2col(np.maximum(winograd(x, w), 0.0), v), x), level=sys.argv[1])
    out = exe(x)[0]
    print(json.dumps({"hit": all(k.cache_hit for k in exe.report.kernels), "numba": "numba" in sys.modules,
                      "kept": exe.report.stats.get("kernels_from_executable_cache", 0), "sum": float(out.sum())}))
""")


def run_process(cache_dir, level="O1", script=SCRIPT):
    env = dict(os.environ, JITLAB_CACHE_DIR=str(cache_dir), PYTHONPATH=os.getcwd(), JITLAB_EXECUTABLE_CACHE="1")
    env.pop("JITLAB_NATIVE", None)
    out = subprocess.run([sys.executable, "-c", script, level], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("script", first_fast("a loop nest", "convolutions"))
@pytest.mark.parametrize("level", ["O1", "O2"])
def test_a_warm_start_runs_without_importing_numba(tmp_path, level, script):
    script = {"a loop nest": SCRIPT, "convolutions": CONV_SCRIPT}[script]
    cold, warm = run_process(tmp_path, level, script), run_process(tmp_path, level, script)
    assert cold["numba"] and not cold["kept"]
    assert not warm["numba"] and warm["kept"] >= 1 and warm["hit"]
    assert warm["sum"] == cold["sum"]


def libraries(cache_dir):
    return sorted((cache_dir / "native").glob("*.so"))


@pytest.mark.slow      # tests/backends/test_cache_faults.py damages a kernel library by default
def test_a_damaged_or_deleted_library_is_built_again(tmp_path):
    expected = run_process(tmp_path)["sum"]
    for lib in libraries(tmp_path):
        lib.write_bytes(lib.read_bytes()[:100])           # truncated
    damaged = run_process(tmp_path)
    assert damaged["numba"] and not damaged["kept"] and damaged["sum"] == expected
    for lib in libraries(tmp_path):
        lib.unlink()
    assert run_process(tmp_path)["sum"] == expected
    assert libraries(tmp_path)


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")
def test_a_native_folder_others_may_write_is_never_loaded(tmp_path):
    expected = run_process(tmp_path)["sum"]
    (tmp_path / "native").chmod(0o777)
    got = run_process(tmp_path)
    assert "no native library" in got["choice"] and "writable by other users" in got["choice"]
    assert got["sum"] == expected


def kept_compile(cache_dir, x):
    exe = jl.compile(jl.trace(lambda x: np.tanh(x) * 3.0 - x.sum(axis=1, keepdims=True), x), level="O1",
                     cache=KernelCache(str(cache_dir)), executable_cache=True)
    np.testing.assert_allclose(exe(x)[0], np.tanh(x) * 3.0 - x.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-5)
    return exe.report.stats.get("kernels_from_executable_cache", 0)


def test_kept_kernels_that_are_damaged_or_writable_by_others_are_compiled_again(tmp_path):
    x = RNG.random((40, 30), dtype=np.float32)
    assert kept_compile(tmp_path, x) == 0 and kept_compile(tmp_path, x) == 1
    (kept,) = (tmp_path / "executables").glob("*.kernels")
    kept.write_bytes(kept.read_bytes()[:-50] + bytes(50))
    assert kept_compile(tmp_path, x) == 0              # garbled: compiled again, and kept anew
    assert kept_compile(tmp_path, x) == 1
    kept.chmod(0o666)
    assert kept_compile(tmp_path, x) == 0              # another user could have written it: never unpickled


def test_registering_the_backends_imports_no_numba():
    code = ("import sys, jitlab as jl; from jitlab.backends.base import available_targets, backend_for_target; "
            "backend_for_target('cpu'); available_targets(); print('numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=os.getcwd()),
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_library_that_cannot_be_built_is_not_tried_again(tmp_path, monkeypatch):
    links = []

    def failing_link(entries, path):
        links.append(path)
        raise native_build.BuildError("its code calls numba_something, part of numba's runtime")

    monkeypatch.setattr(native_build, "_link", failing_link)
    x = RNG.standard_normal((4, 5), dtype=np.float32)
    program = jl.trace(lambda x: np.maximum(x, 0.0) * 2.0, x)
    records = []
    for _ in range(2):
        exe = jl.compile(program, level="O2", cache=KernelCache(str(tmp_path)), executable_cache=False)
        np.testing.assert_allclose(exe(x)[0], np.maximum(x, 0.0) * 2.0, rtol=1e-6)
        records.append(exe.report.kernels[0].choice)
    failed = [json.loads(read_checked(str(p))) for p in (tmp_path / "native").glob("*.json")]     # checked files
    assert len(links) == 1 and any("numba_something" in m.get("failed", "") for m in failed)
    assert "numba dispatchers" in records[0] and records[0] == records[1]


def test_a_segment_with_a_convolution_stays_in_numba_without_trying_a_build(tmp_path):
    conv = op_fn("np.conv2d", pads=(1, 1, 1, 1))       # a small conv in an O2 segment runs numba's threads
    x, w = RNG.standard_normal((1, 2, 6, 6), dtype=np.float32), RNG.standard_normal((3, 2, 3, 3), dtype=np.float32)
    program = jl.trace(lambda x, w: np.maximum(conv(x, w), 0.0) * 2.0, x, w)
    exe = jl.compile(program, level="O2", cache=KernelCache(str(tmp_path)), executable_cache=False)
    np.testing.assert_allclose(exe(x, w)[0], jl.compile(program, level="O0")(x, w)[0], rtol=1e-5, atol=1e-5)
    assert "a segment runs a convolution" in exe.report.kernels[0].choice
    assert not list((tmp_path / "native").glob("*.json"))


@functools.cache
def runtime_library(folder: str) -> ctypes.CDLL:
    source = os.path.join(folder, "runtime.c")
    with open(source, "w") as f:      # its functions exported, to be called from here
        f.write(RUNTIME_C.replace('#define LOCAL __attribute__((visibility("hidden")))', "#define LOCAL"))
    subprocess.run([compiler(), "-O1", "-shared", "-fPIC", source, "-o", source[:-2] + ".so"], check=True)
    return ctypes.CDLL(source[:-2] + ".so")


def split_or_merge(dims: list[int], draw) -> list[int]:
    """A new shape of the same size: runs of axes merged, axes split, axes of length 1 put in."""
    out = []
    for d in dims:
        factors = [f for f in range(2, d) if d % f == 0]
        if factors and draw(st.booleans()):
            f = draw(st.sampled_from(factors))
            out += [f, d // f]
        elif out and draw(st.booleans()):
            out[-1] *= d
        else:
            out.append(d)
        if draw(st.booleans()):
            out.insert(draw(st.integers(0, len(out))), 1)
    return out


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_the_runtime_reshape_views_exactly_what_numpy_views(data, tmp_path_factory):
    # numba's arena slices call this for every reshape: a wrong stride is a wrong answer
    lib = runtime_library(str(tmp_path_factory.getbasetemp()))
    dims = data.draw(st.lists(st.integers(0, 6), min_size=1, max_size=4))
    steps = [data.draw(st.sampled_from([1, 1, 2])) for _ in dims]     # some axes strided
    full = [d * s for d, s in zip(dims, steps)]
    a = np.arange(math.prod(full), dtype=np.float32).reshape(full)[tuple(slice(None, None, s) for s in steps)]
    if data.draw(st.booleans()) and a.ndim > 1:
        a = a.swapaxes(0, a.ndim - 1)
    new = split_or_merge(list(a.shape), data.draw) if a.size else data.draw(st.sampled_from([[0], [0, 3], [2, 0]]))
    intp = ctypes.c_ssize_t
    newstrides = (intp * len(new))()
    ok = lib.numba_attempt_nocopy_reshape(
        intp(a.ndim), (intp * a.ndim)(*a.shape), (intp * a.ndim)(*a.strides), intp(len(new)), (intp * len(new))(*new),
        newstrides, intp(a.itemsize), ctypes.c_int(0))
    try:
        expected = np.reshape(a, new, copy=False)
    except ValueError:
        assert not ok, (a.shape, a.strides, new)
        return
    assert ok, (a.shape, a.strides, new)
    view = np.lib.stride_tricks.as_strided(a, new, tuple(newstrides))
    np.testing.assert_array_equal(view, expected)

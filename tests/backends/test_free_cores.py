"""Large matrix products run on the cores other processes leave free (issue 33 item 9): the gauge
that measures them, and O1's and O2's products run on that many BLAS threads, against numpy."""

import ctypes
import subprocess
import sys
import time

import numpy as np
import pytest

import jitlab as jl
from jitlab.backends.numba_cpu import cores, numpy_blas
from jitlab.backends.numba_cpu.blas import gemm
from jitlab.backends.numba_cpu.numpy_blas import FREE_THREADS, addresses

needs_thread_control = pytest.mark.skipif(numpy_blas._thread_count_functions() is None,
                                          reason="numpy's BLAS is not scipy-openblas: its threads cannot be set")


def blas_thread_count() -> int:
    return numpy_blas._thread_count_functions()[0]()


@pytest.mark.parametrize("busy,own,seconds,expected", [
    (0.1, 0.1, 1.0, 2),        # only this process ran
    (2.0, 1.0, 1.0, 1),        # another process held one core all along
    (2.0, 1.4, 1.0, 1),        # ... sharing a core with one of ours
    (1.3, 1.0, 1.0, 2),        # a light job beside us: under half a core
    (4.0, 0.0, 1.0, 1),        # everything busy: still one thread
    (0.0, 0.5, 1.0, 2),        # /proc/stat's ticks behind process_time's
])
def test_free_cores_subtracts_this_process_from_the_machines_busy_time(busy, own, seconds, expected):
    assert cores.free_cores(2, busy, own, seconds) == expected


def write_stat(path, ticks):
    path.write_text("cpu  0 0 0 0 0 0 0 0 0 0\n"
                    + "".join(f"cpu{c} {t} 0 0 1000 0 0 0 0 0 0\n" for c, t in enumerate(ticks)) + "intr 0\n")


def test_gauge_reads_the_interval_since_its_last_sample(tmp_path, monkeypatch):
    clock = {"wall": 100.0, "own": 5.0}
    monkeypatch.setattr(cores.time, "monotonic", lambda: clock["wall"])
    monkeypatch.setattr(cores.time, "process_time", lambda: clock["own"])
    monkeypatch.setattr(cores, "allowed_cpus", lambda: [0, 1])
    stat = tmp_path / "stat"
    write_stat(stat, [0, 0])
    gauge = cores.CoreGauge(str(stat))
    assert gauge() == 2                              # no interval yet: every core counts
    tick = 1 / cores._TICK
    clock["wall"] += 1.0
    clock["own"] += 1.0                              # we ran one core; cpu1 spun for someone else
    write_stat(stat, [round(1.0 / tick), round(1.0 / tick)])
    assert gauge() == 1
    write_stat(stat, [round(1.5 / tick), round(2.0 / tick)])
    clock["wall"] += cores.INTERVAL / 2              # too soon: the last answer stands
    assert gauge() == 1
    clock["wall"] += 1.0 - cores.INTERVAL / 2
    clock["own"] += 1.5                              # the other process stopped
    assert gauge() == 2


def test_gauge_counts_every_core_where_proc_stat_is_missing(tmp_path, monkeypatch):
    monkeypatch.setattr(cores, "INTERVAL", 0.0)
    gauge = cores.CoreGauge(str(tmp_path / "absent"))
    assert gauge() == len(cores.allowed_cpus())


@pytest.mark.skipif(len(cores.allowed_cpus()) < 2, reason="one core: there is no core to find busy")
def test_gauge_sees_every_core_busy_beside_spinning_processes(monkeypatch):
    monkeypatch.setattr(cores, "INTERVAL", 0.0)
    n = len(cores.allowed_cpus())
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        time.sleep(0.5)
        gauge = cores.CoreGauge()
        time.sleep(0.5)
        assert gauge() < n
    finally:
        for p in spinners:
            p.kill()
            p.wait()


@pytest.fixture
def one_free_core(monkeypatch):
    """The gauge says one core is free, whatever the machine does."""
    monkeypatch.setattr(numpy_blas, "_gauge", lambda: lambda: 1)
    measured = addresses()[FREE_THREADS]
    yield
    addresses()[FREE_THREADS] = measured


class CountingThreads:
    """OpenBLAS's thread count get and set as compiled code calls them through `blas`'s addresses,
    standing in for the real ones: the count starts at `start` and every set is recorded."""

    def __init__(self, blas: np.ndarray, start: int) -> None:
        self.count, self.sets, self.blas = start, [], blas
        self._get = ctypes.CFUNCTYPE(ctypes.c_int)(lambda: self.count)
        self._set = ctypes.CFUNCTYPE(None, ctypes.c_int)(self._record)
        self.before = blas[2:4].copy()
        blas[2:4] = [ctypes.cast(f, ctypes.c_void_p).value for f in (self._get, self._set)]

    def _record(self, n: int) -> None:
        self.count = n
        self.sets.append(n)

    def restore(self) -> None:
        self.blas[2:4] = self.before


def mlp(x, w1, w2):
    return np.maximum(x @ w1, 0.0) @ w2


def mlp_inputs():
    rng = np.random.default_rng(3)
    return [rng.standard_normal(s).astype(np.float32) / 16 for s in ((64, 256), (256, 512), (512, 128))]


@needs_thread_control
def test_o1_runs_a_large_product_on_the_free_cores(one_free_core, monkeypatch):
    from jitlab.backends.numba_cpu import contraction

    seen, matmul = [], np.matmul

    def spy(a, b, out=None):
        seen.append(blas_thread_count())
        return matmul(a, b, out=out)

    args = mlp_inputs()
    exe = jl.compile(jl.trace(mlp, *args), level="O1")
    monkeypatch.setattr(contraction.np, "matmul", spy)
    (got,) = exe(*args)
    monkeypatch.undo()
    np.testing.assert_allclose(got, mlp(*args), rtol=1e-4, atol=1e-5)
    assert seen and set(seen) == {1}


@needs_thread_control
@pytest.mark.parametrize("shape,free,sets", [
    ((300, 200, 100), 1, [1, 2]),       # large: on the free core, then the count put back
    ((300, 200, 100), 2, []),           # every core free: OpenBLAS's own count
    ((300, 200, 100), 64, []),          # never more threads than OpenBLAS has
    ((30, 20, 10), 2, [1, 2]),          # small: on one thread whatever is free
])
def test_compiled_products_set_the_free_threads_and_put_the_count_back(shape, free, sets):
    m, k, n = shape
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    blas = addresses().copy()
    blas[FREE_THREADS] = free
    threads = CountingThreads(blas, 2)
    out = np.full((m, n), np.nan, np.float32)
    gemm(blas, a, b, out, False, False)
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)
    assert threads.sets == sets and threads.count == 2


@needs_thread_control
def test_o2_runs_its_large_products_on_the_free_cores(one_free_core):
    """A symbolic batch keeps the products inside O2's compiled segment (a static product this
    large is a call from Python, O1's Matmul), where blas.gemm_cblas sets the threads."""
    args = mlp_inputs()
    f = jl.jit(mlp, level="O2", dynamic={"x": {0: "B"}})
    threads = CountingThreads(addresses(), 2)
    try:
        for _ in range(2):          # the first call and the fast path of the calls after it
            np.testing.assert_allclose(f(*args), mlp(*args), rtol=1e-4, atol=1e-5)
            assert threads.sets == [1, 2, 1, 2] and threads.count == 2
            threads.sets.clear()
    finally:
        threads.restore()

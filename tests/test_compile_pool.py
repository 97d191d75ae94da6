"""Compiling kernels side by side in forked worker processes, and falling back to one process."""

import multiprocessing
import os
import time

import numpy as np
import pytest

import jitlab as jl
from jitlab.backends.kernel_cache import KernelCache
from jitlab.errors import JitlabError
from jitlab.runtime import compile_pool


def slow_here(t):
    time.sleep(0.05)
    return t * 10


def test_tasks_run_here_and_in_workers(tmp_path):
    def there(t):
        (tmp_path / str(t)).write_text(str(os.getpid()))

    finished = []
    results = compile_pool.run(list(range(8)), slow_here, there, 1, finished.append)
    assert sorted(finished) == list(range(8))
    assert results == {i: i * 10 for i in results}
    elsewhere = set(range(8)) - results.keys()
    assert elsewhere and all((tmp_path / str(t)).read_text() != str(os.getpid()) for t in elsewhere)


def test_tasks_a_worker_fails_are_left_to_the_caller():
    def there(t):
        raise RuntimeError("broken")

    finished = []
    results = compile_pool.run(list(range(6)), slow_here, there, 1, finished.append)
    assert sorted(finished) == sorted(results)      # only what ran here finished


def test_no_workers_when_processes_cannot_start(monkeypatch):
    def refuse(self):
        raise OSError("no processes here")

    monkeypatch.setattr(multiprocessing.context.ForkProcess, "start", refuse)
    finished = []
    assert compile_pool.run(list(range(4)), slow_here, slow_here, 2, finished.append) == {i: i * 10 for i in range(4)}
    assert sorted(finished) == [0, 1, 2, 3]


def test_worker_count_from_the_environment(monkeypatch):
    monkeypatch.delenv(compile_pool.ENV_VAR, raising=False)
    assert compile_pool.processes() == 1
    monkeypatch.setenv(compile_pool.ENV_VAR, "3")
    assert compile_pool.processes() == 3
    monkeypatch.setenv(compile_pool.ENV_VAR, "auto")
    assert compile_pool.processes() == len(os.sched_getaffinity(0))
    monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: ["spawn"])
    assert compile_pool.processes() == 1
    monkeypatch.setenv(compile_pool.ENV_VAR, "many")
    with pytest.raises(JitlabError, match="JITLAB_COMPILE_WORKERS"):
        compile_pool.processes()


def layers(x, w):
    h = np.tanh(x) @ w
    h = np.exp(h * 0.1) @ w
    h = np.sin(h) + 1.0
    return np.maximum(h, 0.5) @ w


def inputs():
    rng = np.random.default_rng(0)
    return rng.standard_normal((5, 6)).astype(np.float32), rng.standard_normal((6, 6)).astype(np.float32) * 0.3


def test_a_program_compiled_by_workers_equals_o0(tmp_path, monkeypatch):
    monkeypatch.setenv(compile_pool.ENV_VAR, "2")
    x, w = inputs()
    program = jl.trace(layers, x, w)
    exe = jl.compile(program, "O1", cache=KernelCache(str(tmp_path)), progress=False)
    report = exe.report
    assert report.stats["kernels_by_workers"] >= 1
    by_workers = [k for k in report.kernels if k.worker]
    assert len(by_workers) == report.stats["kernels_by_workers"] and all(k.cache_hit for k in by_workers)
    assert all(k.timing.llvm == 0 for k in by_workers)
    np.testing.assert_allclose(exe(x, w), jl.compile(program, "O0")(x, w), rtol=1e-5, atol=1e-6)


def test_without_processes_the_program_compiles_here(tmp_path, monkeypatch):
    monkeypatch.setenv(compile_pool.ENV_VAR, "2")
    monkeypatch.setattr(multiprocessing.context.ForkProcess, "start", lambda self: (_ for _ in ()).throw(OSError()))
    x, w = inputs()
    program = jl.trace(layers, x, w)
    exe = jl.compile(program, "O1", cache=KernelCache(str(tmp_path)), progress=False)
    assert "kernels_by_workers" not in exe.report.stats and not any(k.worker for k in exe.report.kernels)
    np.testing.assert_allclose(exe(x, w), jl.compile(program, "O0")(x, w), rtol=1e-5, atol=1e-6)

"""Executables and jitted functions called from several threads at once (issue 15, item 5):
every answer is numpy's, whatever the batch sizes the threads interleave."""

import sys
import threading

import numpy as np
import pytest

import jitlab as jl

THREADS, CALLS = 4, 40
W = np.random.default_rng(0).standard_normal((8, 8)).astype(np.float32)


def model(x, w):
    # cumsum has no compiled kernel: O1 runs it op by op and O2 between segments, so calls
    # interleave in the middle of a run; the matmul and the elementwise tail are kernels.
    h = np.cumsum(np.tanh(x @ w), axis=1)
    return (h * 2.0 + 1.0).sum(axis=1), np.exp(-np.abs(h)) - x[:, :1]


@pytest.fixture
def switch_often():
    """Threads switch every microsecond, so calls overlap wherever they can."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


def hammer(call) -> list[str]:
    """THREADS threads x CALLS calls of `call(x, w)` with batch sizes drawn per call; the failures."""
    failures: list[str] = []

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(CALLS):
            x = rng.standard_normal((int(rng.choice([1, 3, 5, 64])), 8)).astype(np.float32)
            try:
                got = call(x, W)
            except Exception as e:  # noqa: BLE001 (every failure is reported)
                failures.append(f"batch {x.shape[0]}: {e!r}")
                continue
            for g, e in zip(got, model(x, W)):
                if g.shape != e.shape or not np.allclose(g, e, rtol=1e-4, atol=1e-4):
                    failures.append(f"batch {x.shape[0]}: wrong answer")

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return failures


@pytest.mark.parametrize("level", ("O0", "O1", "O2"))
def test_one_symbolic_executable_from_four_threads(level, switch_often):
    exe = jl.compile(jl.trace(model, jl.spec(("B", 8), np.float32), W), level=level, target="cpu")
    assert hammer(exe) == []


@pytest.mark.parametrize("level", ("O1", "O2"))
def test_one_jitted_function_from_four_threads_compiles_once(level, switch_often, monkeypatch):
    compiles = []
    compile_program = jl.compiler.compile
    monkeypatch.setattr(jl.compiler, "compile", lambda *a, **k: compiles.append(1) or compile_program(*a, **k))
    f = jl.jit(model, level=level, target="cpu", dynamic={"x": {0: "B"}})
    assert hammer(f) == []
    assert len(compiles) == f.cache_size == 1


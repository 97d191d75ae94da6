"""O2 keeps an arena per binding of the symbols for the most recent few bindings only."""

import numpy as np

import jitlab as jl
from jitlab.backends.numba_cpu.o2_runner import LAYOUTS_KEPT


def f(x):
    return np.cumsum(np.tanh(x), axis=1) * 2.0         # a fallback between two segments


def test_a_symbolic_o2_executable_keeps_arenas_for_the_recent_batch_sizes_only():
    exe = jl.compile(jl.trace(f, jl.spec(("B", 8), np.float32)), level="O2", target="cpu")
    sizes = (*range(1, 12), 3, 1)
    for b in sizes:
        x = np.linspace(-1, 1, 8 * b, dtype=np.float32).reshape(b, 8)
        np.testing.assert_allclose(exe(x)[0], f(x), rtol=1e-5, atol=1e-6)
    assert LAYOUTS_KEPT == 4
    assert list(exe._runner.layouts) == [(("B", b),) for b in (10, 11, 3, 1)]

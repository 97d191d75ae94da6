"""complex64 and complex128 on the cuda backend against the O0 reference, on tiny shapes: elementwise
ops in generated kernels (cmath's functions on a GPU), what numba.cuda cannot do on the host."""

import numpy as np
import pytest

import jitlab as jl
from tests.cuda.helpers import check
from tests.frontend.test_complex import mandelbrot

TINY_GRID = {"threads_per_block": 32, "max_blocks": 1}
rng = np.random.default_rng(5)


def crand(*shape, dtype=np.complex64):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def rejected(exe) -> dict[str, str]:
    return {r.op: r.reason for r in exe.report.rejected}


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_elementwise_ops_are_one_generated_kernel(dtype):
    z, c = crand(5, 7, dtype=dtype), crand(7, dtype=dtype)

    def f(z, c):
        u = z * z + c
        return (np.exp(u) - np.log(u) / np.sqrt(u), np.abs(u), np.angle(u), u.real, np.conj(u) * 1j, u == c,
                np.where(np.abs(u) > 2, u, 0), u.astype(np.float32), (u.real > 0).astype(dtype), -u / (c + 2))

    exe = check(f, z, c, **TINY_GRID)
    assert [k.backend for k in exe.report.kernels] == ["numba_cuda"]
    assert "_cexp(" in exe.report.kernels[0].source and "_clog(" in exe.report.kernels[0].source


def test_what_numba_cuda_cannot_do_runs_on_the_host():
    z, w, p = crand(4, 6), crand(6, 3), crand(6)

    def f(z, w, p):
        return z ** p, np.sum(z, axis=1), np.mean(z), z @ w

    exe = check(f, z, w, p, rtol=1e-4, atol=1e-4)
    reasons = " ".join(rejected(exe).values())
    assert "complex power" in reasons
    assert any("host" in w for w in exe.report.warnings)


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_mandelbrot(level):
    x, y = np.linspace(-2, 1, 6), np.linspace(-1.5, 1.5, 4)
    c = x[None, :] + 1j * y[:, None]
    check(mandelbrot, c, level=level, **TINY_GRID)
    np.testing.assert_array_equal(jl.jit(mandelbrot, target="cuda", level=level)(c)[0], mandelbrot(c)[0])

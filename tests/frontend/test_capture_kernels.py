"""Numpy kernels of the kinds issue 31 lists, compiled with their loops captured where they can be,
checked against plain numpy at O0 and O1 (results and the arguments they write into). Which loops
each captures is checked too, so a kernel that silently falls back to unrolling fails."""

import numpy as np
import pytest

import jitlab as jl

from . import capture_kernels as k


def _rng():
    return np.random.default_rng(31)


def _spd(n):
    a = _rng().random((n, n))
    return a @ a.T + n * np.eye(n)


def _cavity():
    shape = (6, 6)
    return (2, 2, np.zeros(shape), np.zeros(shape), np.zeros(shape), 0.001, 2 / 5, 2 / 5, 1.0, 0.1)


# name: (kernel, arguments, the loops it captures by kind (for, while, if), at least)
CASES = {
    "jacobi_1d": (k.jacobi_1d, lambda: (6, _rng().random(12), _rng().random(12)), {"for": 1}),
    "heat_3d": (k.heat_3d, lambda: (4, _rng().random((5, 5, 5)), _rng().random((5, 5, 5))), {"for": 1}),
    "floyd_warshall": (k.floyd_warshall, lambda: (_rng().integers(1, 9, (6, 6)).astype(np.int32),), {"for": 1}),
    "gramschmidt": (k.gramschmidt, lambda: (_rng().random((5, 4)),), {"for": 2}),
    "deriche": (k.deriche, lambda: (0.25, _rng().random((4, 6))), {"for": 2}),
    "adi": (k.adi, lambda: (2, _rng().random((6, 6))), {"for": 5}),
    "seidel_2d": (k.seidel_2d, lambda: (3, _rng().random((5, 5))), {"for": 3}),
    "cavity_flow": (k.cavity_flow, _cavity, {"for": 1}),
    "converge": (k.converge, lambda: (_rng().random(6), 1e-3), {"while": 1}),
    "crc16": (k.crc16, lambda: (_rng().integers(0, 256, 5),), {"for": 2, "if": 1}),
    "nussinov": (k.nussinov, lambda: (_rng().integers(0, 4, 5),), {"for": 1, "if": 3}),
    "contour_integral": (k.contour_integral, lambda: (_rng().random((3, 3, 3)) + 3 * np.eye(3),
                                                      np.array([0.5, 1.5, 0.8]), _rng().random((3, 2))),
                         {"for": 2, "if": 1}),
    "azimint_naive": (k.azimint_naive, lambda: (_rng().random(20), _rng().random(20), 5), {"for": 1}),
    "conv2d_bias": (k.conv2d_bias, lambda: (_rng().random((1, 5, 5, 2)), _rng().random((3, 3, 2, 2)),
                                            _rng().random(2)), {"for": 2}),
    "symm": (k.symm, lambda: (1.5, 1.2, _rng().random((4, 3)), _rng().random((4, 4)), _rng().random((4, 3))),
             {"for": 2}),
    "syrk": (k.syrk, lambda: (1.5, 1.2, _rng().random((4, 4)), _rng().random((4, 3))), {"for": 2}),
    "syr2k": (k.syr2k, lambda: (1.5, 1.2, _rng().random((4, 4)), _rng().random((4, 3)), _rng().random((4, 3))),
              {"for": 2}),
    "cholesky": (k.cholesky, lambda: (_spd(4),), {"for": 2}),
    "lu": (k.lu, lambda: (_spd(4),), {"for": 3}),
    "trisolv": (k.trisolv, lambda: (np.tril(_spd(4)), np.zeros(4), _rng().random(4)), {"for": 1}),
    "durbin": (k.durbin, lambda: (_rng().random(5) * 0.3,), {"for": 1}),
    "covariance": (k.covariance, lambda: (5.0, _rng().random((5, 4))), {"for": 1}),
    "correlation": (k.correlation, lambda: (5.0, _rng().random((5, 4))), {"for": 1}),
    "lenet": (k.lenet, lambda: (_rng().random((2, 12, 12, 1)), *(_rng().random(s) - 0.5 for s in (
        (3, 3, 1, 4), (4,), (3, 3, 4, 6), (6,), (6, 16), (16,), (16, 12), (12,), (12, 10), (10,)))), {"for": 4}),
    "resnet_block": (k.resnet_block, lambda: (_rng().random((2, 6, 6, 4)), _rng().random((1, 1, 4, 3)),
                                             _rng().random((3, 3, 3, 3)), _rng().random((1, 1, 3, 4))), {"for": 2}),
}
# the default run: O0 (the capture and its semantics), one kernel through O1's compiled regions too
FAST = {"jacobi_1d": ("O0",), "crc16": ("O0",), "converge": ("O0",), "floyd_warshall": ("O0", "O1"),
        "cholesky": ("O0",), "durbin": ("O0",), "syrk": ("O0",), "trisolv": ("O0", "O1")}
# kernels whose slices' extents follow the loop index (a[i, :j], cov[i:m, i]): masked windows
WINDOWED = ("cholesky", "lu", "trisolv", "durbin", "covariance", "correlation", "symm", "syrk", "syr2k")


def _copies(args):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def check(name, levels=("O0", "O1")):
    """Compiles kernel `name` at each level and checks it against numpy; returns its program's notes."""
    fn, make, captured = CASES[name]
    args = make()
    plain = _copies(args)
    expected = fn(*plain)
    expected = expected if isinstance(expected, tuple) else (expected,)
    for level in levels:
        mine = _copies(args)
        got = jl.jit(fn, level=level)(*mine)
        got = got if isinstance(got, tuple) else (got,)
        for g, e in zip(got, expected, strict=True):
            assert (g is None) == (e is None), (name, level)
            if e is not None:
                np.testing.assert_allclose(np.asarray(g), e, rtol=1e-9, atol=1e-12, err_msg=f"{name} {level}")
        for g, e in zip(mine, plain):
            np.testing.assert_allclose(g, e, rtol=1e-9, atol=1e-12, err_msg=f"{name} {level}: an argument")
    notes = jl.trace(fn, *args).loops
    for kind, count in captured.items():
        assert sum(n.captured and n.kind == kind for n in notes) >= count, (name, [str(n) for n in notes])
    return notes


@pytest.mark.parametrize("name", FAST)
def test_kernels_compile_with_their_loops_captured(name):
    check(name, FAST[name])


@pytest.mark.slow
@pytest.mark.parametrize("name", CASES)
def test_more_kernels_compile_with_their_loops_captured(name):
    check(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", WINDOWED)
def test_kernels_over_windows_compile_at_o2(name):
    check(name, ("O2",))


@pytest.mark.parametrize("name", WINDOWED)
def test_kernels_whose_inner_extent_follows_the_outer_index_capture_every_loop(name):
    fn, make, _ = CASES[name]
    notes = jl.trace(fn, *make()).loops
    assert notes and all(n.captured for n in notes), [str(n) for n in notes]


def test_a_captured_factorisation_does_not_grow_with_its_size():
    sizes = {n: sum(jl.trace(k.cholesky, _spd(n)).op_counts().values()) for n in (4, 9)}
    assert sizes[4] == sizes[9], sizes

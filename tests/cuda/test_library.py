"""Library contractions on cuda: which route kernel selection takes and why, cuBLAS's arguments
against a column-major GEMM written in numpy, and both routes run against O0 under the simulator
(the library route through a stand-in that computes what those arguments ask cuBLAS for)."""

import numpy as np
import pytest

import jitlab as jl
from jitlab.backends.numba_cuda import library
from jitlab.backends.numba_cuda.library import Gemm, Libraries
from tests.cuda.helpers import check, layouts, rand

AVAILABLE = Libraries(cublas=None)


def contraction(fn, *args):
    """The first group holding a contraction in `fn`'s program compiled at O1 for cuda, and that contraction."""
    program = jl.compile(jl.trace(fn, *args), level="O1", target="cuda", progress=False).program
    for group in (op for op in program.walk() if op.name == "jit.group"):
        con = next((op for op in group.body.ops if op.name in ("np.matmul", "np.conv2d")), None)
        if con is not None:
            return group, con
    raise AssertionError("no contraction group")


@pytest.mark.parametrize("shapes,batched", [([(5, 7), (7, 3)], False), ([(2, 5, 4), (2, 4, 3)], True),
                                             ([(2, 5, 4), (4, 3)], True), ([(5, 4), (3, 4, 2)], True)])
def test_float_matmuls_go_to_cublas_without_tf32(shapes, batched):
    group, con = contraction(lambda a, b: a @ b, *(rand(*s) for s in shapes))
    chosen = library.select(group, con, AVAILABLE, allow_tf32=False)
    assert chosen.library == "cublas"
    assert "no TF32" in chosen.reason and ("strided-batched" in chosen.reason) == batched
    assert "TF32 tensor cores allowed" in library.select(group, con, AVAILABLE, allow_tf32=True).reason


@pytest.mark.parametrize("fn,args,why", [
    (lambda a, b: a @ b, (rand(2, 3, 5, 4), rand(3, 4, 6)), "broadcast partially"),
    (lambda a, b: a @ b, (rand(4, 5, dtype=np.int32), rand(5, 3, dtype=np.int32)), "int32"),
])
def test_matmuls_cublas_cannot_take_stay_generated_with_the_reason(fn, args, why):
    group, con = contraction(fn, *args)
    chosen = library.select(group, con, AVAILABLE, allow_tf32=False)
    assert chosen.library is None and why in chosen.reason


def test_without_the_library_the_reason_is_the_probe_s():
    group, con = contraction(lambda a, b: a @ b, rand(5, 7), rand(7, 3))
    chosen = library.select(group, con, Libraries(cublas="CuPy is not importable"), allow_tf32=False)
    assert chosen.library is None and "CuPy is not importable" in chosen.reason


def test_the_simulator_reports_no_libraries():
    assert "simulator" in library.probe().cublas


def _column_major_gemm(g: Gemm, a_flat: np.ndarray, b_flat: np.ndarray) -> np.ndarray:
    """What cublasGemmStridedBatchedEx computes (C = A B per batch, all column-major), in numpy."""
    view = lambda flat, rows, cols, ld, off: np.lib.stride_tricks.as_strided(  # noqa: E731
        flat[off:], (rows, cols), (flat.itemsize, ld * flat.itemsize))
    c = np.zeros(g.count * g.stride_c, a_flat.dtype)
    for i in range(g.count):
        product = view(a_flat, g.m, g.k, g.lda, i * g.stride_a) @ view(b_flat, g.k, g.n, g.ldb, i * g.stride_b)
        view(c, g.m, g.n, g.ldc, i * g.stride_c)[...] = product
    return c


@pytest.mark.parametrize("a_shape,b_shape", [((5, 7), (7, 3)), ((2, 5, 4), (2, 4, 3)), ((2, 5, 4), (4, 3)),
                                             ((5, 4), (3, 4, 2)), ((2, 3, 2, 4), (2, 3, 4, 5)), ((1, 1), (1, 6))])
def test_cublas_arguments_compute_the_row_major_product(a_shape, b_shape):
    a, b = rand(*a_shape, dtype=np.float64), rand(*b_shape, dtype=np.float64)
    expected = np.matmul(a, b)
    g = Gemm.of(a.shape, b.shape, expected.shape)
    # Our B is cuBLAS's A: the call passes b's pointer first.
    got = _column_major_gemm(g, b.ravel(), a.ravel()).reshape(expected.shape)
    np.testing.assert_allclose(got, expected, rtol=1e-12)


class FakeCublas:
    """Stands in for CublasMatmul under the simulator: the same arguments, the GEMM done in numpy."""

    def __init__(self, con, allow_tf32):
        self.a, self.b = (v.index for v in con.operands)

    def __call__(self, inputs, outputs, extra, bindings, stream):
        a, b, c = inputs[self.a].copy_to_host(), inputs[self.b].copy_to_host(), outputs[0]
        g = Gemm.of(a.shape, b.shape, c.shape)
        c.copy_to_device(_column_major_gemm(g, b.ravel(), a.ravel()).reshape(c.shape).astype(c.dtype))


@pytest.fixture
def fake_cublas(monkeypatch):
    monkeypatch.setattr(library, "probe", lambda: AVAILABLE)
    monkeypatch.setattr(library, "CublasMatmul", FakeCublas)


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_library_route_with_a_generated_epilogue_matches_o0(fake_cublas, level):
    x, w, b = rand(5, 7), rand(7, 3), rand(3)
    exe = check(lambda x, w, b: np.maximum(x @ w + b, 0), x, w, b, level=level, rtol=1e-5, atol=1e-6)
    choice = next(c for c in layouts(exe) if "cuBLAS" in c)
    assert "generated" in choice and "epilogue" in choice


def test_library_route_alone_writes_the_group_output(fake_cublas):
    exe = check(lambda a, b: a @ b, rand(2, 5, 4), rand(4, 3), rtol=1e-5, atol=1e-6)
    record = next(k for k in exe.report.kernels if "cuBLAS" in k.choice)
    assert record.source == "" and "epilogue" not in record.choice


def test_fallback_runs_the_generated_kernels_and_says_why():
    exe = check(lambda x, w: np.tanh(x @ w), rand(6, 5), rand(5, 4), rtol=1e-5, atol=1e-6)
    choice = next(c for c in layouts(exe) if "matmul" in c)
    assert "tiled matmul" in choice and "not a library" in choice and "simulator" in choice


def test_allow_tf32_is_an_option_of_cuda_only():
    x, w = rand(3, 4), rand(4, 2)
    assert jl.compile(jl.trace(lambda x, w: x @ w, x, w), target="cuda", allow_tf32=True, progress=False)
    with pytest.raises(jl.JitlabError, match="allow_tf32"):
        jl.compile(jl.trace(lambda x, w: x @ w, x, w), target="cpu", allow_tf32=True)

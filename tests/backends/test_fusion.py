"""Fused groups compiled and run: their kernels, kernel records and library calls (the passes'
decisions on IR text are in tests/passes/test_fusion.py)."""

import numpy as np
import pytest

import jitlab as jl

rng = np.random.default_rng(1)
X = rng.standard_normal((8, 16), dtype=np.float32)
W = rng.standard_normal((16, 16), dtype=np.float32)


pytestmark = pytest.mark.usefixtures("private_cache")


def compile_o1(fn, *args, **options):
    exe = jl.compile(jl.trace(fn, *args), level="O1", verify_each=True, **options)
    np.testing.assert_allclose(exe(*args)[0], jl.compile(jl.trace(fn, *args), level="O0")(*args)[0],
                               rtol=1e-4, atol=1e-5)
    return exe


def test_views_become_aliases_between_groups():
    exe = compile_o1(lambda x: np.exp(x).reshape(4, 32) * 2.0, X)
    assert exe.report.stats["launches_saved_by_views"] == 1
    assert "jit.view" in str(exe.program)
    assert len(exe.report.groups) == 2


def test_identical_groups_share_one_kernel():
    def fn(x, y):
        return np.tanh(x * 3.0) + 1.0, np.tanh(y * 3.0) + 1.0

    y = rng.standard_normal((8, 16), dtype=np.float32)
    program = jl.trace(fn, X, y)
    exe = jl.compile(program, passes="mark-subgraphs,fuse,alias-views,dce", level="O1")
    assert len(exe.report.groups) == 2
    assert exe.report.stats == {"launches_saved_by_views": 0, "kernels_compiled": 1, "kernels_reused": 1}
    assert exe.report.kernels[0].reused_by == [1]
    a, b = exe(X, y)
    np.testing.assert_allclose(b, np.tanh(y * 3.0) + 1.0, rtol=1e-6, atol=1e-6)


def test_groups_differing_only_in_sizes_share_compiled_code(tmp_path):
    from jitlab.backends.kernel_cache import KernelCache

    def fn(x, y, z):
        return np.tanh(x * 3.0) + 1.0, np.tanh(y * 3.0) + 1.0, np.tanh(z * 3.0) + 1.0

    y = rng.standard_normal((3, 5), dtype=np.float32)
    z = rng.standard_normal((300, 200), dtype=np.float32)      # over the parallel threshold: the other variant
    program = jl.trace(fn, X, y, z)
    exe = jl.compile(program, passes="mark-subgraphs,fuse,alias-views,dce", level="O1",
                     cache=KernelCache(str(tmp_path)))
    assert len(exe.report.groups) == 3 and len(exe.report.kernels) == 3      # three shapes, three group keys
    codes = {k.code for k in exe.report.kernels}
    assert len(codes) == 1 and "" not in codes
    assert exe.report.stats["kernels_compiled"] == 1 and exe.report.stats["kernels_reused"] == 2
    first = exe.report.kernels[0]
    assert first.shares_code_with(exe.report.kernels) == [1, 2]
    assert [k.cache_hit for k in exe.report.kernels] == [False, True, True]
    for got, arg in zip(exe(X, y, z), (X, y, z), strict=True):
        np.testing.assert_allclose(got, np.tanh(arg * 3.0) + 1.0, rtol=1e-6, atol=1e-6)
    ref = jl.compile(program, level="O0")(X, y, z)
    for got, want in zip(exe(X, y, z), ref, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_group_records_and_kernel_records():
    exe = compile_o1(lambda x, w: np.maximum(x @ w + 1.0, 0), X, W)
    (group,) = exe.report.groups
    assert group.kind == "contraction" and group.backend == "numba_cpu"
    assert group.op_names == ["np.matmul", "np.add", "np.relu"]
    (kernel,) = exe.report.kernels
    assert kernel.key == group.key and "def k_par" in kernel.source and kernel.compile_seconds >= 0
    assert exe.report.to_json()


def test_kernel_choice_is_recorded_and_autotune_measures():
    fn = lambda x: np.tanh(np.exp(x) * 0.5) + x  # noqa: E731
    exe = compile_o1(fn, X)
    choice = exe.report.kernels[0].choice
    assert choice.startswith("generated: 4 ops fused") and "estimated" in choice
    tuned = compile_o1(fn, X, autotune=True)
    assert "measured" in tuned.report.kernels[0].choice
    np.testing.assert_allclose(tuned(X)[0], fn(X), rtol=1e-5, atol=1e-6)


def test_library_kernel_runs_the_group_with_numpy():
    from jitlab.backends.host import LibraryKernel

    exe = compile_o1(lambda x: np.sin(x) * 2.0 + 1.0, X)
    group = next(op for op in exe.program.ops if op.name == "jit.group")
    out = [np.empty_like(X)]
    LibraryKernel(group.body)([X], out)
    np.testing.assert_allclose(out[0], np.sin(X) * 2.0 + 1.0, rtol=1e-6)


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_a_transpose_feeding_only_a_matmul_is_read_by_blas_not_copied(level):
    def fn(a, w, v, b, u):
        return np.maximum(a.T @ w, 0.0), w @ v.T, b.T @ u.T

    shapes = [(16, 8), (16, 12), (8, 12), (16, 8), (12, 16)]
    args = [rng.standard_normal(s, dtype=np.float32) for s in shapes]
    program = jl.trace(fn, *args)
    exe = jl.compile(program, level=level, verify_each=True)
    for got, want in zip(exe(*args), fn(*args)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    groups = [g.op_names for g in exe.report.groups]
    assert sorted(g.count("np.transpose") for g in groups if "np.matmul" in g) == [1, 1, 2], groups
    assert all("np.matmul" in g for g in groups if "np.transpose" in g), groups


def test_a_transpose_with_another_user_is_materialized_once():
    def fn(x, w):
        t = x.T
        return t @ w + t.sum(axis=1, keepdims=True)

    exe = compile_o1(fn, X, rng.standard_normal((8, 4), dtype=np.float32))
    assert not any("np.transpose" in g.op_names and "np.matmul" in g.op_names for g in exe.report.groups)

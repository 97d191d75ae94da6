"""Matrix products through numpy's own BLAS from compiled code, against numpy's matmul."""

import numpy as np
import pytest

from jitlab.backends.numba_cpu.blas import addresses, gemm, gemm_split, one_blas_thread

rng = np.random.default_rng(5)
# one row or one column out (m or n of 1) is a gemv
SHAPES = [(3, 4, 5), (1, 1, 1), (0, 3, 2), (3, 0, 2), (3, 2, 0), (65, 129, 33), (1, 7, 5), (6, 9, 1)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("blas", ["numpy", "fallback"])
def test_gemm_matches_numpy(m, k, n, ta, tb, dtype, blas):
    a, b = rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype)
    stored_a, stored_b = (np.ascontiguousarray(x.T) if t else x for x, t in ((a, ta), (b, tb)))
    out = np.full((m, n), np.nan, dtype)
    gemm(addresses() if blas == "numpy" else np.zeros(2, np.int64), stored_a, stored_b, out, ta, tb)
    np.testing.assert_allclose(out, a @ b, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-5)


def test_numpys_bundled_blas_is_found_on_this_platform():
    # The wheels on PyPI for Linux bundle scipy-openblas64; finding none would silently fall back.
    info = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    if info["name"] != "scipy-openblas":
        pytest.skip(f"numpy is built against {info['name']}, not scipy-openblas")
    assert addresses().all()          # both GEMMs and the thread count functions


@pytest.mark.parametrize("parts", [1, 2, 3, 8])
@pytest.mark.parametrize("m", [1, 5, 64])
def test_gemm_split_into_row_blocks_matches_numpy(m, parts):
    a, b = rng.standard_normal((m, 7)).astype(np.float32), rng.standard_normal((7, 9)).astype(np.float32)
    out = np.full((m, 9), np.nan, np.float32)
    with one_blas_thread():
        gemm_split(addresses(), a, b, out, parts)
    np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-5)


def test_one_blas_thread_restores_the_thread_count():
    from threadpoolctl import threadpool_info

    def blas_threads():
        return [i["num_threads"] for i in threadpool_info() if i["internal_api"] == "openblas"]

    before = blas_threads()
    with one_blas_thread() as split:
        inside = blas_threads()
    assert blas_threads() == before
    if split:
        assert 1 in inside


def test_a_small_product_runs_on_one_blas_thread_and_puts_the_count_back():
    from threadpoolctl import threadpool_info

    def blas_threads():
        return [i["num_threads"] for i in threadpool_info() if i["filepath"].find("numpy") >= 0]

    before = blas_threads()
    a, b = rng.standard_normal((1, 2048)).astype(np.float32), rng.standard_normal((2048, 1000)).astype(np.float32)
    out = np.empty((1, 1000), np.float32)
    gemm(addresses(), a, b, out, False, False)
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)
    assert blas_threads() == before

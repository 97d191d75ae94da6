"""Row kernels: exp after a row's max is fastmath's exp bit for bit, and softmax / layernorm rows of
every awkward kind (odd and length-1 rows, -inf, NaN, all equal, huge) equal O0 at O1 and O2."""

import numpy as np
import pytest

import jitlab as jl
from jitlab.backends.numba_cpu import mathcheck as mc
from jitlab.backends.numba_cpu import rows
from jitlab.backends.numba_cpu.fastmath import lookup
from tests.budget import slow_o2
from tests.programs import assert_same

pytestmark = pytest.mark.usefixtures("private_cache")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_exp_nonpositive_is_fastmath_exp_bit_for_bit(dtype):
    x = np.concatenate([mc.binade_sample(dtype, 512), mc.special_values(dtype),
                        np.linspace(-120 if dtype == "float32" else -760, 0, 200001).astype(dtype)])
    x = -np.abs(x[~np.isnan(x)])
    x = np.concatenate([x, np.array([np.nan, -0.0, 0.0, -np.inf], dtype)])
    fast = lookup("np.exp", dtype).fn
    got = mc.evaluate(getattr(rows, f"exp_nonpositive_{dtype}"), x)
    want = mc.evaluate(fast, x)
    assert np.array_equal(got.view(f"u{x.itemsize}"), want.view(f"u{x.itemsize}"))


def softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def softmax_last(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def not_own_max(x):
    """x minus the max of another axis's slice: positive arguments, so not the row path."""
    return np.exp(x - x.max(axis=0))


def layernorm(x, g, b):
    m = x.mean(axis=1, keepdims=True)
    c = x - m
    return c / np.sqrt((c * c).mean(axis=1, keepdims=True) + 1e-5) * g + b


def awkward_rows(n: int) -> np.ndarray:
    """Rows of length n: random, -inf in places, all -inf, a NaN, all equal, +inf, huge, tiny."""
    rng = np.random.default_rng(n)
    rows_ = [rng.standard_normal(n), np.full(n, 3.0), np.full(n, -np.inf), rng.standard_normal(n) * 1e30,
             rng.standard_normal(n) * 1e-30, np.full(n, 3e38), rng.standard_normal(n) * 80]
    some_inf = rng.standard_normal(n)
    some_inf[::2] = -np.inf
    nan = rng.standard_normal(n)
    nan[n // 2] = np.nan
    pos_inf = rng.standard_normal(n)
    pos_inf[-1] = np.inf
    return np.array(rows_ + [some_inf, nan, pos_inf], np.float32)


def kernel_sources(fn, *args, level="O1") -> str:
    exe = jl.jit(fn, level=level).lower(*args)
    return "\n".join(k.source for k in exe.report.kernels)


@pytest.mark.parametrize("n", [1, 3, 17, 64, 1025])
@pytest.mark.parametrize("level", slow_o2("O1", "O2"))
def test_softmax_rows_equal_o0(n, level):
    x = awkward_rows(n)
    for fn in (softmax, softmax_last):
        with np.errstate(all="ignore"):
            want = jl.jit(fn, level="O0")(x)
        assert_same([jl.jit(fn, level=level)(x)], [want], rtol=2e-5, atol=1e-6)


def test_softmax_takes_the_row_exp_and_other_shifts_do_not():
    x = awkward_rows(17)
    assert "exp_nonpositive_float32(" in kernel_sources(softmax, x)
    assert "exp_nonpositive_float64(" in kernel_sources(softmax, x.astype(np.float64), level="O2")
    assert "exp_nonpositive_float32(" not in kernel_sources(not_own_max, x)
    y = np.random.default_rng(1).standard_normal((5, 7)).astype(np.float32)
    assert_same([jl.jit(not_own_max, level="O1")(y)], [jl.jit(not_own_max, level="O0")(y)], rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("n", [1, 3, 17, 1025])
def test_layernorm_rows_equal_o0(n):
    x = awkward_rows(n)[[0, 1, 4, 6, 8]]           # finite-variance rows and a NaN row
    x = np.concatenate([x, (awkward_rows(n)[0] * 1e3 + 1e4)[None]]).astype(np.float32)
    g = np.linspace(0.5, 2, n, dtype=np.float32)
    b = np.linspace(-1, 1, n, dtype=np.float32)
    want = jl.jit(layernorm, level="O0")(x, g, b)
    for level in ("O1", "O2"):
        assert_same([jl.jit(layernorm, level=level)(x, g, b)], [want], rtol=1e-4, atol=1e-4)

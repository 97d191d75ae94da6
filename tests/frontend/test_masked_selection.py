"""x[mask] with a traced mask: selections used elementwise, reduced and written back, against numpy."""

import numpy as np
import pytest

import jitlab as jl
from tests.budget import first_fast, slow_o2

LEVELS = slow_o2("O0", "O1", "O2")


def fill_positive(a, b):
    a = a.copy()
    a[b > 0] = b[b > 0] * 2
    return a


def shift_negative(a):
    a = a.copy()
    a[a < 0] += 1.5
    return a


def reductions(x):
    sel = x[x > 0]
    return sel.sum(), sel.mean(), np.mean(x[x > 0.5]), sel.any(), (sel ** 2).sum(), np.prod(x[x > 1.0])


def from_argument_mask(x, m):
    y = np.zeros_like(x)
    y[m] = np.sqrt(np.abs(x[m])) + 1
    return y


def row_mask(x):
    rows = x.sum(axis=1) > 0
    return x[rows].sum(axis=0), x[rows].mean(axis=0), np.where(x[rows] > 0, x[rows], 0.0).sum()


def clip_ints(a):
    a = a.copy()
    a[a > 3] = np.clip(a[a > 3] * 3, 0, 20)
    return a, a[a % 2 == 0].mean(), a[a > 100].mean()


def writes_argument(a, b):
    a[a > 0.5] = b[a > 0.5]


def check(got, want):
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want, strict=True):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-6)


@pytest.mark.filterwarnings("ignore:Mean of empty slice", "ignore:invalid value encountered")
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("seed", first_fast(0, 1))
def test_selection_programs_match_numpy(level, seed):
    rng = np.random.default_rng(seed)
    shape = tuple(int(n) for n in rng.integers(1, 7, size=2))
    a = rng.standard_normal(shape).astype(np.float32)
    b = rng.standard_normal(shape).astype(np.float32)
    k = rng.integers(-5, 8, size=shape)
    with np.errstate(invalid="ignore"):
        for f, args in [(fill_positive, (a, b)), (shift_negative, (a,)), (reductions, (a,)),
                        (from_argument_mask, (a, a > 0.3)), (row_mask, (a,)), (clip_ints, (k,))]:
            jitted = jl.jit(f, level=level)
            check(jitted(*args), f(*[x.copy() for x in args]))
            other = [x[::-1].copy() for x in args]        # a second call with new values
            check(jitted(*other), f(*[x.copy() for x in other]))


@pytest.mark.parametrize("level", LEVELS)
def test_selection_written_into_an_argument(level):
    rng = np.random.default_rng(3)
    a, b = rng.random((4, 5)), rng.random((4, 5))
    mine, numpys = a.copy(), a.copy()
    assert jl.jit(writes_argument, level=level)(mine, b) is None
    writes_argument(numpys, b)
    np.testing.assert_array_equal(mine, numpys)


def test_selection_is_a_copy():
    def f(x):
        sel = x[x > 0]
        x[...] = 0.0
        return sel.sum()

    x = np.array([1.0, -2.0, 3.0])
    assert jl.jit(f)(x.copy()) == f(x.copy()) == 4.0


@pytest.mark.parametrize("code, says", [
    (lambda x: x[x > 0].max(), "max"),
    (lambda x: len(x[x > 0]), "len()"),
    (lambda x: x[x > 0] + x, "needs the selection's length"),
    (lambda x: np.sort(x[x > 0]), "np.sort"),
    (lambda x: x[x > 0][0], "indexing"),
    (lambda x: x[x > 0], "returned x[mask]"),
    (lambda x: x[x > 0] + x[x < 0], "different masks"),
    (lambda x: np.sum(x[x > 0], keepdims=True), "keepdims"),
    (lambda x: x[x > 0].shape, "the shape"),
])
def test_uses_that_need_the_length_are_refused(code, says):
    with pytest.raises(jl.UnsupportedError, match=None) as info:
        jl.jit(code)(np.arange(4.0) - 1)
    assert says in str(info.value) and "test_masked_selection.py" in str(info.value)


def test_write_back_under_another_mask_is_refused():
    def f(a, b):
        a = a.copy()
        a[a > 0] = b[b > 0]
        return a

    with pytest.raises(jl.UnsupportedError, match="different traced mask"):
        jl.jit(f)(np.ones(3), np.ones(3))

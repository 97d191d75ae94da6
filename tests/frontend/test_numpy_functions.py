"""numpy functions built from existing ops (jitlab/frontend/numpy_functions.py): each traced
call against plain numpy, on random small shapes and dtypes, at O0; one program using them
all at O1 and O2 (compiling is the slow part: the per-function compiled runs are marked slow)."""

import warnings

import numpy as np
import pytest

import jitlab as jl
from jitlab.errors import UnsupportedOp
from tests.budget import first_fast
from tests.programs import assert_same

FLOATS = ["float32", "float64"]
NUMERIC = FLOATS + ["int32", "int64"]


def rand(rng, shape, dtype):
    if dtype.startswith("int"):
        return rng.integers(-5, 6, shape).astype(dtype)
    return (rng.standard_normal(shape) * 2).astype(dtype)


def dims(rng, k, lo=1, hi=4):
    return tuple(int(d) for d in rng.integers(lo, hi + 1, k))


# name -> (dtypes, make(rng, dtype) -> (fn, args))
CASES = {
    "diff": (NUMERIC + ["bool"], lambda rng, dt: (
        lambda x: (np.diff(x), np.diff(x, 2, axis=0), np.diff(x, axis=0, prepend=x[:1], append=1)),
        ((rng.random(dims(rng, 2, 2)) > 0.5) if dt == "bool" else rand(rng, dims(rng, 2, 2), dt),))),
    "roll": (NUMERIC, lambda rng, dt: (
        lambda x: (np.roll(x, 3), np.roll(x, -1, axis=1), np.roll(x, (1, 5), axis=(0, 2)), np.roll(x, 0)),
        (rand(rng, dims(rng, 3), dt),))),
    "trace": (NUMERIC, lambda rng, dt: (
        lambda x: (np.trace(x), np.trace(x, 1), np.trace(x, -1, axis1=1, axis2=2), np.trace(x, 5),
                   np.trace(x, dtype=np.float64)),
        (rand(rng, dims(rng, 3), dt),))),
    "diagonal": (NUMERIC + ["bool"], lambda rng, dt: (
        lambda x: (np.diagonal(x), np.diagonal(x, 1, axis1=2, axis2=0), np.diagonal(x, -2, 1, 2), np.diag(x[0]),
                   np.diag(x[0], 1), np.diag(x[0, 0]), np.diag(x[0, :, 0], -2), np.diag(x[0, 0], 1), np.diagonal(x, 9)),
        ((rng.random(dims(rng, 3)) > 0.5) if dt == "bool" else rand(rng, dims(rng, 3), dt),))),
    "tril_triu": (NUMERIC + ["bool"], lambda rng, dt: (
        lambda x: (np.tril(x), np.triu(x), np.tril(x, -1), np.triu(x, 2), np.tril(x[0], 1)),
        ((rng.random(dims(rng, 3)) > 0.5) if dt == "bool" else rand(rng, dims(rng, 3), dt),))),
    "cross": (NUMERIC, lambda rng, dt: (
        lambda a, b: (np.cross(a, b), np.cross(a[0], b), np.cross(a, b, axisa=0, axisb=0, axisc=0)[:, :3]),
        (rand(rng, (3, 3), dt), rand(rng, (3, 3), dt)))),
    "cross2": (FLOATS, lambda rng, dt: (
        lambda a, b: (np.cross(a[:, :2], b[:, :2]), np.cross(a[:, :2], b)),
        (rand(rng, (dims(rng, 1)[0], 3), dt), rand(rng, (1, 3), dt)))),
    "outer": (NUMERIC, lambda rng, dt: (
        lambda a, b: (np.add.outer(a, b), np.multiply.outer(a, b), np.subtract.outer(a, b),
                      np.maximum.outer(a, b), np.minimum.outer(b, a), np.greater.outer(a, b),
                      np.true_divide.outer(a, 2.0 + b * b), np.add.outer([1, 2], b), np.multiply.outer(a, 3),
                      np.add.outer(a, b, dtype=np.float64)),
        (rand(rng, dims(rng, 1), dt), rand(rng, dims(rng, 2), dt)))),
    "reduce": (NUMERIC, lambda rng, dt: (
        lambda x: (np.add.reduce(x), np.multiply.reduce(x, axis=1), np.maximum.reduce(x, axis=None),
                   np.minimum.reduce(x, axis=(0, 1), keepdims=True), np.logical_or.reduce(x, axis=1),
                   np.logical_and.reduce(x), np.add.reduce(x, initial=3), np.maximum.reduce(x, axis=1, initial=1),
                   np.add.reduce(x, axis=0, where=x > 0), np.multiply.reduce(x, where=x < 2, keepdims=True),
                   np.minimum.reduce(x, axis=None, where=x > -1, initial=9)),
        (rand(rng, dims(rng, 2), dt),))),
    "accumulate": (NUMERIC, lambda rng, dt: (
        lambda x: (np.add.accumulate(x), np.multiply.accumulate(x, axis=1), np.maximum.accumulate(x, axis=1),
                   np.minimum.accumulate(x), np.logical_or.accumulate(x > 0, axis=1),
                   np.add.accumulate(x, dtype=np.float64), np.fmax.accumulate(x)),
        (rand(rng, dims(rng, 2, 1, 6), dt),))),
    "accumulate_int": (["int32", "int64", "bool"], lambda rng, dt: (
        lambda x: (np.bitwise_and.accumulate(x), np.bitwise_or.accumulate(x, axis=1),
                   np.bitwise_xor.accumulate(x, axis=1), np.add.accumulate(x), np.multiply.accumulate(x)),
        ((rng.random(dims(rng, 2, 1, 5)) > 0.5) if dt == "bool" else rand(rng, dims(rng, 2, 1, 5), dt),))),
    "cov": (NUMERIC, lambda rng, dt: (
        lambda x, y: (np.cov(x), np.cov(x, rowvar=False), np.cov(x[0]), np.cov(x, y), np.cov(x, bias=True),
                      np.cov(x, ddof=0), np.corrcoef(x), np.corrcoef(x[0], x[1]), np.corrcoef(x, rowvar=False)),
        (rand(rng, (3, 5), dt), rand(rng, (5,), dt)))),
    "norm": (NUMERIC, lambda rng, dt: (
        lambda x: (np.linalg.norm(x), np.linalg.norm(x, axis=1), np.linalg.norm(x, 1), np.linalg.norm(x, -1),
                   np.linalg.norm(x, np.inf), np.linalg.norm(x, -np.inf), np.linalg.norm(x, "fro"),
                   np.linalg.norm(x, 1, axis=(1, 0)), np.linalg.norm(x[0], 3), np.linalg.norm(x[0], np.inf),
                   np.linalg.norm(x[0], -np.inf), np.linalg.norm(x[0], 0), np.linalg.norm(x[0], 1),
                   np.linalg.norm(x, axis=0, keepdims=True), np.linalg.norm(x, keepdims=True)),
        (rand(rng, dims(rng, 2), dt),))),
    "bincount": (["int32", "int64"], lambda rng, dt: (
        lambda i, w: (np.bincount(i, minlength=8), np.bincount(i, w, minlength=9),
                      np.bincount(i, w.astype(np.float32), minlength=8)),
        (rng.integers(0, 8, dims(rng, 1, 1, 9)).astype(dt), None))),
    "histogram": (FLOATS + ["int64"], lambda rng, dt: (
        lambda x: (*np.histogram(x, 4, range=(-2, 2)), *np.histogram(x, 3, range=(-1, 5), density=True),
                   *np.histogram(x, 2, range=(0, 0)), np.histogram(x, 5, range=(-3, 2), weights=x * x)[0],
                   *np.histogram(x, 6), *np.histogram(x, 4, density=True), np.histogram(x, 3, weights=x)[0],
                   *np.histogram(x[:1], 3)),
        (np.concatenate([rand(rng, dims(rng, 1, 1, 9), dt), np.array([-2, 2, 0], dt)]),))),
    "searchsorted": (NUMERIC, lambda rng, dt: (
        lambda a, v: (np.searchsorted(a, v), np.searchsorted(a, v, side="right"), np.searchsorted(a, v[0]),
                      np.searchsorted(a, 1.5)),
        (np.sort(rand(rng, dims(rng, 1, 1, 6), dt)), rand(rng, dims(rng, 2), dt)))),
}


def _flat(values):
    out = []
    for v in values:
        out += _flat(v) if isinstance(v, tuple | list) else [v]
    return out


def _case(name, dtype, seed):
    fn, args = CASES[name][1](np.random.default_rng(seed), dtype)
    if name == "bincount":
        args = (args[0], np.random.default_rng(seed).standard_normal(args[0].shape[0]))
    return fn, args


def check(fn, args, level):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = _flat(fn(*args))
        got = _flat(jl.jit(fn, level=level)(*args))
    assert_same(got, [np.asarray(e) for e in expected], rtol=2e-5, atol=1e-5)


@pytest.mark.parametrize("name,dtype", [(n, d) for n, (dts, _) in CASES.items() for d in dts])
def test_O0_agrees_with_numpy(name, dtype):
    for seed in range(4):
        check(*_case(name, dtype, seed), "O0")


def _everything(x, v, i, w):
    return (np.diff(x, axis=0), np.roll(x, 2), np.trace(x), np.tril(x), np.triu(x, 1), np.cross(x[:, :3], x[:, 1:]),
            np.subtract.outer(v, w), np.maximum.accumulate(x, axis=1), np.add.accumulate(v),
            np.multiply.reduce(x, axis=1), np.cov(x), np.corrcoef(x), np.linalg.norm(x, 1), np.linalg.norm(v),
            np.bincount(i, minlength=6), np.histogram(w, 3, range=(-1, 1)), np.searchsorted(np.linspace(-1, 1, 4), w))


@pytest.mark.parametrize("level", first_fast("O1", "O2"))
def test_compiled_program_using_them_all_agrees_with_numpy(level):
    rng = np.random.default_rng(1)
    check(_everything, (rng.standard_normal((3, 4)), rng.standard_normal(5).astype(np.float32),
                        rng.integers(0, 6, 7), rng.standard_normal(7)), level)


@pytest.mark.slow
@pytest.mark.parametrize("level", ["O1", "O2"])
@pytest.mark.parametrize("name,dtype", [(n, d) for n, (dts, _) in CASES.items() for d in dts])
def test_compiled_agrees_with_numpy(name, dtype, level):
    check(*_case(name, dtype, 0), level)


@pytest.mark.parametrize("call,message", [
    (lambda x: np.bincount(x.astype(np.int64)), r"np.bincount\(x, minlength=N\)"),
    (lambda x: np.histogram(x, 4, range=(x.min(), 1.0)), "traced range"),
    (lambda x: np.histogram(x, [0.0, 1.0]), "bins=<int>"),
    (lambda x: np.linalg.svd(x), r"np.linalg.svd\(a, compute_uv=False\)"),
    (lambda x: np.subtract.accumulate(x), "np.subtract.accumulate"),
    (lambda x: np.divide.reduce(x), "np.divide.reduce"),
    (lambda x: np.add.reduceat(x, [0]), "np.add.reduceat"),
    (lambda x: np.subtract.reduce(x), "np.subtract.reduce"),
    (lambda x: np.polyfit(x[0], x[1], 1), "np.polyfit"),
    (lambda x: np.linalg.eigh(x), "np.linalg.eigh"),
])
def test_what_is_not_supported_is_refused_by_name(call, message):
    with pytest.raises(UnsupportedOp, match=message):
        jl.jit(call, level="O0")(np.ones((2, 3)))


@pytest.mark.parametrize("level", ["O0", "O1", "O2"])
def test_bincount_values_outside_its_static_length_are_an_error_not_uncounted(level):
    counted = jl.jit(lambda x: np.bincount(x, minlength=5), level=level)
    np.testing.assert_array_equal(counted(np.array([0, 1, 1, 4])), np.bincount([0, 1, 1, 4], minlength=5))
    for bad in ([0, 5], [-1, 0]):
        with pytest.raises(jl.InputError, match=r"out of range \(from the np.\w+ at .*test_numpy_functions.py:"):
            counted(np.array(bad))


@pytest.mark.parametrize("level", ["O0", "O1"])
def test_histogram_of_a_large_array_is_one_pass_and_matches_numpy(level):
    """The data's own range, many bins and values on the edges: counts equal numpy's exactly."""
    x = np.concatenate([np.linspace(-3, 7, 100_003), np.random.default_rng(0).standard_normal(50_000)])
    counts, edges = jl.jit(lambda x: np.histogram(x, 1000), level=level)(x)
    want, want_edges = np.histogram(x, 1000)
    np.testing.assert_array_equal(counts, want)
    np.testing.assert_allclose(edges, want_edges, rtol=1e-13, atol=1e-14)    # O1 contracts a*b+c: one rounding
    program = jl.trace(lambda x: np.histogram(x, 1000), x)
    assert max(int(np.prod(v.type.shape)) for op in program.body.ops for v in op.results) < 2 * x.size


def _linalg(a, spd, b, v):
    return (np.linalg.inv(a), np.linalg.det(a), np.linalg.cholesky(spd), np.linalg.solve(a, b),
            np.linalg.solve(a[0], v), np.linalg.solve(a, v), np.linalg.solve(a, b[0]),
            np.linalg.cholesky(spd, upper=True), np.linalg.inv(np.round(a[0] * 3).astype(np.int64) + 9 * np.eye(3, dtype=int)),
            np.linalg.svdvals(a), np.linalg.svd(b, compute_uv=False), np.linalg.norm(a[0], 2),
            np.linalg.norm(b, -2, axis=(2, 1)), np.linalg.norm(a, "nuc", axis=(1, 2), keepdims=True))


@pytest.mark.parametrize("level,dtype", [("O0", "float32"), ("O0", "float64"), ("O1", "float32"),
                                         pytest.param("O2", "float64", marks=pytest.mark.slow)])
def test_linalg_library_kernels_agree_with_numpy(level, dtype):
    rng = np.random.default_rng(2)
    a = (rng.standard_normal((2, 3, 3)) + 3 * np.eye(3)).astype(dtype)
    spd = (a @ a.transpose(0, 2, 1) + np.eye(3)).astype(dtype)
    check(_linalg, (a, spd, rng.standard_normal((2, 3, 2)).astype(dtype), rng.standard_normal(3).astype(dtype)),
          level)


def test_linalg_gradients_match_finite_differences():
    rng = np.random.default_rng(3)
    a, b, v = rng.standard_normal((3, 3)) + 3 * np.eye(3), rng.standard_normal((3, 2)), rng.standard_normal(3)

    def loss(a, b, v):
        return (np.sum(np.linalg.inv(a) * b[:, :1]) + np.linalg.det(a) + np.sum(np.linalg.solve(a, b) ** 2)
                + np.sum(np.linalg.solve(a, v)))

    grads = jl.grad(loss, argnums=(0, 1, 2), level="O0")(a, b, v)
    args = [a, b, v]
    for i, g in enumerate(grads):
        numeric = np.zeros_like(args[i])
        for idx in np.ndindex(numeric.shape):
            step = np.zeros_like(args[i])
            step[idx] = 1e-6
            hi = [x + step if k == i else x for k, x in enumerate(args)]
            lo = [x - step if k == i else x for k, x in enumerate(args)]
            numeric[idx] = (loss(*hi) - loss(*lo)) / 2e-6
        np.testing.assert_allclose(g, numeric, atol=1e-6)


def test_cholesky_gradient_is_refused_with_a_reason():
    with pytest.raises(UnsupportedOp, match="np.cholesky"):
        jl.grad(lambda a: np.sum(np.linalg.cholesky(a)), level="O0")(np.eye(3) * 2)


LINALG_TEXT = """func @f(%a: f64[2,3,3], %b: f64[2,3,4]) -> (f64[2,3,4], f64[2]) {
  %0 = np.solve(%a, %b) : f64[2,3,4]
  %1 = np.det(%a) : f64[2]
  func.return(%0, %1)
}
"""


def test_linalg_ops_print_parse_and_check_square_operands():
    assert str(jl.parse(LINALG_TEXT)) == LINALG_TEXT
    with pytest.raises(jl.JitlabError, match=r"np.inv: the square dims of the operand f64\[2,3,4\]: 3 != 4"):
        jl.parse(LINALG_TEXT.replace("np.solve(%a, %b)", "np.inv(%b)"))


@pytest.mark.parametrize("call", [lambda x: np.roll(x, 1, axis=0), lambda x: np.tril(x), lambda x: np.trace(x),
                                  lambda x: np.maximum.accumulate(x, axis=0), lambda x: np.cov(x, rowvar=False)])
def test_a_symbolic_dim_where_a_static_length_is_needed_is_refused(call):
    with pytest.raises(UnsupportedOp, match="along the symbolic dim B"):
        jl.jit(call, level="O0", dynamic={"x": {0: "B"}})(np.ones((4, 3)))


def test_symbolic_dims_flow_through_slices_and_reductions():
    x = np.random.default_rng(4).standard_normal((5, 3))

    def f(x):
        return np.diff(x, axis=0), np.linalg.norm(x, axis=1), np.add.accumulate(x), np.searchsorted([0.0, 1.0], x)

    assert_same(_flat(jl.jit(f, level="O0", dynamic={"x": {0: "B"}})(x)), _flat(f(x)))


def test_an_order_numpy_rejects_is_a_trace_error():
    with pytest.raises(jl.JitlabError, match="invalid norm order 'max' for matrices"):
        jl.jit(lambda x: np.linalg.norm(x, "max"), level="O0")(np.ones((2, 3)))


@pytest.mark.parametrize("level", ["O0", "O2"])
def test_a_singular_matrix_is_a_jitlab_error_and_numpys_linalg_error(level):
    for call in (np.linalg.inv, lambda a: np.linalg.cholesky(a - 2)):
        with pytest.raises(jl.JitlabError, match=r"np.(inv: Singular matrix|cholesky: Matrix is not positive)"):
            jl.jit(lambda a, call=call: call(a) * 2, level=level)(np.ones((3, 3)))
    with pytest.raises(np.linalg.LinAlgError):
        jl.jit(lambda a, b: np.linalg.solve(a, b), level=level)(np.zeros((2, 2)), np.ones(2))

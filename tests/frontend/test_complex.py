"""complex64 and complex128: each feature traced and run at O0, O1 and O2 on the CPU against plain
numpy (the function run untraced), and what jitlab refuses, by error class and message."""

import os
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jitlab as jl
from jitlab.errors import JitlabError, ParseError, UnsupportedError
from tests.budget import compiled_examples

LEVELS = ("O0", "O1", "O2")
# Each level compiles its own kernels (seconds each on a cold cache): by default the complex128
# variants run at every level and the rest at O0 and O1; JITLAB_COMPLEX_ALL_LEVELS=1 runs all at all.
ALL = os.environ.get("JITLAB_COMPLEX_ALL_LEVELS") == "1"
SOME = LEVELS if ALL else ("O0", "O1")


def levels_for(dtype) -> tuple[str, ...]:
    return LEVELS if np.dtype(dtype) == np.complex128 else SOME
RNG = np.random.default_rng(17)
RTOL = {np.dtype(np.complex64): 2e-5, np.dtype(np.complex128): 1e-12}


def crand(*shape, dtype=np.complex128):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)


def shape(rank=2):
    return tuple(int(n) for n in RNG.integers(2, 6, rank))


def run_numpy(fn, args):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        out = fn(*[np.array(a, copy=True) for a in args])
    return out if isinstance(out, tuple) else (out,)


def check(fn, *args, levels=LEVELS, rtol=None, bitwise=False):
    """fn jitted at each level gives numpy's results: same dtypes and shapes, close values."""
    want = run_numpy(fn, args)
    precision = max((a.dtype for a in args if a.dtype.kind == "c"), key=lambda d: d.itemsize, default=None)
    rtol = rtol or RTOL.get(precision, 1e-12)
    for level in levels:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
            got = jl.jit(fn, level=level, target="cpu")(*[np.array(a, copy=True) for a in args])
        got = got if isinstance(got, tuple) else (got,)
        assert len(got) == len(want)
        for i, (g, w) in enumerate(zip(got, want)):
            g, w = np.asarray(g), np.asarray(w)
            assert (g.dtype, g.shape) == (w.dtype, w.shape), f"output {i} at {level}"
            np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol, equal_nan=True, err_msg=f"output {i} at {level}")
            if bitwise:     # signed zeros and infinite parts too
                np.testing.assert_array_equal(np.signbit(g.real), np.signbit(w.real), err_msg=f"output {i}")
                np.testing.assert_array_equal(np.signbit(np.imag(g)), np.signbit(np.imag(w)), err_msg=f"output {i}")


# -- the IR ----------------------------------------------------------------------------------
def test_complex_types_and_constants_round_trip_through_text():
    def f(z):
        return z * np.complex64(1.5 - 2j) + np.complex64(complex(np.inf, np.nan)), (z * 1j).astype(np.complex128)

    prog = jl.trace(f, crand(3, dtype=np.complex64))
    text = str(prog)
    assert "c64[3]" in text and "c128[3]" in text and "dense<c64[] (1.5, -2.0)>" in text
    assert "(inf, nan)" in text
    assert str(jl.parse(text)) == text


def test_a_complex_value_in_a_real_constant_is_a_parse_error():
    text = "func @f() -> (f32[]) {\n  %0 = np.constant() {value = dense<f32[] (1.0, 2.0)>} : f32[]\n" \
           "  func.return(%0)\n}\n"
    with pytest.raises(ParseError, match="do not fit f32"):
        jl.parse(text)


@pytest.mark.parametrize("dtype", ["f32", "f64", "i32", "i64", "bool", "c64", "c128"])
def test_promotion_is_numpys(dtype):
    np_dtype = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64, "bool": np.bool_,
                "c64": np.complex64, "c128": np.complex128}[dtype]
    x = np.arange(1, 4).astype(np_dtype)
    z64, z128 = crand(3, dtype=np.complex64), crand(3)

    def f(x, z64, z128):
        return x + z64, x * z128, x - 1j, x / (2 + 0.5j), np.complex64(2 - 1j) * x, z64 + np.float64(2.0), z64 ** 2

    check(f, x, z64, z128, levels=("O0",))
    types = [v.type.dtype for v in jl.trace(f, x, z64, z128).outputs]
    assert types == [np.asarray(w).dtype for w in run_numpy(f, (x, z64, z128))]


# -- elementwise, reductions, contractions at every level ----------------------------------------
# Each check of a kind compiles for one complex width by default and the other under -m slow (the
# generated code differs in its element type alone); the kinds between them cover both widths.
@pytest.mark.parametrize("dtype", [np.complex64, pytest.param(np.complex128, marks=pytest.mark.slow)])
def test_elementwise(dtype):
    z, w = crand(*shape(), dtype=dtype), crand(1, dtype=dtype)

    def f(z, w):
        u = z * z + w
        return (u - w / (z + 1j), -u, u ** 2, u ** -1, u ** 0.5, np.power(u, w), np.abs(u), np.angle(u),
                np.real(u), np.imag(u), u.real, u.imag, np.conj(u), u.conj(), np.exp(u), np.log(u), np.sqrt(u),
                u == z, u != w, np.abs(u) > 2, np.where(np.abs(u) > 2, u, 0), np.where(u.real > 0, u, z),
                np.square(u), np.reciprocal(u), np.angle(u, deg=True))

    check(f, z, w, levels=levels_for(dtype))


def test_generated_kernel_computes_in_complex():
    z = crand(4, 5)
    exe = jl.compile(jl.trace(lambda z: np.conj(z) * np.exp(z) + np.abs(z), z), level="O1", target="cpu")
    sources = " ".join(k.source for k in exe.report.kernels if k.backend == "numba_cpu")
    assert ".conjugate()" in sources and "np.exp(" in sources
    np.testing.assert_allclose(exe(z)[0], np.conj(z) * np.exp(z) + np.abs(z), rtol=1e-12)


def test_special_values():
    z = np.array([0, 1 + 1j, complex(np.inf, 0), complex(0, -np.inf), complex(np.nan, 1), complex(1, np.nan),
                  -1 + 0j, -0.0 - 0j], dtype=np.complex128)

    def f(z):
        return (np.isnan(z), np.isinf(z), np.isfinite(z), z == z, np.abs(z), z.real, z.imag, np.conj(z),
                z * 1, z / 1, z + 0, z * -1, z - 0)

    check(f, z, levels=SOME, bitwise=True)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_abs_over_every_binade_is_within_an_ulp_or_two_of_numpy(dtype):
    # the generated kernel computes |z| as numpy 2's loop does (not libm's hypot, 40x slower there)
    n = 2000
    parts = RNG.standard_normal((2, n)) * np.exp(RNG.uniform(-80, 80, (2, n)))
    z = (parts[0] + 1j * parts[1]).astype(dtype)
    got = jl.jit(np.abs, level="O1")(z)
    want = np.abs(z)
    finite = np.isfinite(want) & (want > 0)
    np.testing.assert_array_equal(np.isfinite(got), np.isfinite(want))
    assert (np.abs(got[finite] - want[finite]) <= 2 * np.spacing(want[finite])).all()


def test_norms():
    z, m = crand(5), crand(3, 4)

    def f(z, m):
        return (np.linalg.norm(z), np.linalg.norm(z, 1), np.linalg.norm(z, np.inf), np.linalg.norm(z, 3),
                np.linalg.norm(m), np.linalg.norm(m, "fro"), np.linalg.norm(m, 1), np.linalg.norm(m, axis=1),
                np.linalg.norm(m, -np.inf), np.linalg.norm(z, 0))

    check(f, z, m, levels=("O0",))
    with pytest.raises(UnsupportedError, match="norm.*'nuc'.*complex"):
        jl.trace(lambda m: np.linalg.norm(m, "nuc"), m)


def test_linalg_library_ops():
    a, b = crand(4, 4), crand(4)
    spd = a @ a.conj().T + 4 * np.eye(4)

    def f(a, b, spd):
        return (np.linalg.inv(a), np.linalg.det(a), np.linalg.solve(a, b), np.linalg.cholesky(spd),
                np.linalg.solve(a.astype(np.complex64), np.ones(4, np.float32)), np.linalg.solve(a.real, b))

    check(f, a, b, spd, rtol=1e-5, levels=SOME)
    with pytest.raises(UnsupportedError, match="svdvals.*complex"):
        jl.trace(lambda m: np.linalg.svdvals(m), a)


def test_reductions():
    z = crand(*shape(3), dtype=np.complex64)

    def f(z):
        return (np.sum(z), z.sum(axis=0), np.prod(z, axis=1), np.mean(z, axis=(0, 2)), z.mean(), np.var(z),
                np.std(z, axis=1), np.cumsum(z, axis=2), np.sum(np.abs(z) ** 2, axis=-1))

    check(f, z, rtol=1e-4, levels=SOME)


@pytest.mark.parametrize("dtype", [np.complex64, pytest.param(np.complex128, marks=pytest.mark.slow)])
def test_matmul_dot_einsum(dtype):
    n, k, m = shape(3)
    a, b, v = crand(n, k, dtype=dtype), crand(k, m, dtype=dtype), crand(k, dtype=dtype)
    real = RNG.standard_normal((k, m)).astype(np.float32)

    def f(a, b, v, real):
        return (a @ b, np.dot(a, v), np.einsum("ij,jk->ik", a, np.conj(b)), a @ real, np.matmul(a, b) * 2 + 1j,
                np.einsum("ij,ij->i", a, a))

    check(f, a, b, v, real, rtol=1e-4 if dtype == np.complex64 else 1e-12, levels=levels_for(dtype))


def test_casts_and_creation():
    x, z = RNG.standard_normal(shape()), crand(*shape())

    def f(x, z):
        zeros = np.zeros(z.shape, dtype=np.complex64)
        full = np.full(x.shape, 1 - 2j)
        ones = np.ones_like(x, dtype=complex)
        empty = np.empty_like(z)
        empty[...] = 3j
        return (x.astype(np.complex64), z.astype(np.float32), z.astype(np.int32), z.astype(bool),
                z.astype(np.complex64), zeros + 1, full * x, ones, empty, np.zeros_like(z), x + 0j,
                np.real(x), np.imag(x), np.angle(x), np.conj(x))

    check(f, x, z, levels=SOME)


def test_complex_cast_to_real_warns_as_numpy_does():
    with pytest.warns(np.exceptions.ComplexWarning):
        jl.trace(lambda z: z.astype(np.float64), crand(3))


# -- kernels written the way people write them ------------------------------------------------
def mandelbrot(c, iters=8):
    z = np.zeros_like(c)
    count = np.full(c.shape, iters, dtype=np.int32)
    for i in range(iters):
        z = z * z + c
        diverged = np.abs(z) > 2
        count[diverged & (count == iters)] = i
        z[diverged] = 2
    return count, z


def mandelbrot_masked(c, iters=6):
    z = np.zeros_like(c)
    alive = np.ones(c.shape, dtype=bool)
    for _ in range(iters):
        z = np.where(alive, z * z + c, z)
        alive &= np.abs(z) <= 2
    return alive, np.abs(z)


@pytest.mark.parametrize("dtype", [pytest.param(np.complex64, marks=pytest.mark.slow), np.complex128])
def test_mandelbrot(dtype):
    h, w = shape()
    x, y = np.linspace(-2, 1, w), np.linspace(-1.5, 1.5, h)
    c = (x[None, :] + 1j * y[:, None]).astype(dtype)
    check(mandelbrot, c, levels=levels_for(dtype))
    check(mandelbrot_masked, c, levels=SOME)


def contour_integral(theta, a):
    """The integral of exp(z) / (z - a) around the unit circle: 2 pi i exp(a) for |a| < 1."""
    z = np.exp(1j * theta)
    dz = 1j * z * (2 * np.pi / theta.shape[0])
    return np.sum(np.exp(z) / (z - a) * dz)


def test_contour_integral():
    theta = np.linspace(0, 2 * np.pi, 64, endpoint=False)
    a = np.array(0.3 - 0.2j)
    check(contour_integral, theta, a)
    np.testing.assert_allclose(jl.jit(contour_integral, level="O1")(theta, a), 2j * np.pi * np.exp(a), rtol=1e-10)


def butterfly(x):
    """One radix-2 decimation-in-time step of an FFT, over the last axis."""
    n = x.shape[-1]
    even, odd = x[..., ::2], x[..., 1::2]
    twiddle = np.exp(-2j * np.pi * np.arange(n // 2) / n)
    t = twiddle * odd
    return np.concatenate([even + t, even - t], axis=-1)


def test_fft_butterfly():
    x = crand(3, 8)
    check(butterfly, x, levels=SOME)


def test_in_place_updates():
    z, c = crand(*shape()), crand(1)

    def f(z, c):
        z[np.abs(z) > 1] = 0
        z += c
        z *= 1j
        z[0] = z[0] * 2 - c
        z[:, 1:] = np.conj(z[:, :-1])
        return z

    check(f, z, c)


# -- what is refused, and why -----------------------------------------------------------------
@pytest.mark.parametrize("fn, op", [
    (lambda z: z < 1, "np.less"), (lambda z: z >= z, "np.greater_equal"),
    (lambda z: np.maximum(z, 0), "np.maximum"), (lambda z: np.max(z), "np.max"),
    (lambda z: np.min(z, axis=0), "np.min"), (lambda z: np.argmax(z), "np.argmax"),
    (lambda z: np.clip(z, 0, 1), "np.maximum"), (lambda z: np.sin(z), "np.sin"),
    (lambda z: np.tanh(z), "np.tanh"), (lambda z: np.sign(z), "np.sign"),
])
def test_refused_with_the_op_and_dtype_named(fn, op):
    with pytest.raises(UnsupportedError, match=op) as e:
        jl.trace(fn, crand(3, 2, dtype=np.complex64))
    assert "c64" in str(e.value)


def test_ordering_refusal_says_what_to_write_instead():
    with pytest.raises(UnsupportedError, match="lexicographically.*np.abs"):
        jl.trace(lambda z: z > 0, crand(3))


def test_assigning_a_part_is_refused():
    def f(z):
        z.real = 0
        return z

    with pytest.raises(UnsupportedError, match=r"z.real"):
        jl.trace(f, crand(3))


def test_gradients_through_complex_values_are_refused():
    def loss(x):
        return np.sum(np.abs(x * 1j + 1) ** 2)

    with pytest.raises(UnsupportedError, match="complex"):
        jl.grad(loss)(RNG.standard_normal(3))


def test_writing_complex_values_into_a_real_array_is_numpys():
    def scalar(x):
        x[0] = 1j
        return x

    def augmented(x):
        x += 1j
        return x

    def array(x, z):
        x[:] = z
        return x

    x, z = RNG.standard_normal(3), crand(3)
    with pytest.raises(JitlabError, match="complex number 1j"):
        jl.trace(scalar, x)
    with pytest.raises(JitlabError, match="complex128 to the out= array's float64"):
        jl.trace(augmented, x)
    with pytest.warns(np.exceptions.ComplexWarning):
        got = jl.jit(array)(x.copy(), z)
    np.testing.assert_array_equal(got, z.real)


UNARY = [lambda u: -u, np.conj, np.exp, np.sqrt, np.square, lambda u: u * 1j, lambda u: u / (np.abs(u) + 1),
         lambda u: np.where(np.abs(u) > 1, u, u.real), lambda u: np.log(u + 3)]
BINARY = [np.add, np.subtract, np.multiply, lambda u, v: u / (v + 2), lambda u, v: np.where(u == v, u, v)]


@settings(max_examples=compiled_examples(3), deadline=None)
@given(st.data())
def test_random_complex_expressions(data):
    """Random chains of complex ops over broadcast operands, fused at O1, against numpy."""
    dtype = data.draw(st.sampled_from([np.complex64, np.complex128]))
    steps = data.draw(st.lists(st.tuples(st.integers(0, len(UNARY) - 1), st.integers(0, len(BINARY) - 1),
                                         st.booleans()), min_size=1, max_size=5))
    shape = data.draw(st.sampled_from([(3, 4), (1, 5), (2, 1, 3)]))
    z, w = crand(*shape, dtype=dtype), crand(shape[-1], dtype=dtype)

    def f(z, w):
        u = z
        for k, j, unary_first in steps:
            u = BINARY[j](UNARY[k](u), w) if unary_first else UNARY[k](BINARY[j](u, w))
        return u, np.abs(u), np.sum(u, axis=-1)

    check(f, z, w, levels=("O0", "O1"), rtol=1e-3 if dtype == np.complex64 else 1e-9)

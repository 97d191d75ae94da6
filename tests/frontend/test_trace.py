"""Tracing: program structure, captured values, signatures, and what must fail clearly."""

import numpy as np
import pytest

import jitlab as jl
from jitlab.errors import InputError, TraceError, UnsupportedOp
from tests.programs import assert_same

rng = np.random.default_rng(0)
X = rng.standard_normal((4, 8)).astype(np.float32)
W = rng.standard_normal((8, 3)).astype(np.float32)


def test_outputs_keep_their_structure():
    def f(x):
        return {"sum": x.sum(), "parts": [x * 2, (x - 1, x + 1)], "n": 3}

    out = jl.jit(f, level="O0")(X)
    assert set(out) == {"sum", "parts", "n"}
    assert isinstance(out["parts"], list) and isinstance(out["parts"][1], tuple)
    np.testing.assert_allclose(out["parts"][1][0], X - 1)
    assert out["n"] == 3 and out["n"].dtype == np.asarray(3).dtype


def test_pytree_inputs_are_named_after_parameters():
    def f(x, params):
        return x @ params["w"] + params["b"]

    params = {"w": W, "b": np.zeros(3, np.float32)}
    p = jl.trace(f, X, params)
    assert p.input_names == ["x", "params.w", "params.b"]
    np.testing.assert_allclose(jl.jit(f, level="O0")(X, params), X @ W, rtol=1e-6)


def test_small_captured_arrays_are_constants_large_ones_weights():
    small = np.arange(4, dtype=np.float32)
    big_weight = rng.standard_normal((8, 8)).astype(np.float32)

    def f(x):
        return (x @ big_weight)[:, :4] + small

    p = jl.trace(f, X)
    assert list(p.weights) == ["big_weight"]
    names = [op.name for op in p.ops]
    assert names.count("np.weight") == 1 and names.count("np.constant") == 1
    assert_same(jl.compile(p, level="O0")(X), [f(X)])
    big_weight[0, 0] = 100.0        # weights were copied at trace time
    assert p.weights["big_weight"][0, 0] != 100.0


def test_python_scalars_and_static_arguments():
    def f(x, scale, mode="relu"):
        y = x * scale
        return np.maximum(y, 0) if mode == "relu" else np.tanh(y)

    g = jl.jit(f, level="O0")
    np.testing.assert_allclose(g(X, 2.0), f(X, 2.0))
    np.testing.assert_allclose(g(X, 2.0, mode="tanh"), f(X, 2.0, "tanh"), rtol=1e-6)
    np.testing.assert_allclose(g(X, 3.0), f(X, 3.0))
    assert g.cache_size == 3


def test_retrace_on_new_signature_and_cache_hit_on_same():
    g = jl.jit(lambda x: x * 2, level="O0")
    g(X)
    g(X + 1)
    assert g.cache_size == 1
    g(X[:2])
    g(X.astype(np.float64))
    assert g.cache_size == 3


def test_nested_jit_inlines():
    inner = jl.jit(lambda x: np.exp(x) + 1)

    def outer(x):
        return inner(x) * 2

    p = jl.trace(outer, X)
    assert [op.name for op in p.ops].count("np.exp") == 1
    np.testing.assert_allclose(jl.jit(outer, level="O0")(X), outer(X), rtol=1e-6)


def test_symbolic_batch_dimension():
    def f(x, w):
        return np.maximum(x @ w, 0).sum(axis=1)

    p = jl.trace(f, jl.spec(("B", 8), np.float32), W)
    assert "f32[B,8]" in str(p) and "f32[B]" in str(p)
    exe = jl.compile(p, level="O0")
    for b in (1, 5, 0):
        x = rng.standard_normal((b, 8)).astype(np.float32)
        np.testing.assert_allclose(exe(x, W)[0], f(x, W), rtol=1e-5)
    with pytest.raises(InputError, match="dim 1 must be 8"):
        exe(np.zeros((2, 7), np.float32), W)


def test_dynamic_jit_serves_all_batch_sizes_with_one_program():
    g = jl.jit(lambda x: (x * 2).sum(axis=0), level="O0", dynamic={"x": {0: "B"}})
    for b in (2, 3, 7):
        np.testing.assert_allclose(g(np.ones((b, 4), np.float32)), np.full(4, 2.0 * b))
    assert g.cache_size == 1


def test_symbolic_constraint_names_symbol_and_inputs():
    p = jl.trace(lambda a, b: a + b, jl.spec(("B", 3)), jl.spec(("C", 3)))
    assert "where B == C" in str(p)
    exe = jl.compile(p, level="O0")
    with pytest.raises(InputError, match=r"requires B == C.*B=2, C=4"):
        exe(np.zeros((2, 3), np.float32), np.zeros((4, 3), np.float32))


def test_symbolic_slices_are_checked_at_call_time():
    p = jl.trace(lambda x: x[2:], jl.spec(("B", 3)))
    exe = jl.compile(p, level="O0")
    assert exe(np.ones((5, 3), np.float32))[0].shape == (3, 3)
    with pytest.raises(InputError, match="B-2"):
        exe(np.ones((1, 3), np.float32))
    with pytest.raises(UnsupportedOp, match="symbolic dim B"):
        jl.trace(lambda x: x[:2], jl.spec(("B", 3)))


@pytest.mark.parametrize("fn,error,message", [
    (lambda x: np.fft.fft(x), UnsupportedOp, "np.fft.fft is not supported"),
    (lambda x: np.partition(x, 1), UnsupportedOp, "np.partition is not supported"),
    (lambda x: np.cbrt(x), UnsupportedOp, "np.cbrt is not supported"),
    (lambda x: x if x.sum() > 0 else -x, TraceError, "truth value"),
    (lambda x: float(x[0, 0]), TraceError, "float value"),
    (lambda x: np.asarray(x) + 1, TraceError, "cannot be converted to a numpy array"),
    (lambda x: x[x > 0], UnsupportedOp, "data-dependent shape"),
    (lambda x: np.where(x > 0), UnsupportedOp, "one argument"),
    (lambda x: np.add(x, 1, where=x > 0), UnsupportedOp, "where="),
    (lambda x: x.reshape(3, 3), jl.ShapeError, "element count"),
    (lambda x: x[5], TraceError, "out of bounds"),
    (lambda x: x @ x, jl.ShapeError, "np.matmul"),
    (lambda x: "text", TraceError, "returned a str"),
    (lambda x: np.gradient(x), UnsupportedOp, "np.gradient"),
])
def test_unsupported_and_wrong_code_fails_clearly(fn, error, message):
    with pytest.raises(error, match=message) as info:
        jl.trace(fn, X)
    assert "<lambda>" in str(info.value), "the error must name the traced function"


def test_writing_into_a_numpy_array_from_outside_is_refused():
    outside = np.zeros(3, np.float32)

    def f(x):
        outside[0] = x[0, 0]
        return x

    with pytest.raises(TraceError, match="made outside the traced function"):
        jl.trace(f, X)


def test_errors_point_at_the_user_line():
    def model(x):
        y = x * 2
        return y @ np.ones((3, 3), np.float32)   # the bad line

    with pytest.raises(jl.ShapeError) as info:
        jl.trace(model, X)
    line = model.__code__.co_firstlineno + 2
    assert f"test_trace.py:{line}" in str(info.value)
    assert "in model" in str(info.value)


def test_leaking_a_tracer_fails():
    leaked = []
    jl.trace(lambda x: leaked.append(x) or x, X)
    with pytest.raises(TraceError, match="another trace"):
        jl.trace(lambda x: x + leaked[0], X)


def test_unhashable_static_argument():
    with pytest.raises(TraceError, match="neither an array nor hashable"):
        jl.jit(lambda x, opts: x, level="O0")(X, {1, 2})


def test_static_argnums_are_python_values_while_tracing():
    def f(x, n, shape):
        return (x * n if n > 1 else -x).reshape(shape)

    jf = jl.jit(f, level="O0", static_argnums=(1, 2))
    x = np.arange(4, dtype=np.float32)
    for n in (np.int64(3), np.int64(0), np.array(2)):
        np.testing.assert_array_equal(jf(x, n, (2, 2)), f(x, int(n), (2, 2)))
    assert jf.cache_size == 3
    assert jl.trace(f, x, np.int64(3), (4,), static_argnums=(1, 2)).input_names == ["x"]
    with pytest.raises(InputError, match="static_argnums"):
        jl.jit(f, static_argnums=5)(x, 3, (4,))


def test_a_long_unrolled_loop_warns_once_naming_its_line(monkeypatch):
    from jitlab.frontend import tracer

    monkeypatch.setattr(tracer, "LONG_TRACE", 50)

    def stencil(u):
        for _ in range(40):
            u = 0.5 * (u + 1.0)             # every op of the program is made here
        return u

    with pytest.warns(jl.LongTraceWarning, match=r"recorded 50 ops, 50 of them at .*test_trace.py:\d+") as seen:
        program = jl.trace(stencil, np.ones(4, np.float32), capture_loops=False)     # unrolled, as asked
    assert len([w for w in seen if w.category is jl.LongTraceWarning]) == 1
    np.testing.assert_allclose(jl.compile(program, level="O0")(np.ones(4, np.float32))[0], stencil(np.ones(4)))

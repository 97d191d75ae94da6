"""Every ordered pair (and some triples) of jl.jit at each level, jl.jit with donation,
jl.grad and jl.value_and_grad, against the numpy answer of the unwrapped transform.

The function is f(w, x) = sum(w**3 * x) with a rank-0 w, so grad of grad is defined:
its k-th derivative in w is known in closed form, and a wrapper applied to a tuple
(value_and_grad's result) or to a non-scalar is an error both with and without jit."""

import itertools
import math

import numpy as np
import pytest

import jitlab as jl
from jitlab.errors import JitlabError

WRAPPERS = {
    "jit-O0": lambda g: jl.jit(g, level="O0"),
    "jit-O1": lambda g: jl.jit(g, level="O1"),
    "jit-O2": lambda g: jl.jit(g, level="O2"),
    "jit-donate": lambda g: jl.jit(g, level="O2", donate_argnums=0),
    "grad": jl.grad,
    "value_and_grad": jl.value_and_grad,
}
TRIPLES = [("jit-O1", "grad", "grad"), ("value_and_grad", "jit-O2", "grad"), ("jit-donate", "value_and_grad", "jit-O0"),
           ("jit-O2", "jit-O0", "grad"), ("grad", "jit-O1", "jit-O2"), ("jit-O0", "value_and_grad", "grad"),
           ("jit-O2", "jit-donate", "value_and_grad")]


def f(w, x):
    return (w * w * w * x).sum()


def derivative(k: int, w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The k-th derivative of f in w: sum(x) * d^k/dw^k w**3 (w rank 0), or the gradient (w rank 1)."""
    if w.ndim == 1:
        return (w ** 3 * x).sum() if k == 0 else 3 * w * w * x
    return x.sum() * math.perm(3, k) * w ** (3 - k)


def oracle(chain: tuple[str, ...], w: np.ndarray, x: np.ndarray):
    """What the chain of wrappers (outermost first) gives, or JitlabError where it is undefined."""
    kind, k = "value", 0
    for name in reversed(chain):
        if name.startswith("jit"):
            continue
        if kind != "value" or (k > 0 and w.ndim > 0):     # differentiating a tuple or a non-scalar
            return JitlabError
        kind, k = ("value", k + 1) if name == "grad" else ("pair", k)
    if kind == "pair":
        return derivative(k, w, x), derivative(k + 1, w, x)
    return derivative(k, w, x)


def wrap(chain: tuple[str, ...]):
    g = f
    for name in reversed(chain):
        g = WRAPPERS[name](g)
    return g


def check_chain(chain: tuple[str, ...], w_shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(len(chain))
    g = wrap(chain)
    for _ in range(2):      # the second call takes the compiled entry from the cache
        w = rng.uniform(0.5, 1.5, w_shape).astype(np.float32)
        x = rng.uniform(-1, 1, 3).astype(np.float32)
        expected = oracle(chain, w, x)
        if expected is JitlabError:
            with pytest.raises(JitlabError):
                g(w.copy(), x)
            return
        got = g(w.copy(), x)       # a donated w may be overwritten: give it a copy
        if isinstance(expected, tuple):
            assert isinstance(got, tuple) and len(got) == 2
            for a, e in zip(got, expected):
                np.testing.assert_allclose(a, e, rtol=1e-5)
        else:
            assert not isinstance(got, tuple)
            np.testing.assert_allclose(got, expected, rtol=1e-5)
    if chain[0].startswith("jit"):       # the outer level compiled it, not an inner one
        assert g.last.level == {"jit-O0": "O0", "jit-O1": "O1"}.get(chain[0], "O2")


@pytest.mark.parametrize("chain", list(itertools.product(WRAPPERS, repeat=2)), ids="/".join)
def test_pairs_of_wrappers(chain):
    check_chain(chain, ())


@pytest.mark.parametrize("chain", TRIPLES, ids="/".join)
@pytest.mark.parametrize("w_shape", [(), (3,)], ids=["scalar", "vector"])
def test_triples_of_wrappers(chain, w_shape):
    check_chain(chain, w_shape)


def test_jit_of_value_and_grad_keeps_every_gradient():
    def loss(w1, w2, x, y):
        return (((x @ w1) @ w2 - y) ** 2).mean()

    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in [(4, 5), (5, 2), (3, 4), (3, 2)]]
    expected = jl.value_and_grad(loss, argnums=(0, 1), level="O0")(*args)
    value, (g1, g2) = jl.jit(jl.value_and_grad(loss, argnums=(0, 1)))(*args)
    np.testing.assert_allclose(value, loss(*args), rtol=1e-5)
    np.testing.assert_allclose(g1, expected[1][0], rtol=1e-5)
    np.testing.assert_allclose(g2, expected[1][1], rtol=1e-5)


def test_wrappers_keep_their_own_fields():
    inner = jl.jit(f, level="O0")
    outer = jl.jit(inner, level="O2")
    assert outer.fn is inner and outer.level == "O2" and outer.__name__ == "f"
    g = jl.grad(jl.value_and_grad(f), argnums=0)
    assert g.with_value is False and g.fn.with_value is True


def test_static_argnums_through_grad():
    def scaled(w, k):
        return (w * w).sum() * (k if k > 0 else -k)

    g = jl.jit(jl.grad(scaled), static_argnums=1)
    w = np.arange(3, dtype=np.float32)
    np.testing.assert_allclose(g(w, np.int64(-2)), 4 * w)
    np.testing.assert_allclose(g(w, np.int64(3)), 6 * w)

"""Programs O0 runs that fusion once refused or broke at O1/O2: a reduction's result read along
another dim than its row (it must not join the reduction's loop nest), and merges that close a
cycle through a third cluster. Checked against plain numpy, then on random programs."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jitlab as jl
from tests.budget import compiled_examples, first_fast, slow_o2

# the random programs at O2 fuse as at O1 (test_o2.py draws its own at O2): -m slow
LEVELS = slow_o2("O1", "O2")
rng = np.random.default_rng(0)


pytestmark = pytest.mark.usefixtures("private_cache")


def check(fn, *args, level):
    expected = fn(*args)
    expected = expected if isinstance(expected, tuple) else (expected,)
    got = jl.compile(jl.trace(fn, *args), level=level)(*args)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == np.shape(e) and g.dtype == np.asarray(e).dtype
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-9)


def _matmul_chain(a, m):
    v = a * 2.0
    return ((v @ a) * m) @ ((v * m) @ a)


def _through_a_third_cluster(p, w, q):
    # x = a @ w joins z's cluster with y; merging a into b = a + y would put that cluster both
    # after a (through x) and before b (through y).
    a = p * 2.0
    y = np.exp(q)
    return a @ w + y, a + y


def _operand_and_epilogue_input(a):
    p = a * a
    return a @ p * p


SQUARE = rng.standard_normal((3, 3))
CASES = {
    "max along the other dim": (lambda a, b: a.max(axis=1) + b, (SQUARE, SQUARE.T.copy())),
    "sum along the other dim": (lambda a, b: a.sum(1) * b, (SQUARE, SQUARE + 1)),
    "any along the other dim": (lambda a, b: np.any(a, 1) | b, (SQUARE > 0, SQUARE < 0.5)),
    "rows reversed": (lambda x: x.max(-1, keepdims=True)[::-1], (rng.standard_normal((3, 4)),)),
    "rows reversed then used": (lambda x: x - x.max(-1, keepdims=True)[::-1], (rng.standard_normal((3, 4)),)),
    "transposed row": (lambda x: x.sum(0, keepdims=True).T * x, (SQUARE,)),
    "reduction of another's misaligned broadcast": (lambda a: (a.max(1) + a).sum(1), (SQUARE,)),
    "matmul chain": (_matmul_chain, (SQUARE, rng.standard_normal(3))),
    "a contraction's operand read by its epilogue": (_operand_and_epilogue_input, (SQUARE,)),
    "merge through a third cluster": (_through_a_third_cluster, (SQUARE, SQUARE.T.copy(), SQUARE + 1)),
}


# Which groups fuse is decided by the passes, the same at both levels: O1 runs every case, O2 (which
# emits those groups into segments) its random programs below, and every case under -m slow.
@pytest.mark.parametrize("level", first_fast("O1", "O2"))
@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_fused_programs_match_numpy(level, case):
    fn, args = CASES[case]
    check(fn, *args, level=level)


def test_aligned_reductions_still_fuse_into_one_group():
    x = rng.standard_normal((4, 5))
    softmax = lambda x: np.exp(x - x.max(1, keepdims=True)) / np.exp(x - x.max(1, keepdims=True)).sum(1)[:, None]  # noqa: E731
    exe = jl.compile(jl.trace(softmax, x), level="O1")
    assert len(exe.report.groups) == 1
    np.testing.assert_allclose(exe(x)[0], softmax(x))


REDUCE = ["sum", "max", "min", "mean"]
VIEWS = ["none", "reverse", "transpose", "new_axis_first", "new_axis_last"]


@st.composite
def reduce_then_broadcast(draw):
    """A reduction of a square matrix, a view of its result, an elementwise use beside a full matrix,
    and maybe a second reduction: every way of lining the result up with the matrix."""
    return dict(reduce=draw(st.sampled_from(REDUCE)), axis=draw(st.sampled_from([0, 1, -1])),
                keepdims=draw(st.booleans()), view=draw(st.sampled_from(VIEWS)),
                use=draw(st.sampled_from(["add", "multiply", "maximum"])), again=draw(st.sampled_from([None, 0, 1])))


def _program(spec):
    def fn(a, b):
        r = getattr(a, spec["reduce"])(axis=spec["axis"], keepdims=spec["keepdims"])
        if spec["view"] == "reverse":
            r = r[::-1]
        elif spec["view"] == "transpose":
            r = r.T
        elif spec["view"] == "new_axis_first" and r.ndim == 1:
            r = r[None, :]
        elif spec["view"] == "new_axis_last" and r.ndim == 1:
            r = r[:, None]
        out = getattr(np, spec["use"])(r, b)
        return out if spec["again"] is None else out.sum(axis=spec["again"])

    return fn


@pytest.mark.parametrize("level", LEVELS)
@settings(max_examples=compiled_examples(4))
@given(spec=reduce_then_broadcast())
def test_random_reductions_with_broadcast_consumers(level, spec):
    check(_program(spec), rng.standard_normal((3, 3)), rng.standard_normal((3, 3)), level=level)


@st.composite
def matmul_chains(draw):
    """Steps over square matrices: each reads earlier values (the inputs first) by matmul, an
    elementwise op, a transpose or a broadcast row sum; the last two values are returned."""
    steps = []
    for k in range(draw(st.integers(2, 6))):
        op = draw(st.sampled_from(["matmul", "matmul", "mul", "add", "tanh", "T", "rowsum"]))
        steps.append((op, draw(st.integers(0, k + 2)), draw(st.integers(0, k + 2))))
    return steps


STEP = {"matmul": lambda x, y: x @ y, "mul": lambda x, y: x * y, "add": lambda x, y: x + y,
        "tanh": lambda x, y: np.tanh(x), "T": lambda x, y: x.T, "rowsum": lambda x, y: x.sum(0) * y}


def _chain(steps):
    def fn(a, b, c):
        values = [a, b, c]
        for op, i, j in steps:
            values.append(STEP[op](values[i], values[j]))
        return values[-2], values[-1]

    return fn


@pytest.mark.parametrize("level", LEVELS)
@settings(max_examples=compiled_examples(4))
@given(steps=matmul_chains())
def test_random_matmul_chains(level, steps):
    args = [rng.standard_normal((3, 3)) * 0.5 for _ in range(3)]
    check(_chain(steps), *args, level=level)

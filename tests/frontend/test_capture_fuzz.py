"""Random Python functions with `for` loops, `if`s and `while`s on traced values and dynamic
indices, traced with capture (the default) and checked against the same source run by numpy."""

import os
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jitlab as jl

N = 6               # the arrays' length: a loop index i in [1, N - 1) reads i - 1 and i + 1
_FOLDER = tempfile.mkdtemp(prefix="jitlab-capture-fuzz-")
_CONDITIONS = ["s > 1.0", "x[{i}] > 0.5", "{i} % 2 == 0", "x.sum() < 3.0", "y[{i}] < x[{i}]"]
# x and s are rebound, y is written into: a name both (numpy's aliasing then decides which array a
# write reaches) is refused, tests/frontend/test_capture.py checks that
_ARRAYS = ["x = np.tanh(x * 0.5 + y)", "x = np.roll(x, 1) - 0.25 * y", "s = s * 0.5 + x.mean()"]
_INDEXED = ["y[{i}] = y[{i} - 1] * 0.5 + x[{i} + 1]", "s = s + x[{i}]", "y[{i}] += s * 0.1",
            "y[{i} - 1:{i} + 1] = np.tanh(x[{i}:{i} + 2] - s)"]


@st.composite
def _block(draw, indent: int, depth: int, index: str | None, names: list[int]) -> list[str]:
    pad = "    " * indent
    lines = []
    for _ in range(draw(st.integers(1, 3))):
        kinds = ["array"] + (["indexed"] if index else []) + (["for", "if", "while"] if depth else [])
        kind = draw(st.sampled_from(kinds))
        if kind == "array":
            lines.append(pad + draw(st.sampled_from(_ARRAYS)))
        elif kind == "indexed":
            lines.append(pad + draw(st.sampled_from(_INDEXED)).format(i=index))
        elif kind == "for":
            name = f"i{len(names)}"
            names.append(0)
            bounds = draw(st.sampled_from(["1, N - 1", "N - 2, 0, -1", "2, N - 1"]))
            lines.append(f"{pad}for {name} in range({bounds}):")
            lines += draw(_block(indent + 1, depth - 1, name, names))
        elif kind == "if":
            cond = draw(st.sampled_from([c for c in _CONDITIONS if index or "{i}" not in c]))
            lines.append(f"{pad}if {cond.format(i=index)}:")
            lines += draw(_block(indent + 1, depth - 1, index, names))
            lines.append(f"{pad}else:")
            lines += draw(_block(indent + 1, depth - 1, index, names))
        else:
            name = f"t{len(names)}"
            names.append(0)
            lines.append(f"{pad}{name} = s * 0.0")
            lines.append(f"{pad}while {name} < {draw(st.integers(0, 3))}.0:")
            lines += draw(_block(indent + 1, depth - 1, index, names))
            lines.append(f"{pad}    {name} = {name} + 1.0")
    return lines


@st.composite
def functions(draw, depth: int = 2):
    """(source, fn): `def f(x, y)` over two float64 arrays of length N, returning x, y and s."""
    body = draw(_block(1, depth, None, []))
    source = "\n".join(["import numpy as np", f"N = {N}", "", "def f(x, y):", "    s = x[0] * 0.0", *body,
                        "    return x, y, s", ""])
    path = os.path.join(_FOLDER, f"f{abs(hash(source))}.py")
    with open(path, "w") as out:
        out.write(source)
    scope: dict = {}
    exec(compile(source, path, "exec"), scope)
    return source, scope["f"]


def check(fn, levels):
    rng = np.random.default_rng(0)
    x, y = rng.random(N), rng.random(N)
    xe, ye = x.copy(), y.copy()
    expected = fn(xe, ye)
    for level in levels:
        xs, ys = x.copy(), y.copy()
        got = jl.jit(fn, level=level)(xs, ys)
        for g, e in zip([*got, xs, ys], [*expected, xe, ye], strict=True):    # the arguments it writes into too
            np.testing.assert_allclose(g, e, rtol=1e-9, atol=1e-12, err_msg=level)
    return jl.trace(fn, x, y)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(functions())
def test_random_loops_and_branches_agree_with_numpy(case):
    source, fn = case
    program = check(fn, ("O0",))
    loops = source.count("for ") + source.count("while ") + source.count("if ")
    assert loops == 0 or program.loops, source


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(functions(depth=3))
def test_random_loops_and_branches_agree_with_numpy_at_every_level(case):
    check(case[1], ("O0", "O1", "O2"))

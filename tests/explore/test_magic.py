"""`%%jit`: inputs and outputs by name, equal to plain Python, cached, clear errors."""

import io

import numpy as np
import pytest
from IPython.core.interactiveshell import InteractiveShell

from jitlab.magic import analyze
from jitlab.progress import progress


@pytest.fixture(scope="module")
def ip():
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "jitlab")
    return shell


@pytest.fixture
def ns(ip):
    rng = np.random.default_rng(0)
    ip.user_ns.update(np=np, x=rng.standard_normal((4, 3)).astype(np.float32),
                      w=rng.standard_normal((3, 5)).astype(np.float32), alpha=0.5)
    return ip.user_ns


def magics(ip):
    return ip.magics_manager.registry["JitMagics"]


CELLS = [
    "y = np.maximum(x @ w * alpha, 0.0)\nz = y.sum(axis=1)\n",
    "y = x @ w\ny += 1.0\nn = y.shape[0]\nz = np.exp(y - y.max(axis=1, keepdims=True))\n",
    "t = np.tanh(x)\ny = [t[:, i] * alpha for i in range(3)]\nz = y[0] + y[1] * y[2]\n",
]


@pytest.mark.parametrize("cell", CELLS)
def test_results_equal_plain_python(ip, ns, cell):
    plain = {"np": np, "x": ns["x"].copy(), "w": ns["w"].copy(), "alpha": 0.5}
    exec(cell, plain)
    result = ip.run_cell("%%jit --level O0\n" + cell)
    assert result.success, result.error_in_exec
    for name in analyze(cell).writes:
        expected, actual = plain[name], ns[name]
        if isinstance(expected, list):
            assert all(np.allclose(a, e) for a, e in zip(actual, expected))
        else:
            np.testing.assert_allclose(actual, expected, rtol=1e-5)
            assert type(actual) is type(expected)


def test_last_expression_is_the_cell_value(ip, ns):
    result = ip.run_cell("%%jit --level O0\ny = x * 2\ny.sum(axis=0)\n")
    np.testing.assert_allclose(result.result, (ns["x"] * 2).sum(axis=0), rtol=1e-6)


def test_same_body_and_shapes_hit_the_cache(ip, ns):
    cell = "%%jit --level O0 --name cached\nq = np.sin(x) * alpha\n"
    ip.run_cell(cell)
    ip.run_cell(cell)
    cf = magics(ip).last
    assert cf.traces == 1 and cf.jitted.cache_size == 1
    ns["x"] = np.ones((7, 3), np.float32)
    ip.run_cell(cell)
    assert cf.traces == 2 and ns["q"].shape == (7, 3)
    ns["alpha"] = 2.0                       # a scalar input is static: a new value traces again
    ip.run_cell(cell)
    np.testing.assert_allclose(ns["q"], np.sin(ns["x"]) * 2.0, rtol=1e-6)


def test_errors_point_at_the_cell_line_and_the_kernel_lives_on(ip, ns, capsys):
    result = ip.run_cell("%%jit --level O0\ny = x @ w\nbad = y @ w\n")
    assert not result.success
    message = str(result.error_in_exec)
    assert message.startswith("%%jit cell line 2: bad = y @ w") and "ShapeError" in message
    assert "Traceback" not in capsys.readouterr().out
    assert ip.run_cell("%%jit --level O0\nok = x + 1\n").success
    result = ip.run_cell("%%jit --level O0\ny = x +\n")
    assert "line 1" in str(result.error_in_exec) and "SyntaxError" in str(result.error_in_exec)
    result = ip.run_cell("%%jit --level O9\ny = x\n")
    assert "unknown level" in str(result.error_in_exec)


def test_bench_and_explore_options(ip, ns, capsys):
    assert ip.run_cell("%%jit --level O0 --bench --explore --name bench_me\ny = np.exp(x)\n").success
    out = capsys.readouterr().out
    assert "%%jit bench_me (O0)" in out and "plain Python" in out


def test_analyze_follows_execution_order():
    plan = analyze("x += 1\ny = x * w\nfor i in range(n):\n    y = y + i\nz = [k * y for k in ks]\nimport math\n")
    assert plan.reads == ["x", "w", "range", "n", "ks"]
    assert plan.writes == ["x", "y", "i", "z", "math"]
    assert not plan.last_expr and analyze("y = x\ny").last_expr


def test_progress_names_the_kernel_in_hand():
    out = io.StringIO()
    with progress(3, "compiling", file=out) as p:
        for name in ("k_relu", "k_exp", "k_sum"):
            p.step(name)
    text = out.getvalue()
    assert "compiling" in text and "k_relu" in text and "k_sum" in text and "0/3" in text
    assert p.done == 3


def test_progress_stays_quiet_for_a_single_kernel():
    out = io.StringIO()
    with progress(1, file=out) as p:
        p.step("only")
    assert out.getvalue() == "" and p.done == 1


def test_cells_fill_preallocated_arrays_and_update_in_place(ip, ns):
    out = np.zeros((4, 2), np.float32)
    x = ns["x"]
    alias = x
    before = x.copy()
    ns.update(out=out)
    cell = "for i in range(4):\n    out[i] = x[i, :2] * alpha\nx += 1.0\nx[0, 0] = -1.0\n"
    result = ip.run_cell("%%jit --level O0\n" + cell)
    assert result.success, result.error_in_exec
    np.testing.assert_allclose(out, before[:, :2] * 0.5, rtol=1e-6)
    expected = before + 1.0
    expected[0, 0] = -1.0
    np.testing.assert_allclose(alias, expected, rtol=1e-6)     # the notebook's array, updated in place
    np.testing.assert_allclose(ns["x"], expected, rtol=1e-6)

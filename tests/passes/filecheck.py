"""`check_rewrite`: the FileCheck-style helper behind every pass and rule test.

Input IR text, a pipeline, and either the exact expected IR or CHECK lines. Besides the
text, every call checks what a text comparison cannot: the result verifies and
round-trips through the parser, both programs give the same O0 results on random inputs
holding NaN, inf and signed zeros (bit-identical unless `exact=False`), and the misses
named in `misses` were recorded with their reasons.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

import jitlab as jl
from jitlab.ir.shapes import evaluate_shape
from jitlab.passes.provenance import why_not

SPECIALS = (np.nan, np.inf, -np.inf, 0.0, -0.0)


def check_rewrite(input_ir: str, pipeline: str, expected: str | None = None, *, misses=(), exact: bool = True,
                  bindings: dict[str, int] | None = None, weights=None, seed: int = 0):
    """Runs `pipeline` on `input_ir` and checks the result; returns (program, report).

    `expected` is the whole expected IR, or lines starting with CHECK:, CHECK-NEXT: or
    CHECK-NOT: (which must not appear anywhere); None means "unchanged". `misses` holds
    (rule, text) pairs: why_not(rule, op) must contain text for some op of the input
    that the rule applies to."""
    source = jl.parse(textwrap.dedent(input_ir), weights=weights)
    report = jl.CompileReport()
    result = jl.opt(source, pipeline, verify_each=True, report=report)
    text = str(result)
    assert str(jl.parse(text, weights=result.weights)) == text, "the result does not round-trip through the parser"
    expected_text = str(source) if expected is None else textwrap.dedent(expected).strip("\n") + "\n"
    if expected_text.lstrip().startswith("CHECK"):
        file_check(text, expected_text)
    else:
        assert text == expected_text, f"got:\n{text}\nexpected:\n{expected_text}"
    for rule, reason in misses:
        answers = [why_not(report, rule, op) for op in _roots_of(source, rule)]
        assert any(reason in a for a in answers), f"why_not({rule}) said: {answers}"
    assert_same_results(source, result, bindings or {}, exact, seed)
    return result, report


def _roots_of(program: jl.Program, rule: str) -> list:
    roots = jl.passes.RULES[rule].roots
    return [op for op in program.walk() if roots is None or op.name in roots]


def file_check(text: str, checks: str) -> None:
    """CHECK: a later line contains it; CHECK-NEXT: the next line does; CHECK-NOT: no line does."""
    lines, pos = text.splitlines(), -1
    for check in filter(None, (c.strip() for c in checks.splitlines())):
        kind, _, pattern = check.partition(":")
        pattern = pattern.strip()
        if kind == "CHECK-NOT":
            assert all(pattern not in line for line in lines), f"{pattern!r} is in:\n{text}"
        elif kind == "CHECK-NEXT":
            pos += 1
            assert pos < len(lines) and pattern in lines[pos], f"{pattern!r} is not on line {pos + 1} of:\n{text}"
        else:
            assert kind == "CHECK", f"unknown check {check!r}"
            pos = next((i for i in range(pos + 1, len(lines)) if pattern in lines[i]), None)
            assert pos is not None, f"{pattern!r} not found in order in:\n{text}"


def random_inputs(program: jl.Program, bindings: dict[str, int], seed: int = 0) -> list[np.ndarray]:
    """Arrays for the program's inputs; floats hold NaN, inf and both zeros."""
    rng = np.random.default_rng(seed)
    arrays = []
    for v in program.inputs:
        shape = evaluate_shape(v.type.shape, {s: bindings.get(s, 3) for s in v.type.symbols})
        arrays.append(random_array(rng, shape, v.type.dtype))
    return arrays


def random_array(rng, shape, dtype) -> np.ndarray:
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        values = rng.integers(max(info.min, -9), min(info.max, 9), size=shape, endpoint=True).astype(dtype)
        if values.size:
            values.reshape(-1)[0] = info.min
        return values
    values = (rng.standard_normal(shape) * 3).astype(dtype)
    flat = values.reshape(-1)
    k = min(len(SPECIALS), flat.size // 2)
    flat[rng.choice(flat.size, k, replace=False)] = rng.permutation(SPECIALS)[:k]
    return values


def assert_same_results(a: jl.Program, b: jl.Program, bindings: dict[str, int], exact: bool = True,
                        seed: int = 0, trials: int = 3) -> None:
    """`a` and `b` give the same O0 results on `trials` sets of random inputs."""
    run_a, run_b = jl.compile(a, level="O0"), jl.compile(b, level="O0")
    for trial in range(trials):
        inputs = random_inputs(a, bindings, seed + trial)
        try:
            expected = run_a(*inputs)
        except jl.JitlabError as e:          # a program that fails must keep failing the same way
            with pytest.raises(type(e)):
                run_b(*inputs)
            continue
        for i, (x, y) in enumerate(zip(run_b(*inputs), expected)):
            assert x.shape == y.shape and x.dtype == y.dtype, f"output {i}: {x.dtype}{x.shape} vs {y.dtype}{y.shape}"
            if exact:
                assert_identical(x, y, f"output {i}")
            else:
                np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6, equal_nan=True, err_msg=f"output {i}")


def assert_identical(x: np.ndarray, y: np.ndarray, what: str = "") -> None:
    """Equal bit for bit, up to NaN payloads: same NaNs, same values, same signs of zeros."""
    assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), f"{what}: {x} != {y}"
    if x.dtype.kind == "f":
        same = np.isnan(x) | (np.signbit(x) == np.signbit(y))
        assert same.all(), f"{what}: signs of zeros differ: {x} vs {y}"

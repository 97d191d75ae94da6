"""How many hypothesis examples a test that compiles kernels for each example draws."""

import os

import pytest

# Each such example compiles numba kernels (seconds on CI's loaded 2 cores), so the default run draws a
# few and a thorough run (HYPOTHESIS_PROFILE=thorough, as the conftest reads it) ten times as many.
THOROUGH = os.environ.get("HYPOTHESIS_PROFILE") == "thorough"


def compiled_examples(n: int) -> int:
    """n examples in the default run, 10n in a thorough one."""
    return 10 * n if THOROUGH else n


def first_fast(*values, unpack: bool = False, keep: int = 1):
    """Parameter values of which only the first `keep` run in the default run, the rest under `-m slow`:
    for cases that each compile a large program and differ in a way the first already exercises.
    With `unpack`, each value is a tuple of several argnames' values."""
    return [*values[:keep], *(pytest.param(*(v if unpack else (v,)), marks=pytest.mark.slow) for v in values[keep:])]


def slow_o2(*levels: str) -> list:
    """Levels to parametrize over, O2 under `-m slow`: for a test whose O2 run adds a second compile of
    code paths the O1 run takes (O2's own code keeps its tests in the default run: tests/backends/test_o2.py)."""
    return [pytest.param(level, marks=pytest.mark.slow) if level == "O2" else level for level in levels]

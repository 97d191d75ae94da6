"""jitlab equals plain numpy on random programs (jitlab/fuzz): O0 on many, O1 and O2 on fewer.

Each case is one seed; a failure prints the repro script. JITLAB_FUZZ_EXAMPLES=N runs N
programs per level instead (with `jitlab fuzz` for long runs that write a report).
"""

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jitlab.fuzz import RTOL, Case, build, differences, generate, run_case
from jitlab.fuzz.generate import Choices
from tests.budget import slow_o2

SCALE = int(os.environ.get("JITLAB_FUZZ_EXAMPLES", "0"))
COUNTS = {"O0": SCALE or 150, "O1": SCALE or 12, "O2": SCALE or 12}
FIRST_SEED = {"O0": 0, "O1": 50_000, "O2": 60_000}


@pytest.fixture(autouse=True, scope="module")
def private_module_cache(run_kernels):
    mp = pytest.MonkeyPatch()
    mp.setenv("JITLAB_CACHE_DIR", run_kernels)
    yield
    mp.undo()


def assert_matches_numpy(case, level):
    outcome = run_case(case, level)
    assert outcome.kind in ("pass", "refused"), f"{outcome.kind}: {outcome.detail}\n\n{case.repro()}"


@pytest.mark.parametrize("level", slow_o2("O0", "O1", "O2"))   # O2's random programs: tests/backends/test_o2.py
def test_seeded_programs_match_numpy(level):
    for seed in range(FIRST_SEED[level], FIRST_SEED[level] + COUNTS[level]):
        assert_matches_numpy(generate(seed), level)


class DrawnChoices:
    """Choices drawn by hypothesis, so that a failing program shrinks to a short one."""

    def __init__(self, data):
        self.data = data

    def integer(self, lo: int, hi: int) -> int:
        return self.data.draw(st.integers(lo, hi))

    def pick(self, options):
        return options[self.data.draw(st.integers(0, len(options) - 1))]


@settings(max_examples=SCALE or 20, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                          HealthCheck.data_too_large])
@given(st.data())
def test_drawn_programs_match_numpy_at_o0(data):
    choices: Choices = DrawnChoices(data)
    assert_matches_numpy(build(choices, label="hypothesis"), "O0")


def test_repro_scripts_rebuild_the_inputs_bit_for_bit_and_run():
    for seed in range(60):
        case = generate(seed)
        namespace: dict = {}
        with np.errstate(all="ignore"):
            exec(case.repro(), namespace)
        for i, x in enumerate(case.inputs):
            y = namespace[f"a{i}"]
            assert (y.dtype, y.shape, y.tobytes()) == (x.dtype, x.shape, x.tobytes()), case.repro()
        assert len(namespace["result"]) == len(case.rtols)


def test_a_float32_rounding_keeps_its_tolerance_through_a_cast_to_float64():
    """Found by the O1 run: exp(arctan(float32)).astype(float64) differed from numpy by 1 float32 ulp."""
    x = np.array([1.0, 0.5], np.float32)
    source = "def program(a0):\n    v0 = np.exp(np.arctan(a0))\n    return (v0.astype(np.float64),)\n"
    got = (np.exp(np.arctan(x)) * np.float32(1 + 2**-23)).astype(np.float64)    # 1 ulp off
    case = Case(source, [x], [RTOL[np.dtype(np.float32)]])
    assert differences([got], case.expected(), case.rtols) == []
    assert differences([got], case.expected(), [RTOL[np.dtype(np.float64)]]) != []

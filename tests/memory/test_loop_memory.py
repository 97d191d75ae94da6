"""A loop's or branch's own memory in the plan: the peak is what lives outside the op plus one run of
its region (one iteration's live set, its nested regions included), whatever the trip count, at every
level, in dry runs at other sizes and under memory_limit."""

import numpy as np
import pytest

import jitlab as jl
from jitlab.errors import OutOfMemoryError

N, COPIES = 64, 50


def spread(c):
    """A sorted temporary COPIES times the size of `c`: what a body holds besides its carries."""
    return np.sort(np.tile(c, COPIES))[:c.shape[0]]


def looped(steps):
    def f(x):
        return jl.fori_loop(0, steps, lambda i, c: c * 0.5 + spread(c) * 0.1, x)
    return f


def branched(x, flag):
    return jl.cond(flag, lambda c: spread(c) + 1.0, lambda c: c - 1.0, x)


def held_by_spread(x) -> int:
    """The bytes numpy's own spread(x) holds at once: the tiled copy, and the sort's result."""
    tiled = np.tile(x, COPIES)
    return tiled.nbytes + np.sort(tiled).nbytes


@pytest.mark.parametrize("level", ["O0", "O1", "O2"])
def test_one_iteration_of_a_loop_body_is_in_the_peak_whatever_the_trip_count(level):
    x = np.ones(N, np.float32)
    plans = [jl.dry_run(jl.trace(looped(steps), x), level=level) for steps in (3, 300)]
    for plan in plans:
        step = plan.peak_step()
        assert plan.region_bytes[step] >= held_by_spread(x)
        assert plan.peak_bytes >= plan.fixed_bytes + held_by_spread(x)
        assert sum(1 for b in plan.region_bytes if b) == 1
    assert plans[0].peak_bytes == plans[1].peak_bytes
    # one iteration's, not all of them: far under what 300 iterations' temporaries would take
    assert plans[1].peak_bytes < 10 * held_by_spread(x)


@pytest.mark.parametrize("level", ["O0", "O1", "O2"])
def test_a_branch_counts_its_larger_side_and_its_results_once(level):
    x = np.ones(N, np.float32)
    plan = jl.dry_run(jl.trace(branched, x, np.bool_(True)), level=level)
    assert plan.region_bytes[plan.peak_step()] >= held_by_spread(x)
    # sides that make only their results (the if's own, counted outside it) hold nothing more
    cheap = jl.dry_run(jl.trace(lambda c, flag: jl.cond(flag, lambda v: v + 1.0, lambda v: v * 2.0, c),
                                x, np.bool_(True)), level=level)
    assert not any(cheap.region_bytes) and cheap.peak_bytes <= plan.peak_bytes - held_by_spread(x)


def test_a_nested_loop_counts_its_inner_body_inside_the_outer_one():
    def nested(x):
        return jl.fori_loop(0, 2, lambda i, c: jl.fori_loop(0, 3, lambda j, d: d * 0.5 + spread(d) * 0.1, c), x)

    x = np.ones(N, np.float32)
    plan = jl.dry_run(jl.trace(nested, x), level="O1")
    assert plan.region_bytes[plan.peak_step()] >= held_by_spread(x)


def test_a_dry_run_at_another_size_scales_the_body():
    def outer_products(x):     # an n x n temporary each iteration: a contraction's operand is materialized
        return jl.fori_loop(0, 4, lambda i, c: np.outer(c, c) @ c * 1e-3, x)

    program = jl.trace(outer_products, jl.spec(("N",)))
    for n in (N, 8 * N):
        plan = jl.dry_run(program, {"x": (n,)}, level="O1")
        assert plan.region_bytes[plan.peak_step()] >= n * n * 4


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_a_limit_between_the_outside_and_the_body_is_refused_naming_the_loop(level):
    x = np.ones(N, np.float32)
    program = jl.trace(looped(3), x)
    plan = jl.dry_run(program, level=level)
    outside = max(live - own for live, own in zip(plan.live_bytes, plan.region_bytes))
    with pytest.raises(OutOfMemoryError, match=r"loop or branch holds .* of its own \(one iteration\)"):
        jl.compile(program, level=level, memory_limit=outside + held_by_spread(x) // 2)
    exe = jl.compile(program, level=level, memory_limit=plan.peak_bytes)
    expected = x.copy()
    for _ in range(3):
        expected = expected * 0.5 + spread(expected) * 0.1
    np.testing.assert_allclose(exe(x)[0], expected, rtol=1e-6)

"""Dry run (plans for any shapes, nothing allocated) against runs that really allocate, and
the memory budget that stops a compilation or a call before it runs out of memory."""

import tracemalloc

import numpy as np
import pytest

import jitlab as jl
from jitlab.bench import models
from jitlab.errors import InputError, JitlabError, OutOfMemoryError
from jitlab.runtime.memexec import run_with_arena, run_with_pool
from jitlab.runtime.pool import MemoryPool
from jitlab.units import parse_bytes
from tests.budget import slow_o2
from tests.memory.oracles import check_plan, planned


def chain_program():
    fn, _ = models.chain(n=1)
    return jl.trace(fn, jl.spec(("N",)), jl.spec(("N",)))


@pytest.mark.parametrize("level", ["O0", "O1", "O2"])
def test_dry_run_of_shapes_no_machine_has_allocates_nothing(level):
    exe = jl.compile(chain_program(), level=level)
    n = 1 << 40                                   # 4 TiB per array
    tracemalloc.start()
    plan = exe.dry_run({"x": (n,), "y": (n,)})
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 1 << 20
    assert plan.bindings == {"N": n} and plan.mode == {"O0": "eager", "O1": "dynamic", "O2": "static"}[level]
    check_plan(plan)
    constants = sum(op.attrs["value"].array.nbytes for op in exe.program.ops if op.name == "np.constant")
    if level == "O0":                             # the interpreter keeps every value to the end
        assert plan.lower_bound_bytes == plan.naive_bytes == plan.peak_bytes == 8 * 4 * n + constants   # x, y and six results
    else:                                         # one fused group: two inputs and its output (constants inlined)
        assert plan.lower_bound_bytes == 12 * n
    if level == "O2":
        assert plan.peak_bytes == 12 * n


@pytest.mark.parametrize("level", slow_o2("O1", "O2"))
def test_dry_run_equals_the_compile_time_plan_for_the_compiled_shapes(level):
    fn, args = models.build("transformer", quick=True)
    exe = jl.compile(jl.trace(fn, *args), level=level)
    assert exe.dry_run() == exe.report.memory
    assert exe.dry_run({"x": args[0].shape}) == exe.report.memory


def test_dry_run_against_what_a_run_observes():
    """A symbolic transformer planned for one sequence length, then run at that length with
    every buffer from a real pool (O1's plan) and from a real arena (O2's): the programs and plans
    are the passes' (no kernel is built), run by the memory interpreters."""
    fn, args = models.build("transformer", quick=True)
    program = jl.trace(fn, jl.spec((1, "S", 32)))
    x = np.random.default_rng(0).standard_normal((1, 24, 32)).astype(np.float32)
    expected = jl.compile(program, level="O0")(x)
    plan = jl.dry_run(program, {"x": x.shape}, level="O1")
    pool = MemoryPool(reserve=plan.first_chunk_bytes)
    outputs, timeline = run_with_pool(planned(program, "O1").program, [x], pool, plan.bindings)
    np.testing.assert_array_equal(outputs[0], expected[0])
    assert plan.peak_bytes == plan.fixed_bytes + max(t["reserved"] for t in timeline)
    assert plan.lower_bound_bytes == plan.fixed_bytes + max(t["requested"] for t in timeline)
    plan = jl.dry_run(program, {"x": x.shape}, level="O2")
    check_plan(plan)
    np.testing.assert_array_equal(run_with_arena(planned(program, "O2").program, plan, [x], plan.bindings)[0],
                                  expected[0])


def test_dry_run_of_a_program_per_level():
    program = chain_program()
    shapes = {"x": (1000,), "y": (1000,)}
    eager = jl.dry_run(program, shapes, level="O0")
    assert eager.peak_bytes == eager.naive_bytes == eager.lower_bound_bytes
    static = jl.dry_run(program, shapes, level="O2")
    compiled = jl.compile(program, level="O2").dry_run(shapes)
    # Each compilation makes its own group ops (fresh uids): compare everything but who produced what.
    strip = lambda plan: [(b.name, b.bytes, b.offset, b.first, b.last, b.kind) for b in plan.buffers]  # noqa: E731
    assert (static.peak_bytes, strip(static)) == (compiled.peak_bytes, strip(compiled))
    assert static.peak_bytes < eager.peak_bytes
    resnet, _ = models.resnet50(width=8, size=64)
    plan = jl.dry_run(jl.trace(resnet, jl.spec(("B", 3, 64, 64))), {"x": (1 << 16, 3, 64, 64)}, level="O2")
    check_plan(plan)
    assert plan.bindings == {"B": 1 << 16} and plan.peak_bytes > 1 << 30


@pytest.mark.parametrize("shapes, message", [
    ({"z": (3,)}, r"@chain has no input named 'z'; its inputs are x, y"),
    ({"x": (3,)}, r"input 'y' is f32\[N\]; give its shape"),
    ({"x": (3, 1), "y": (3,)}, r"input 'x' is f32\[N\], got shape \[3, 1\]"),
    ({"x": (3,), "y": (4,)}, r"input 'y': dim 0 must be N = 3"),
    ({"x": ("a",), "y": (4,)}, r"must be a tuple of ints"),
])
def test_dry_run_input_errors(shapes, message):
    exe = jl.compile(chain_program(), level="O1")
    with pytest.raises(InputError, match=message):
        exe.dry_run(shapes)


@pytest.mark.parametrize("text, value", [("4GiB", 4 << 30), ("512 MB", 512 * 10**6), ("1.5G", 3 << 29),
                                         ("64kib", 64 << 10), (1000, 1000), ("12", 12)])
def test_parse_bytes(text, value):
    assert parse_bytes(text) == value


@pytest.mark.parametrize("bad", ["lots", "4 GiBs", -1, 0, True, 1.5, "0B"])
def test_parse_bytes_errors(bad):
    with pytest.raises(JitlabError, match="memory_limit"):
        parse_bytes(bad)


def test_budget_fails_at_compile_time_for_static_shapes():
    fn, args = models.build("mlp", quick=True)
    program = jl.trace(fn, *args)
    need = jl.compile(program, level="O1").report.memory.peak_bytes
    with pytest.raises(OutOfMemoryError, match=r"planned peak of .* \(dynamic plan\) is over the memory limit of "
                                               r"1.00 KiB; largest tensors live at step \d+: %\w+") as info:
        jl.compile(program, level="O1", memory_limit="1KiB")
    assert info.value.peak_bytes == need and info.value.limit_bytes == 1024
    assert info.value.plan.largest_live_at_peak(1)[0].bytes == max(
        b.bytes for b in info.value.plan.buffers if b.alias_of is None)
    exe = jl.compile(program, level="O1", memory_limit=need)
    np.testing.assert_allclose(exe(*args)[0], fn(*args), rtol=1e-5)


def test_budget_fails_at_call_time_for_symbolic_shapes_before_running():
    program = chain_program()
    exe = jl.compile(program, level="O2", memory_limit="64KiB")
    small = np.ones(256, np.float32)
    np.testing.assert_array_equal(exe(small, small)[0], models.chain(n=1)[0](small, small))
    big = np.ones(1 << 14, np.float32)
    with pytest.raises(OutOfMemoryError, match=r"@chain at O2: the planned peak of 192.00 KiB \(static plan, "
                                               r"N=16384\) is over the memory limit of 64.00 KiB"):
        exe(big, big)
    jitted = jl.jit(models.chain(n=1)[0], level="O1", memory_limit=1 << 14)
    with pytest.raises(OutOfMemoryError):
        jitted(big, big)

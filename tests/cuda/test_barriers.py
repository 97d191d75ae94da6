"""The barrier check (backends/numba_cuda/barriers.py): it finds every barrier some threads of a
block may skip in hand-written kernels, passes the device functions' own barriers, refuses such a
kernel at generation time, and passes every kernel the backend generates for the random-program
suite and the bench programs."""

import ast
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import jitlab as jl
from jitlab.backends.numba_cuda import barriers
from jitlab.bench import cuda as bench
from tests.programs import programs

BAD = {   # name -> (kernel body after `def k0(a, n):`, the barrier's line in the body, words of the reason)
    "under_thread_if": ("if cuda.threadIdx.x == 0:\n    cuda.syncthreads()", 2, "thread-dependent condition"),
    "thread_strided_loop": ("for i in range(cuda.threadIdx.x, n, cuda.blockDim.x):\n    a[i] = _block_sum(a[i], a, 0)",
                            2, "thread-dependent bounds"),
    "after_thread_return": ("if a[cuda.threadIdx.x] > 0:\n    return\ncuda.syncthreads()", 3, "`return` at line"),
    "after_thread_continue": ("for i in range(cuda.blockIdx.x, n, cuda.gridDim.x):\n    if a[i] > 0:\n"
                              "        continue\n    v = cuda.syncthreads_or(1)", 4, "`continue` at line"),
    "thread_break_before": ("for i in range(n):\n    v = _block_max(a[i], a, 0)\n    if a[cuda.threadIdx.x] > i:\n"
                            "        break", 2, "`break` at line"),
    "bound_from_thread_variable": ("m = n\nif cuda.threadIdx.x > 3:\n    m = 2\nfor i in range(cuda.blockIdx.x, m, 1):\n"
                                   "    cuda.syncthreads()", 5, "thread-dependent bounds"),
    "bound_from_memory": ("for i in range(a[0]):\n    cuda.syncthreads()", 2, "thread-dependent bounds"),
    "while_on_grid_index": ("i = cuda.grid(1)\nwhile i < n:\n    cuda.syncthreads()\n    i += cuda.gridsize(1)", 3,
                            "thread-dependent bounds"),
    "in_a_thread_choice": ("v = _block_sum(1, a, 0) if cuda.threadIdx.x < n else 0", 1, "thread-dependent choice"),
    "after_a_short_circuit": ("v = a[cuda.threadIdx.x] > 0 and _block_all(True, a, True)", 1,
                              "thread-dependent operand"),
    "warp_shuffle_under_lane_if": ("if cuda.laneid == 0:\n    v = cuda.shfl_down_sync(-1, 1, 1)", 2,
                                   "thread-dependent condition"),
}

GOOD = [
    # a row kernel's shape: grid-stride over rows, threads stride inside, the reduction after the loop
    "for i0 in range(cuda.blockIdx.x, n, cuda.gridDim.x):\n    acc = 0\n"
    "    for r in range(cuda.threadIdx.x, a.shape[1], cuda.blockDim.x):\n        acc += a[i0, r]\n"
    "    acc = _block_sum(acc, a, 0)\n    if cuda.threadIdx.x == 0:\n        a[i0, 0] = acc",
    # uniform early exits and conditions built from the block, the grid and the parameters
    "if n == 0:\n    return\nk = cuda.blockIdx.x * 2 + n\nwhile k < n * cuda.gridDim.x:\n    cuda.syncthreads()\n"
    "    k += cuda.gridDim.x\n    if k > a.shape[0]:\n        break\nv = a[0] if n > 1 else _block_min(1, a, 0)",
]


def _kernel(body: str) -> str:
    return "from numba import cuda\n\n\n@cuda.jit(cache=True)\ndef k0(a, n):\n" + textwrap.indent(body, "    ") + "\n"


@pytest.mark.parametrize("case", BAD)
def test_each_barrier_some_threads_may_skip_is_found(case):
    body, line, words = BAD[case]
    [found] = barriers.violations(_kernel(body))
    assert (found.function, found.line, words in found.reason) == ("k0", 5 + line, True), found


@pytest.mark.parametrize("body", GOOD)
def test_barriers_at_block_uniform_points_pass(body):
    assert barriers.violations(_kernel(body)) == []
    assert barriers.barrier_sites(barriers.kernels(_kernel(body))[0])


def test_device_functions_are_not_checked_as_kernels():
    source = "from numba import cuda\n\n\n@cuda.jit(device=True)\ndef f(a):\n    if a[0]:\n        cuda.syncthreads()\n"
    assert barriers.kernels(source) == []


def test_the_device_functions_that_hold_barriers_hold_them_at_uniform_points():
    held = barriers.device_barriers()
    assert {"_block_sum", "_block_max", "_block_any", "_block_all", "_shfl_down"} <= held.holders
    assert held.block_counts["_block_sum"] == held.block_counts["_block_any"] == 3     # on a GPU
    tree = ast.parse((Path(barriers.__file__).parent / "devicefns.py").read_text())
    checked = 0
    for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name in held.holders):
        if any(isinstance(n, ast.FunctionDef) for n in ast.walk(fn) if n is not fn):
            continue                  # a factory: its nested functions are checked themselves
        assert barriers.function_violations(fn, held.holders) == [], fn.name
        checked += 1
    assert checked >= 5


def test_no_block_vote_is_left_in_the_device_functions():
    # syncthreads_or/and is the barrier numba once compiled into two (numba issue #9770): the hang
    source = (Path(barriers.__file__).parent / "devicefns.py").read_text()
    assert "syncthreads_or(" not in source and "syncthreads_and(" not in source


def test_a_kernel_with_a_skippable_barrier_is_refused_when_generated(monkeypatch):
    from jitlab.backends.numba_cuda import codegen

    bad = "def k0(a0, o0, n0):\n    if cuda.threadIdx.x < n0:\n        cuda.syncthreads()\n"
    real = codegen.generate
    monkeypatch.setattr(codegen, "generate", lambda *a, **k: _swap(real(*a, **k), bad))
    program = jl.trace(lambda x: np.exp(x), np.ones(4, np.float32))
    with pytest.raises(jl.CompileError, match=r"(?s)jit.group 0 .*k0, line \d+: cuda.syncthreads\(\) under `if"):
        jl.compile(program, level="O1", target="cuda", progress=False)


def _swap(kernel, source: str):
    kernel.source = source
    return kernel


def _assert_checked(exe) -> int:
    """The barrier sites of the executable's generated kernels, all at uniform points."""
    sites = 0
    for record in exe.report.kernels:
        if record.backend == "numba_cuda":
            assert barriers.violations(record.source) == [], record.source
            sites += sum(len(barriers.barrier_sites(fn)) for fn in barriers.kernels(record.source))
    return sites


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=programs(max_ops=8, special_values=True))
def test_every_kernel_of_random_programs_passes_the_check(case):
    for level in ("O1", "O2"):
        _assert_checked(jl.compile(case.program, level=level, target="cuda", progress=False))


def test_random_programs_reach_block_reductions():
    # the suite above is not vacuous: programs with row reductions have barriers to check
    x = np.ones((3, 5), np.float32)
    exe = jl.compile(jl.trace(lambda x: (np.any(x > 0, axis=1), x - x.max(axis=1, keepdims=True)), x),
                     target="cuda", progress=False)
    assert _assert_checked(exe) >= 2


@pytest.mark.parametrize("program", bench.suite("small"), ids=lambda p: p.name)
def test_every_kernel_of_the_bench_programs_passes_the_check(program, generated_contractions):
    # O2 only: O1's kernels are the same groups' (the random programs above take both levels); products
    # as generated tiles, which hold barriers, even where cuBLAS would take them
    sites = _assert_checked(jl.compile(jl.trace(program.fn, *program.args), level="O2", target="cuda",
                                       progress=False))
    if program.name in ("softmax", "layernorm", "mlp", "mlp_train", "transformer"):
        assert sites > 0, program.name       # reductions and tiled products hold barriers

"""Elementwise and reduction CUDA kernels against the O0 reference, on tiny shapes."""

import numpy as np
import pytest

import jitlab as jl
from tests.budget import first_fast
from tests.cuda.helpers import check, layouts, on_cuda, rand

# One block of 32 threads and at most one block (two in the other dims) per launch: with
# tens of elements every grid-stride loop goes round more than once.
TINY_GRID = {"threads_per_block": 32, "max_blocks": 1}


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm(x, g, b):
    m = x.mean(axis=-1, keepdims=True)
    v = ((x - m) ** 2).mean(axis=-1, keepdims=True)
    return (x - m) / np.sqrt(v + 1e-5) * g + b


def test_elementwise_chain_is_one_grid_stride_kernel():
    exe = check(lambda x, y: np.maximum((x * y + x - 0.5 * y) ** 2, 0), rand(100), rand(100), **TINY_GRID)
    assert layouts(exe) == ["generated CUDA kernel (elementwise layout): 6 op(s) in one pass over memory"]
    source = exe.report.kernels[0].source
    assert "for t in range(cuda.grid(1), n0, step * 4):" in source and "@cuda.jit" in source
    # four elements a grid apart per pass, all eight loads before any arithmetic or store
    lines = [line.strip() for line in source.splitlines()]
    loads = [k for k, line in enumerate(lines) if "= a0[" in line or "= a1[" in line]
    stores = [k for k, line in enumerate(lines) if line.startswith("o0[")]
    assert len(loads) == 8 and len(stores) == 4 and max(loads) < min(stores)
    assert all(lines[k + 1].startswith("o0[") for k, line in enumerate(lines) if line.startswith("if t + "))


def test_broadcasts_transposes_and_slices_are_index_maps():
    x, b, c = rand(6, 8), rand(8), rand(6, 1)
    exe = check(lambda x, b, c: np.exp(x.T[::2, 1:] + 1.0) * c.T[:, 1:] + b[::2, None], x, b, c, **TINY_GRID)
    assert len(exe.report.kernels) == 1
    check(lambda x: np.tanh(x + x[:, :1]) - np.sin(x), rand(5, 7))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_transcendentals_and_rounding(dtype):
    x = (rand(4, 9) * 3).astype(dtype)
    check(lambda x: (np.tanh(x) + np.exp(x) + np.log1p(np.abs(x)) + np.floor(x) + np.round(x) + np.ceil(x)
                     + np.sqrt(np.abs(x)) + np.sign(x) + np.arctan2(x, x + 1) + np.expm1(x) + np.trunc(x)), x)


def test_sign_of_negative_zero_is_positive_zero():
    # numpy's sign(-0.0) is +0.0; the GPU's sign once returned its -0.0 operand, flipping 1 / sign(x) to -inf.
    for dtype in (np.float32, np.float64):
        check(lambda x: 1.0 / np.sign(x), np.array([-0.0, 0.0, -2.5, 3.0, np.nan], dtype))


def test_integer_and_float_division_follow_numpy():
    a = np.array([7, -7, 7, -7, 5, 0, 3], np.int32)
    b = np.array([2, 2, -2, -2, 0, 3, 0], np.int32)
    check(lambda a, b: (a // b) * 10 + a % b + np.abs(a) - np.maximum(a, b), a, b)
    x = np.array([7.5, -7.5, 7.5, -7.5, 1.0, 0.0, -0.0], np.float32)
    y = np.array([2.0, 2.0, -2.0, -2.0, 0.0, 3.0, 3.0], np.float32)
    check(lambda x, y: np.floor_divide(x, y) + np.mod(x, y) * 3 + np.fmod(x, y), x, y)



def test_division_at_special_values_and_integer_edges():
    # The device's floor division and remainder are the CPU's npy_divmod (scalar_semantics): 7.0 // 0.1
    # is 69 and -5.0 // inf is -1; integer MIN // -1 wraps, and every division by zero gives 0.
    x = np.array([7.0, 1.0, np.inf, -5.0, 0.5, -0.0, 3.0, np.nan], np.float64)
    y = np.array([0.1, 1e-3, 3.0, np.inf, -np.inf, 2.0, 0.0, 1.0], np.float64)
    check(lambda x, y: (x // y, x % y, np.fmod(x, y)), x, y)
    for dtype in (np.int8, np.int64, np.uint8):
        info = np.iinfo(dtype)
        a = np.array([info.min, info.max, 7, 0, 3, info.min], dtype)
        b = np.array([info.max, 0, 3, 0, 2, info.max if info.min == 0 else -1], dtype)
        check(lambda a, b: (a // b, a % b, np.fmod(a, b), a ** np.maximum(b, 0)), a, b)
        if info.min < 0:      # a negative integer power is refused as numpy refuses it, never C's answer
            with pytest.raises(jl.InputError, match="negative integer powers"):
                check(lambda a, b: a ** b, a, b)


def test_reduction_read_along_another_dim_and_size_zero_broadcasts():
    # The max is read along b's reduced dim: it gets a kernel of its own (it once failed to compile).
    a, b = rand(3, 3), rand(3, 3)
    check(lambda a, b: a.max(axis=1) + b, a, b)
    check(lambda a, b: a ** b, np.array([2]), np.zeros((0, 3), np.int64))

def test_casts_saturate_like_the_reference():
    x = np.array([1.5, -2.5, 1e10, -1e10, np.nan, 0.0, 255.9], np.float32)
    check(lambda x: (x.astype(np.int32) + 1, x.astype(np.uint8), x > 0), x)


@pytest.mark.parametrize("shape", first_fast((3, 5), (7, 33), (1, 70), (2, 3, 4)))
def test_row_reductions_are_block_reductions(shape):
    x = rand(*shape)
    exe = check(softmax, x, **TINY_GRID)
    assert "rows layout" in layouts(exe)[0]
    assert "_block_max(" in exe.report.kernels[0].source and "_block_sum(" in exe.report.kernels[0].source
    g, b = rand(shape[-1]), rand(shape[-1])
    check(layernorm, x, g, b, rtol=1e-4, atol=1e-4, **TINY_GRID)


# mean is sum's kernel with a scale, min is max's, prod sum's with another identity: -m slow
@pytest.mark.parametrize("op", first_fast("sum", "max", "mean", "min", "prod", keep=2))
def test_each_reduction_kind_over_rows_and_columns(op):
    x = rand(5, 6) * 0.7
    reduce = getattr(np, op)
    exe = check(lambda x: (reduce(x, axis=1), reduce(x, axis=0, keepdims=True) * 2), x, **TINY_GRID)
    assert sorted(k.choice.split("(")[1].split(" ")[0] for k in exe.report.kernels) == ["columns", "rows"]
    check(lambda x: reduce(x, axis=(0, 1)), x, **TINY_GRID)


def test_any_and_all_reduce_like_the_other_block_reductions():
    # Rows longer than the block, one deciding element in a later warp's stride or the last lane, all
    # true and all false: any/all go through the shuffle-and-shared reducer, not a block vote (a
    # syncthreads_or that numba compiled into two barriers hung a GPU).
    x = np.zeros((5, 75), np.float32)
    x[0, 74] = x[1, 33] = 2.0
    x[2] = 2.0
    x[3, :40] = 2.0
    exe = check(lambda x: (np.any(x > 1.0, axis=1), np.all(x > 1.0, axis=1)), x, **TINY_GRID)
    sources = "".join(k.source for k in exe.report.kernels)
    assert "_block_any(" in sources and "_block_all(" in sources and "syncthreads_" not in sources
    check(lambda x: (np.any(x > 1.0, axis=1), np.all(x > -2.0, axis=1)), rand(4, 9), threads_per_block=64)


def test_integer_reductions():
    x = np.arange(-12, 12, dtype=np.int64).reshape(4, 6)
    check(lambda x: (x.sum(axis=1), x.max(axis=1), x.min(axis=0)), x, **TINY_GRID)


def test_kernel_source_is_in_the_report_and_readable():
    exe = check(softmax, rand(4, 6))
    record = exe.report.kernels[0]
    assert record.backend == "numba_cuda" and record.source.startswith('"""jit.group 0')
    compile(record.source, "kernel", "exec")          # valid Python, as written to the cache
    assert "red_float32 = cuda.shared.array(REDUCE_SLOTS, np.float32)" in record.source


def test_rows_that_do_not_fill_a_warp_and_rows_longer_than_a_block():
    check(softmax, rand(3, 3), threads_per_block=32)
    check(softmax, rand(2, 75), threads_per_block=32, max_blocks=1)
    # 32 threads take 4 elements a pass: 150 is two passes, the second with copies past the row's end
    exe = check(layernorm, rand(2, 150), rand(150), rand(150), rtol=1e-4, atol=1e-4, threads_per_block=32,
                max_blocks=1)
    assert "for r in range(cuda.threadIdx.x, n1, cuda.blockDim.x * 4):" in exe.report.kernels[0].source
    check(lambda x: (np.any(x > 1.9, axis=1), x.max(axis=1)), np.linspace(0, 2, 300, dtype=np.float32).reshape(2, 150),
          threads_per_block=32, max_blocks=1)


def test_launch_configuration_comes_from_shapes_and_device():
    from jitlab.backends.numba_cuda.device import info
    from jitlab.backends.numba_cuda.launch import Policy

    policy = Policy(info())
    assert policy.elementwise(10).block[0] % 32 == 0
    assert policy.rows(5, 3).block == (32, 1, 1)
    assert policy.elementwise(10**9).grid[0] <= info().resident_blocks(policy.elementwise(10**9).block[0])
    assert Policy(info(), 96, 1).elementwise(1000) == jl.backends.numba_cuda.launch.Launch((1, 1, 1), (96, 1, 1))


def test_grids_fill_a_real_device_once():
    from jitlab.backends.numba_cuda.device import DeviceInfo
    from jitlab.backends.numba_cuda.launch import PER_THREAD, Launch, Policy

    h200 = Policy(DeviceInfo("H200", False, 132, 1024, (2**31 - 1, 65535, 65535), 48 << 10, 141e9, 4.8e12, 2048, 32))
    # 8 resident blocks of 256 threads on each of 132 SMs: one full wave, each thread then grid-strides
    assert h200.elementwise(1 << 24) == Launch((132 * 8, 1, 1), (256, 1, 1))
    assert h200.elementwise(1000) == Launch((1, 1, 1), (256, 1, 1))        # 250 threads take 4 elements each
    assert h200.elementwise(256 * PER_THREAD * 3).grid == (3, 1, 1)
    assert h200.rows(4096, 1024) == Launch((132 * 8, 1, 1), (256, 1, 1))    # a block per row, 4 elements a thread
    assert h200.rows(4096, 100) == Launch((4096, 1, 1), (32, 1, 1))         # 32 threads x 4 cover 100


def test_composite_scalar_ops_match_o0():
    from jitlab.bench.cuda_ptx import composites

    on_cuda(composites(), [rand(4, 8) * 2], rtol=1e-5, atol=1e-6, **TINY_GRID)


class _Recorded:
    """A kernel whose launches are recorded: `fn[grid, block, stream](*args)`."""

    def __init__(self, fn):
        self.fn, self.calls = fn, []

    def __getitem__(self, config):
        launch = self.fn[config]

        def call(*args):
            self.calls.append(args)
            return launch(*args)

        return call


def _def_params(source: str, name: str) -> list[str]:
    import ast

    fn = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef) and n.name == name)
    return [a.arg for a in fn.args.args]


LAUNCH_CASES = {   # case -> function, arguments, part of a kernel's choice
    "rows": (softmax, [rand(5, 6)], "rows layout"),
    "columns": (lambda x: x.sum(axis=0) * x, [rand(4, 3)], "columns layout"),
    "flat": (lambda x, y: np.exp(x) * y, [rand(3, 4), rand(3, 4)], "elementwise layout"),
    "tile": (lambda x, w: np.tanh(x @ w + 1.0), [rand(6, 5), rand(5, 4)], "epilogue fused"),
    "tile_then_epilogue": (lambda x, w: (x @ w) + (x @ w)[:, ::-1], [rand(6, 5), rand(5, 4)], "into a temporary"),
}


@pytest.mark.parametrize("case", LAUNCH_CASES)
def test_launches_pass_what_the_kernel_params_name(case, generated_contractions):
    from jitlab.backends.numba_cuda.kernels import signature

    fn, args, choice = LAUNCH_CASES[case]
    program = jl.trace(fn, *args)
    exe = jl.compile(program, level="O1", target="cuda")
    kernels = [s.kernel for s in exe._runner.steps if s.kernel is not None]
    assert any(choice in k.choice for k in kernels)
    for kernel in kernels:
        for launcher in kernel.meta["launchers"]:
            launcher.fn = _Recorded(launcher.fn)
    for got, want in zip(exe(*args), jl.compile(program, level="O0")(*args)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    for kernel in kernels:
        for k, launcher in enumerate(kernel.meta["launchers"]):
            params = launcher.params
            assert _def_params(kernel.source, f"k{k}") == [p.name for p in params]
            assert launcher.fn.calls
            for call in launcher.fn.calls:
                assert len(call) == len(params)
                for a, p, t in zip(call, params, signature(params)):
                    if p.is_array:
                        assert (np.dtype(a.dtype), a.ndim) == (p.dtype, p.ndim) == (np.dtype(str(t.dtype)), t.ndim)
                    else:
                        assert isinstance(a, (int, np.integer)) and str(t) == "int64"
        assert kernel.params == (launcher.params if len(kernel.meta["launchers"]) == 1 else ())

"""A contraction's generated epilogue, and a generated elementwise kernel, loops over the last two
dims as one where every value it touches spans both or is broadcast over both
(kernels.py, `_Generated.merge_last_two`), and equals O0 either way. (O2 calls a heavy group's kernel, the same one: test_winograd.py's O2
cases run merged epilogues.)"""

import numpy as np
import pytest

import jitlab as jl
from tests.budget import first_fast
from tests.programs import assert_same

RNG = np.random.default_rng(11)
MERGED = "loops over the last two dims as one"


pytestmark = pytest.mark.usefixtures("private_cache")


def conv_then(extra_shape: tuple[int, ...]) -> jl.Program:
    """relu(conv2d(x, w) + b + r), b per channel, r of `extra_shape` (broadcast against 1x6x5x7)."""
    r = ",".join(map(str, extra_shape))
    return jl.parse(f"""func @f(%x: f32[1,3,5,7], %w: f32[6,3,1,1], %b: f32[6,1,1], %r: f32[{r}]) -> (f32[1,6,5,7]) {{
  %c = np.conv2d(%x, %w) : f32[1,6,5,7]
  %s = np.add(%c, %b) : f32[1,6,5,7]
  %t = np.add(%s, %r) : f32[1,6,5,7]
  %y = np.relu(%t) : f32[1,6,5,7]
  func.return(%y)
}}""")


SHAPES = [
    ((1, 6, 5, 7), True),       # a residual: full in every dim
    ((6, 1, 1), True),          # per channel: broadcast over both
    ((5, 7), True),             # one map for every channel: spans both
    ((7,), False),              # per column: merging would read it at the wrong index
    ((6, 5, 1), False),         # per row
]


# one case of each answer in the default run: each case compiles a convolution
@pytest.mark.parametrize("extra_shape, merged", first_fast(SHAPES[1], SHAPES[3], SHAPES[0], SHAPES[2], SHAPES[4],
                                                           unpack=True, keep=2))
def test_epilogue_merges_the_last_two_dims_only_where_it_reads_the_same_elements(extra_shape, merged):
    program = conv_then(extra_shape)
    inputs = [RNG.standard_normal(s).astype(np.float32) for s in ((1, 3, 5, 7), (6, 3, 1, 1), (6, 1, 1), extra_shape)]
    exe = jl.compile(program, level="O1")
    choice = next(k.choice for k in exe.report.kernels if "conv" in k.choice)
    assert (MERGED in choice) is merged, choice
    for _ in range(2):
        assert_same(exe(*inputs), jl.compile(program, level="O0")(*inputs), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("extra_shape, merged", SHAPES)
def test_an_elementwise_kernel_merges_them_alike(extra_shape, merged):
    # a bias broadcast over 7x7 maps left an inner loop of 7 and a division per row of it: 2048
    # channels of it ran 4x slower than merged
    r = ",".join(map(str, extra_shape))
    program = jl.parse(f"""func @f(%x: f32[1,6,5,7], %b: f32[6,1,1], %r: f32[{r}]) -> (f32[1,6,5,7]) {{
  %s = np.add(%x, %b) : f32[1,6,5,7]
  %t = np.add(%s, %r) : f32[1,6,5,7]
  %y = np.relu(%t) : f32[1,6,5,7]
  func.return(%y)
}}""")
    inputs = [RNG.standard_normal(s).astype(np.float32) for s in ((1, 6, 5, 7), (6, 1, 1), extra_shape)]
    exe = jl.compile(program, level="O1", target="cpu")
    (choice,) = [k.choice for k in exe.report.kernels]
    assert choice.startswith("generated") and (MERGED in choice) is merged, choice
    for _ in range(3):          # the third call takes the fast path
        assert_same(exe(*inputs), jl.compile(program, level="O0")(*inputs), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_merged_loops_take_empty_arrays(level):
    # an empty array cannot reshape with a -1 (jitlab fuzz, seed 777359: a matmul epilogue over
    # (0, 0, 0)); a bias over an empty batch is the elementwise case
    def program(a0, x, b):
        v1 = np.concatenate([a0, a0, a0], axis=-1)
        return np.fabs(a0.mean(axis=2) @ v1.T), np.maximum(x + b, 0)

    inputs = (np.zeros((0, 3, 0)), np.ones((0, 3, 4), np.float32), np.ones((0, 1, 1), np.float32))
    fn = jl.jit(program, level=level, target="cpu")
    for _ in range(3):
        assert_same(fn(*inputs), program(*inputs), rtol=0, atol=0)

"""Compiling for cuda and comparing with the O0 reference."""

import numpy as np

import jitlab as jl
from tests.programs import assert_same

rng = np.random.default_rng(0)


def rand(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def on_cuda(program, inputs, level="O1", rtol=2e-5, atol=1e-5, **options):
    """Runs `program` on cuda at `level`, checks it equals O0, returns the Executable."""
    expected = jl.compile(program, level="O0")(*inputs)
    exe = jl.compile(program, level=level, target="cuda", verify_each=True, progress=False, **options)
    assert_same(exe(*inputs), expected, rtol=rtol, atol=atol)
    return exe


def check(fn, *args, level="O1", **options):
    """Traces `fn` on `args`, runs it on cuda and compares with O0."""
    return on_cuda(jl.trace(fn, *args), list(args), level, **options)


def layouts(exe) -> list[str]:
    return [k.choice for k in exe.report.kernels]

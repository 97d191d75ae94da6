"""A generated kernel's parameters come from its code generator as KernelParam records: they name the
function's parameters in its source, in order, and the values the runner passes there."""

import ast

import numpy as np
import pytest

import jitlab as jl
from jitlab.backends.base import ParamRole
from jitlab.ir.opdef import Trait

RNG = np.random.default_rng(0)


pytestmark = pytest.mark.usefixtures("private_cache")


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def def_params(source: str, name: str) -> list[str]:
    """The parameter names of function `name` in `source`, as Python parses them."""
    fn = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef) and n.name == name)
    return [a.arg for a in fn.args.args]


def compiled_groups(fn, *args):
    """(group, kernel) of each generated kernel of fn at O1, after checking fn's results against numpy:
    the kernels refuse arguments other than those their parameters name (numba compiles nothing more)."""
    exe = jl.compile(jl.trace(fn, *args), level="O1", target="cpu")
    want = fn(*[a.copy() for a in args])
    for got, w in zip(exe(*args), want if isinstance(want, tuple) else (want,)):
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)
    return [(s.op, s.kernel) for s in exe._runner.steps if getattr(s, "kernel", None) and s.kernel.params]


def check_params(group, kernel) -> list:
    """The params name k_par's and k_seq's parameters and type the values passed there."""
    params = kernel.params
    assert def_params(kernel.source, "k_par") == def_params(kernel.source, "k_seq") == [p.name for p in params]
    con = next((op for op in group.body.ops if op.has(Trait.CONTRACTION)), None)
    values = {ParamRole.INPUT: list(group.body.args), ParamRole.OUTPUT: list(group.body.last_op.operands),
              ParamRole.INTERMEDIATE: [con.result] if con is not None else []}
    # a contraction's run calls the library, then its generated epilogue
    gen = kernel.run if con is None else kernel.run.epilogue
    flat = gen.layout.flat
    for p in params:
        if p.role is ParamRole.DIM:
            assert p.dtype == np.int64 and not p.is_array
            continue
        v = values[p.role][p.index]
        assert (p.dtype, p.shape, p.ndim) == (v.type.dtype, tuple(v.type.shape), 1 if flat else v.type.rank)
    arrays = [p for p in params if p.is_array]
    if hasattr(gen, "library"):     # the native library's entry: what it was built to take
        assert [(np.dtype(d), n) for d, n in zip(gen.library.dtypes, gen.library.ndims)] == \
               [(p.dtype, p.ndim) for p in arrays]
        assert gen.library.scalars == len(params) - len(arrays)
        return [(p.role, p.index) for p in params]
    # numba's own record of what it compiled each variant for
    signatures = gen.par.signatures + gen.seq.signatures
    assert signatures
    for sig in signatures:
        assert [(np.dtype(str(t.dtype)), t.ndim) if p.is_array else str(t) for t, p in zip(sig, params)] == \
                   [(p.dtype, p.ndim) if p.is_array else "int64" for p in params]
    return [(p.role, p.index) for p in params]


def test_elementwise_with_a_broadcast_operand():
    [(group, kernel)] = compiled_groups(lambda x, b: np.tanh(x) * b + 1.0, rand(3, 4), rand(4))
    assert check_params(group, kernel) == [(ParamRole.INPUT, 0), (ParamRole.INPUT, 1), (ParamRole.OUTPUT, 0),
                                           (ParamRole.DIM, 0), (ParamRole.DIM, 1)]
    assert [p.name for p in kernel.params] == ["a0", "a1", "o0", "n0", "n1"]


def test_flat_elementwise_takes_1d_views():
    [(group, kernel)] = compiled_groups(lambda x, y: np.exp(x) * y, rand(3, 4, 2), rand(3, 4, 2))
    assert kernel.run.layout.flat and check_params(group, kernel)[-1] == (ParamRole.DIM, 0)
    assert {p.ndim for p in kernel.params if p.is_array} == {1}


def test_reduction_rows():
    def softmax(x):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True), e.sum(axis=1)

    [(group, kernel)] = compiled_groups(softmax, rand(5, 6))
    roles = check_params(group, kernel)
    assert roles.count((ParamRole.INPUT, 0)) == 1 and (ParamRole.OUTPUT, 1) in roles


def test_write():
    def write(x):
        y = np.tanh(x)
        y[1:3] = x[1:3] * 2
        return y

    [(group, kernel)] = compiled_groups(write, rand(6, 5))
    assert any(op.name == "np.update_slice" for op in group.body.ops)
    check_params(group, kernel)


def test_contraction_epilogue_takes_the_product_as_an_intermediate():
    w = rand(5, 7)
    [(group, kernel)] = compiled_groups(lambda x: np.tanh(x @ w + 1.0), rand(6, 5))
    assert check_params(group, kernel)[:4] == [(ParamRole.INPUT, 0), (ParamRole.INPUT, 1),
                                               (ParamRole.INTERMEDIATE, 0), (ParamRole.OUTPUT, 0)]


def test_o2_segments_take_what_their_params_name():
    from jitlab.backends.numba_cpu.whole_graph import Fallback, Segment

    w = rand(6, 4)

    def fn(x):
        a = np.tanh(x @ w) * 2.0
        b = np.cumsum(a, axis=1)           # no compiled kernel: a fallback between two segments
        return np.exp(b - a).sum(axis=1), a.reshape(-1)

    x = rand(5, 6)
    exe = jl.compile(jl.trace(fn, jl.spec(("B", 6), np.float32)), level="O2", target="cpu")
    for got, want in zip(exe(x), fn(x)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    steps = exe._runner.steps
    assert [type(s) for s in steps] == [Segment, Fallback, Segment]
    source = exe.report.kernels[0].source
    values = {v.name: v for v in exe.program.inputs} | {r.name: r for op in exe.program.body.ops for r in op.results}
    roles = set()
    for seg in steps[::2]:
        assert def_params(source, seg.name) == [p.name for p in seg.params]
        for p, t in zip(seg.params, compiled_types(seg.fn), strict=True):
            roles.add(p.role)
            if p.role is ParamRole.SYMBOL:
                assert t == "int64" and p.value == "B"
                continue
            assert t == (p.dtype, p.ndim)
            if p.role is ParamRole.VALUE:
                v = values[p.value]
                assert (p.dtype, p.ndim, p.shape) == (v.type.dtype, v.type.rank, tuple(v.type.shape))
    assert {ParamRole.ARENA, ParamRole.OFFSETS, ParamRole.BLAS, ParamRole.VALUE, ParamRole.SYMBOL} <= roles


def compiled_types(fn) -> list:
    """What a compiled segment takes at each parameter, (dtype, ndim) or "int64": as its native
    entry was built, else as numba compiled it."""
    if hasattr(fn, "library"):
        arrays = iter(zip(fn.library.dtypes, fn.library.ndims))
        out = []
        for is_array in fn.arrays:
            dtype, ndim = next(arrays) if is_array else (None, None)
            out.append((np.dtype(dtype), ndim) if is_array else "int64")
        return out
    [sig] = fn.signatures
    return [(np.dtype(str(t.dtype)), t.ndim) if hasattr(t, "ndim") else str(t) for t in sig]

"""Random programs for property tests: hypothesis strategies that build valid `np`
programs (broadcasting, size-0 and rank-0 tensors, reductions, composites, casts,
views) together with inputs to run them on."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from jitlab.ir import Builder, Dense, Program, TensorType, parse

UNARY_FLOAT = ["exp", "tanh", "neg", "abs", "sigmoid", "relu", "sin", "cos", "floor", "ceil", "square",
               "erf", "round", "sign"]
UNARY_POSITIVE = ["sqrt", "log", "rsqrt", "reciprocal"]       # applied to abs(x) + 0.5
BINARY = ["add", "sub", "mul", "maximum", "minimum"]
COMPARE = ["less", "greater", "equal", "greater_equal"]


@dataclass
class Case:
    """A generated program with concrete inputs."""

    program: Program
    inputs: list[np.ndarray]

    def __repr__(self) -> str:
        shapes = ", ".join(f"{a.dtype}{list(a.shape)}" for a in self.inputs)
        return f"Case(inputs=[{shapes}])\n{self.program}"


def _sub_shape(draw, base: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts to `base`: some dims set to 1, maybe leading dims dropped."""
    drop = draw(st.integers(0, len(base)))
    shape = list(base[drop:])
    for i in range(len(shape)):
        if draw(st.booleans()) and draw(st.booleans()):
            shape[i] = 1
    return tuple(shape)


def _broadcasts_to(shape, base) -> bool:
    if len(shape) > len(base):
        return False
    return all(d in (1, b) for d, b in zip(shape[::-1], base[::-1]))


@st.composite
def programs(draw, max_ops: int = 10, dtypes=("f32", "f64"), special_values: bool = False,
             allow_empty: bool = True) -> Case:
    """A random DAG of elementwise, reduction, composite and view ops over broadcastable shapes."""
    dims = st.integers(0 if allow_empty else 1, 4)
    base = tuple(draw(st.lists(dims, min_size=0, max_size=3)))
    dtype = np.dtype(draw(st.sampled_from(dtypes)).replace("f", "float"))
    n_inputs = draw(st.integers(1, 3))
    shapes = [base] + [_sub_shape(draw, base) for _ in range(n_inputs - 1)]
    names = [f"x{i}" for i in range(n_inputs)]
    program = Program("random", [TensorType(s, dtype) for s in shapes], names)
    b = Builder(program.body, constraints=program.constraints)
    values = list(program.inputs)
    for _ in range(draw(st.integers(1, max_ops))):
        values.append(_step(draw, b, values, dtype, base))
    outputs = [values[-1]] + draw(st.lists(st.sampled_from(values), max_size=2))
    program.set_outputs(outputs)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    inputs = [_array(rng, s, dtype, special_values) for s in shapes]
    return Case(program, inputs)


def _array(rng, shape, dtype, special: bool) -> np.ndarray:
    a = rng.standard_normal(shape).astype(dtype) * 2
    if special and a.size:
        flat = a.reshape(-1)
        for v in (np.nan, np.inf, -np.inf, 0.0, -0.0):
            if rng.random() < 0.5:
                flat[rng.integers(0, flat.size)] = v
    return a


def _pick(draw, values, base, dtype):
    candidates = [v for v in values if v.type.dtype == dtype and _broadcasts_to(v.type.shape, base)]
    return draw(st.sampled_from(candidates))


def _step(draw, b: Builder, values, dtype, base):
    kind = draw(st.sampled_from(["unary", "unary", "positive", "binary", "binary", "where", "reduce",
                                 "composite", "cast", "view", "constant", "clip"]))
    x = _pick(draw, values, base, dtype)
    if kind == "unary":
        return b(f"np.{draw(st.sampled_from(UNARY_FLOAT))}", x)
    if kind == "positive":
        shifted = b("np.add", b("np.abs", x), _scalar(b, 0.5, dtype))
        return b(f"np.{draw(st.sampled_from(UNARY_POSITIVE))}", shifted)
    if kind == "binary":
        return b(f"np.{draw(st.sampled_from(BINARY))}", x, _pick(draw, values, base, dtype))
    if kind == "where":
        y = _pick(draw, values, base, dtype)
        cond = b(f"np.{draw(st.sampled_from(COMPARE))}", x, y)
        return b("np.where", cond, x, y)
    if kind == "reduce" and x.type.rank:
        axes = sorted(set(draw(st.lists(st.integers(0, x.type.rank - 1), min_size=1, max_size=2))))
        op = draw(st.sampled_from(["sum", "max", "min", "mean"]))
        if op in ("max", "min") and any(x.type.shape[a] == 0 for a in axes):
            op = "sum"
        return b(f"np.{op}", x, axes=tuple(axes), keepdims=True)
    if kind == "composite" and x.type.rank:
        axis = x.type.rank - 1
        op = draw(st.sampled_from(["softmax", "log_softmax", "layer_norm", "gelu"]))
        if op == "layer_norm":
            return b("np.layer_norm", x, axis=axis)
        if op == "gelu":
            return b("np.gelu", x, approximate=draw(st.sampled_from(["none", "tanh"])))
        return b(f"np.{op}", x, axis=axis)
    if kind == "cast":
        other = np.float64 if dtype == np.float32 else np.float32
        return b("np.cast", b("np.cast", x, dtype=other), dtype=dtype)
    if kind == "view" and x.type.rank:
        flat = b("np.reshape", x, shape=(int(np.prod(x.type.shape)),))
        return b("np.reshape", b("np.exp", flat), shape=x.type.shape)
    if kind == "clip":
        return b("np.clip", x, min=-1.0, max=draw(st.sampled_from([None, 1.5])))
    if kind == "constant":
        c = b.create("np.constant", attrs={"value": Dense(np.full(x.type.shape[-1:], 1.25, dtype))}).result
        return b("np.mul", x, c)
    return b("np.neg", x)


def _scalar(b: Builder, value: float, dtype) -> object:
    return b.create("np.constant", attrs={"value": Dense(np.asarray(value, dtype))}).result


def assert_same(actual, expected, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """Outputs equal to the oracle: same shapes and dtypes, close values, NaN where NaN."""
    assert len(actual) == len(expected), f"{len(actual)} outputs, expected {len(expected)}"
    for i, (a, e) in enumerate(zip(actual, expected)):
        a, e = np.asarray(a), np.asarray(e)
        assert a.shape == e.shape, f"output {i}: shape {a.shape} != {e.shape}"
        assert a.dtype == e.dtype, f"output {i}: dtype {a.dtype} != {e.dtype}"
        if a.dtype.kind in "fc":
            np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, equal_nan=True, err_msg=f"output {i}")
        else:
            np.testing.assert_array_equal(a, e, err_msg=f"output {i}")


def float64_twin(program: Program) -> Program:
    """The same program computing in float64 throughout: what float32 rounding is measured against."""
    return parse(re.sub(r"\bf32\b", "f64", str(program)))


def rounding_noise(program: Program, inputs, expected) -> list[tuple[float, float]]:
    """Per output of the float32 reference `expected`: its largest distance from the float64 twin,
    relative over elements of magnitude 1 or more and absolute over the rest (where each is the
    tolerance that decides).

    An ill-conditioned result carries that much rounding error in any evaluation order: exp of a
    sum near 83 is off by 83 times the sum's relative error (~7.6e-6 an ulp), and sin(exp(7.3)) by
    exp's last-ulp rounding (5e-5); a compiled kernel that sums in another order (reassociated,
    vectorized) or rounds exp elsewhere lands a few ulps away from numpy."""
    import jitlab as jl

    exact = jl.compile(float64_twin(program), level="O0")(*[np.asarray(a, np.float64) if np.asarray(a).dtype
                                                             == np.float32 else a for a in inputs])
    noise = []
    for e, x in zip(expected, exact):
        e, x = np.asarray(e), np.asarray(x)
        if e.dtype != np.float32:
            noise.append((0.0, 0.0))
            continue
        finite = np.isfinite(e) & np.isfinite(x)
        big, small = finite & (np.abs(x) >= 1), finite & (np.abs(x) < 1)
        noise.append((float((np.abs(e[big] - x[big]) / np.abs(x[big])).max(initial=0.0)),
                      float(np.abs(e[small] - x[small]).max(initial=0.0))))
    return noise

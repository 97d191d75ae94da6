"""Random numpy programs for differential fuzzing, built by running each candidate op in numpy.

A program grows one statement at a time: a candidate (an op, its operands, its arguments) is
evaluated by numpy on the concrete inputs, and kept only if numpy computes it without an
error and it stays inside the fuzzed domain (see `docs/fuzzing.md`). Every value carries an
`rtol`: 0 where two correct implementations must agree on it bit for bit, else the relative
tolerance it is compared with. Ops whose result depends on rounding (transcendentals, float
sums, matmul) make inexact values (with the tolerance of the dtype they compute in, kept
through later casts), and ops that jump on a tiny change of their input (comparisons, floor,
casts to int) only take exact ones, so a tolerance never hides a flipped branch.

All choices go through a `Choices` object: `SeededChoices` for `jitlab fuzz`, and a
hypothesis strategy (`programs()` in tests) that draws them, so failures shrink.
"""

from __future__ import annotations

import random
import warnings
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from .compare import RTOL

DTYPES = ("float32", "float64", "int32", "int64", "bool")
MAX_ELEMENTS = 256          # per value: kernels stay cheap and reductions short
MAX_RANK = 4
ATTEMPTS = 40               # candidates tried per statement before the program ends early

_UNARY_EXACT = ("negative", "absolute", "square", "positive", "sign", "floor", "ceil", "trunc", "rint",
                "logical_not", "invert", "reciprocal", "sqrt", "isnan", "isinf", "isfinite", "fabs")
_UNARY_INEXACT = ("exp", "log", "tanh", "sin", "cos", "expm1", "log1p", "arctan", "exp2", "log2")
_BINARY_EXACT = ("add", "subtract", "multiply", "true_divide", "maximum", "minimum", "fmax", "fmin",
                 "floor_divide", "remainder", "fmod", "equal", "not_equal", "less", "less_equal",
                 "greater", "greater_equal", "logical_and", "logical_or", "logical_xor",
                 "bitwise_and", "bitwise_or", "bitwise_xor", "power")
_OPERATORS = {"add": "+", "subtract": "-", "multiply": "*", "true_divide": "/", "floor_divide": "//",
              "remainder": "%", "power": "**", "bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^",
              "equal": "==", "not_equal": "!=", "less": "<", "less_equal": "<=", "greater": ">",
              "greater_equal": ">="}
# Ops whose result jumps on a tiny change of a float input: their float operands must be exact.
_DISCONTINUOUS = {"sign", "floor", "ceil", "trunc", "rint", "logical_not", "floor_divide", "remainder", "fmod",
                  "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and",
                  "logical_or", "logical_xor", "power", "arctan2", "argmax", "argmin", "any", "all"}
_REDUCTIONS = ("sum", "prod", "max", "min", "mean", "argmax", "argmin", "any", "all")
_LITERALS = ("0", "1", "2", "-1", "3", "-7", "0.5", "-2.5", "True", "False", "np.nan", "np.inf", "-0.0",
             "1e30", "2147483647")


# numpy's max and min of 0.0 and -0.0 give either zero, depending on the array's length and
# SIMD path: these ops never see both zeros together.
_ZERO_TIES = {"maximum", "minimum", "fmax", "fmin", "max", "min"}


def _signed_zero_tie(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether `a` has a zero of one sign and `b` one of the other (wherever they stand: a cautious test)."""
    if a is None or b is None:
        return False
    signs = [set(np.signbit(v[v == 0]).tolist()) if v.dtype.kind == "f" else {False} & set(v[v == 0].tolist())
             for v in (np.ravel(a), np.ravel(b))]
    return bool(signs[0] and signs[1] and signs[0] | signs[1] == {False, True})


class Choices(Protocol):
    """The source of every random decision of the generator."""

    def integer(self, lo: int, hi: int) -> int:
        """An integer in [lo, hi]."""

    def pick(self, options: tuple | list) -> Any:
        """One of `options`."""


class SeededChoices:
    """Choices from a seed: the same seed gives the same program."""

    def __init__(self, seed: int):
        self.random = random.Random(seed)

    def integer(self, lo: int, hi: int) -> int:
        return self.random.randint(lo, hi)

    def pick(self, options):
        return options[self.random.randrange(len(options))]


@dataclass
class Var:
    """A named value of the program with the numpy result it has on the inputs."""
    name: str
    value: np.ndarray
    rtol: float = 0.0           # 0: exact; else the tolerance of its least precise inexact step

    @property
    def exact(self) -> bool:
        return self.rtol == 0.0


@dataclass
class Case:
    """One generated program: its source, its inputs and each output's tolerance (0: bit for bit)."""
    source: str
    inputs: list[np.ndarray]
    rtols: list[float] = field(default_factory=list)
    label: str = ""

    def function(self):
        """The program as a Python function (compiled from `source`)."""
        namespace: dict[str, Any] = {"np": np}
        exec(compile(self.source, f"<fuzz program {self.label}>", "exec"), namespace)
        return namespace["program"]

    def expected(self) -> tuple[np.ndarray, ...]:
        """numpy's outputs: the oracle."""
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            out = self.function()(*[x.copy() for x in self.inputs])
        return tuple(np.asarray(o) for o in out)

    def repro(self) -> str:
        """A script that rebuilds the inputs and runs the program: paste it to reproduce a failure."""
        args = "\n".join(f"a{i} = {array_literal(x)}" for i, x in enumerate(self.inputs))
        names = ", ".join(f"a{i}" for i in range(len(self.inputs)))
        return f"import numpy as np\n\n{self.source}\n{args}\nresult = program({names})\n"


def array_literal(x: np.ndarray) -> str:
    """Python source that rebuilds `x` exactly (dtype, shape and every value)."""
    def item(v) -> str:
        if x.dtype.kind != "f":
            return repr(v.item())
        f = float(v)
        if np.isnan(f):
            return "np.nan"
        return ("np.inf" if f > 0 else "-np.inf") if np.isinf(f) else repr(f)
    flat = ", ".join(item(v) for v in x.ravel())
    return f"np.array([{flat}], dtype=np.{x.dtype.name}).reshape({tuple(x.shape)!r})"


# ---------------------------------------------------------------- inputs

def _float_values(c: Choices, dtype: np.dtype, n: int) -> np.ndarray:
    big, tiny = (1e30, 1e-40) if dtype == np.float32 else (1e300, 1e-310)
    pools = {
        "small": lambda: c.integer(-8, 8) / c.pick((1, 2, 4)),
        "normal": lambda: c.integer(-10**6, 10**6) / 10**5,
        "special": lambda: c.pick((np.nan, np.inf, -np.inf, -0.0, 0.0)),
        "extreme": lambda: c.pick((big, -big, tiny, -tiny, 65504.0, -1e10)),
    }
    weights = c.pick((("small",) * 3 + ("normal",) * 3 + ("special", "extreme"), ("small", "normal"),
                      ("special", "small")))
    with np.errstate(over="ignore"):
        return np.array([pools[c.pick(weights)]() for _ in range(n)], dtype=dtype)


def _int_values(c: Choices, dtype: np.dtype, n: int) -> np.ndarray:
    info = np.iinfo(dtype)
    pools = {
        "small": lambda: c.integer(-5, 5),
        "edge": lambda: c.pick((info.min, info.max, info.min + 1, info.max - 1, 0, -1)),
        "wide": lambda: c.integer(int(info.min), int(info.max)),
    }
    weights = c.pick((("small",) * 4 + ("edge", "wide"), ("small",), ("edge", "wide", "small")))
    return np.array([pools[c.pick(weights)]() for _ in range(n)], dtype=dtype)


def random_array(c: Choices, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """An array of `shape` and `dtype` whose values mix ordinary, special and extreme ones."""
    d = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64))
    if d.kind == "b":
        values = np.array([bool(c.integer(0, 1)) for _ in range(n)], dtype=bool)
    elif d.kind == "f":
        values = _float_values(c, d, n)
    else:
        values = _int_values(c, d, n)
    return values.reshape(shape)


def _input_shapes(c: Choices, count: int) -> list[tuple[int, ...]]:
    """Shapes that broadcast together often: each drops leading dims of a base or sets dims to 1."""
    rank = c.pick((0, 1, 1, 2, 2, 3, 3))
    base = tuple(c.pick((0, 1, 1, 2, 3, 3, 4, 5)) if c.integer(0, 7) else 0 for _ in range(rank))
    shapes = []
    for _ in range(count):
        shape = list(base[c.integer(0, rank):]) if c.integer(0, 2) else list(base)
        shape = [1 if c.integer(0, 4) == 0 else d for d in shape]
        shapes.append(tuple(shape))
    return shapes


# ---------------------------------------------------------------- ops

def _numpy_eval(expr: str, env: dict[str, np.ndarray]):
    """numpy's value of `expr`, or None where numpy refuses it."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            value = eval(expr, {"np": np}, {k: v.copy() for k, v in env.items()})
        except Exception:       # numpy's refusal of a candidate: the generator tries another
            return None
    if isinstance(value, (np.ndarray, np.generic)) and np.asarray(value).dtype.name in DTYPES:
        return np.asarray(value)
    return None


def _is_float(v: Var) -> bool:
    return v.value.dtype.kind == "f"


def _needs_exact(op: str, operands: list[Var]) -> bool:
    return op in _DISCONTINUOUS and any(_is_float(v) and not v.exact for v in operands)


class Builder:
    """Grows one program: candidate statements are kept when numpy computes them in the domain."""

    def __init__(self, c: Choices):
        self.c = c
        self.vars: list[Var] = []
        self.lines: list[str] = []

    def operand(self) -> Var:
        """A value, most often one of the last few so that programs are deep as well as wide."""
        if self.c.integer(0, 2):
            return self.vars[-1 - self.c.integer(0, min(2, len(self.vars) - 1))]
        return self.c.pick(self.vars)

    def value_of(self, expr: str) -> np.ndarray:
        """numpy's value of an operand: a value's name or a literal."""
        env = {v.name: v.value for v in self.vars}
        return env[expr] if expr in env else np.asarray(eval(expr, {"np": np}))

    def try_statement(self) -> bool:
        kind = self.c.pick(("unary", "unary", "binary", "binary", "binary", "scalar", "reduce", "reduce",
                            "shape", "slice", "concat", "where", "matmul", "astype"))
        made = getattr(self, f"_{kind}")()
        if made is None:
            return False
        expr, operands, exact = made
        env = {v.name: v.value for v in self.vars}
        value = _numpy_eval(expr, env)
        if value is None or value.size > MAX_ELEMENTS or value.ndim > MAX_RANK:
            return False
        name = f"v{len(self.lines)}"
        own = 0.0 if exact else RTOL.get(value.dtype, 0.0)
        self.vars.append(Var(name, value, max([own] + [v.rtol for v in operands])))
        self.lines.append(f"    {name} = {expr}")
        return True

    def _unary(self):
        x = self.operand()
        op = self.c.pick(_UNARY_EXACT + _UNARY_EXACT + _UNARY_INEXACT)
        if _needs_exact(op, [x]) or (op == "reciprocal" and x.value.dtype.kind in "iub"):
            return None         # integer reciprocal of 0 is undefined in numpy (platform-dependent)
        if op == "negative" and self.c.integer(0, 1):
            return f"-{x.name}", [x], True
        if op == "invert" and self.c.integer(0, 1):
            return f"~{x.name}", [x], True
        return f"np.{op}({x.name})", [x], op not in _UNARY_INEXACT

    def _binary(self):
        x, y = self.operand(), self.c.pick(self.vars)
        if self.c.integer(0, 1):
            x, y = y, x
        return self._binary_of(x.name, y.name, [x, y])

    def _scalar(self):
        x = self.operand()
        literal = self.c.pick(_LITERALS)
        names = [x.name, literal] if self.c.integer(0, 2) else [literal, x.name]
        return self._binary_of(*names, [x])

    def _binary_of(self, a: str, b: str, operands: list[Var]):
        op = self.c.pick(_BINARY_EXACT + ("arctan2",))
        if _needs_exact(op, operands):
            return None
        if op in _ZERO_TIES and _signed_zero_tie(*(self.value_of(n) for n in (a, b))):
            return None
        exact = op not in ("power", "arctan2") or not any(_is_float(v) for v in operands)
        if op in _OPERATORS and self.c.integer(0, 1):
            return f"({a} {_OPERATORS[op]} {b})", operands, exact
        return f"np.{op}({a}, {b})", operands, exact

    def _reduce(self):
        x = self.operand()
        op = self.c.pick(_REDUCTIONS)
        if _needs_exact(op, [x]) or (op in _ZERO_TIES and _signed_zero_tie(x.value, x.value[..., None])):
            return None
        args = [self._axis(x.value.ndim, several=op not in ("argmax", "argmin"))]
        if self.c.integer(0, 1):
            args.append(f"keepdims={self.c.pick(('True', 'False'))}")
        args = [a for a in args if a]
        exact = not (_is_float(x) or op == "mean") or op not in ("sum", "prod", "mean")
        if self.c.integer(0, 1):
            return f"{x.name}.{op}({', '.join(args)})", [x], exact
        return f"np.{op}({', '.join([x.name] + args)})", [x], exact

    def _axis(self, rank: int, several: bool) -> str:
        if rank == 0 or self.c.integer(0, 3) == 0:
            return self.c.pick(("", "axis=None"))
        if several and rank > 1 and self.c.integer(0, 2) == 0:
            axes = sorted({self.c.integer(-rank, rank - 1) % rank for _ in range(self.c.integer(1, rank))})
            return f"axis={tuple(axes)!r}"
        return f"axis={self.c.integer(-rank, rank - 1)}"

    def _shape(self):
        x = self.operand()
        shape, rank = x.value.shape, x.value.ndim
        kind = self.c.pick(("reshape", "transpose", "T", "squeeze", "expand_dims", "ravel", "broadcast_to"))
        if kind == "reshape":
            return f"{x.name}.reshape({_new_shape(self.c, shape)!r})", [x], True
        if kind == "transpose" and rank > 1:
            perm = list(range(rank))
            for i in range(rank - 1, 0, -1):
                j = self.c.integer(0, i)
                perm[i], perm[j] = perm[j], perm[i]
            return f"np.transpose({x.name}, {tuple(perm)!r})", [x], True
        if kind == "squeeze":
            ones = [i for i, d in enumerate(shape) if d == 1]
            if ones and self.c.integer(0, 1):
                return f"np.squeeze({x.name}, axis={self.c.pick(ones) - rank * self.c.integer(0, 1)})", [x], True
            return f"{x.name}.squeeze()", [x], True
        if kind == "expand_dims":
            return f"np.expand_dims({x.name}, {self.c.integer(-rank - 1, rank)})", [x], True
        if kind == "ravel":
            return f"{x.name}.ravel()", [x], True
        if kind == "broadcast_to":
            target = tuple(self.c.pick((2, 3)) if d == 1 else d for d in shape)
            return f"np.broadcast_to({x.name}, {(self.c.integer(1, 2),) * self.c.integer(0, 1) + target!r})", [x], True
        return f"{x.name}.T", [x], True

    def _slice(self):
        x = self.operand()
        if x.value.ndim == 0:
            return None
        parts = []
        for d in x.value.shape[: self.c.integer(1, x.value.ndim)]:
            parts.append(_slice_text(self.c, d))
        if self.c.integer(0, 4) == 0:
            parts.insert(self.c.integer(0, len(parts)), "None")
        return f"{x.name}[{', '.join(parts)}]", [x], True

    def _concat(self):
        x = self.operand()
        rank = x.value.ndim
        if rank == 0:
            return None
        axis = self.c.integer(0, rank - 1)
        fits = [v for v in self.vars if v.value.ndim == rank and all(
            a == b for i, (a, b) in enumerate(zip(v.value.shape, x.value.shape)) if i != axis)]
        others = [self.c.pick(fits) for _ in range(self.c.integer(1, 2))]
        names = ", ".join(v.name for v in [x] + others)
        return f"np.concatenate([{names}], axis={axis - rank * self.c.integer(0, 1)})", [x] + others, True

    def _where(self):
        cond, x, y = self.operand(), self.c.pick(self.vars), self.c.pick(self.vars)
        if _is_float(cond) and not cond.exact:
            return None
        test = cond.name if cond.value.dtype == bool else f"{cond.name} > 0"
        b = y.name if self.c.integer(0, 3) else self.c.pick(_LITERALS)
        return f"np.where({test}, {x.name}, {b})", [cond, x, y], True

    def _matmul(self):
        x, y = self.operand(), self.c.pick(self.vars)
        b = self.c.pick((y.name, f"{y.name}.T", f"{x.name}.T"))
        exact = not any(_is_float(v) for v in (x, y))
        if self.c.integer(0, 1):
            return f"({x.name} @ {b})", [x, y], exact
        return f"np.matmul({x.name}, {b})", [x, y], exact

    def _astype(self):
        x = self.operand()
        target = self.c.pick(DTYPES)
        if _is_float(x) and target in ("int32", "int64", "bool"):
            if not x.exact or (target != "bool" and not _fits_int(x.value, np.dtype(target))):
                return None     # float -> int of NaN, inf or out-of-range values is undefined in numpy
        return f"{x.name}.astype(np.{target})", [x], True


def _fits_int(values: np.ndarray, dtype: np.dtype) -> bool:
    info = np.iinfo(dtype)
    with np.errstate(invalid="ignore"):
        t = np.trunc(values.astype(np.float64))
        return bool(np.all(np.isfinite(t)) and np.all((t >= float(info.min)) & (t < -float(info.min))))


def _new_shape(c: Choices, shape: tuple[int, ...]) -> tuple[int, ...]:
    n = int(np.prod(shape, dtype=np.int64))
    if n == 0:
        return c.pick(((0,), (0, 3), (2, 0, 1), (-1,) if 0 not in shape or len(shape) < 2 else (0,)))
    dims = []
    for p in (2, 3, 5, 7):
        while n % p == 0:
            dims.append(p)
            n //= p
    dims += [n] if n > 1 else []
    out: list[int] = []
    for d in dims:
        if out and c.integer(0, 1):
            out[-1] *= d
        else:
            out.append(d)
    for _ in range(c.integer(0, 2)):
        out.insert(c.integer(0, len(out)), 1)
    if out and c.integer(0, 2) == 0:
        out[c.integer(0, len(out) - 1)] = -1
    return tuple(out)


def _slice_text(c: Choices, d: int) -> str:
    kind = c.pick(("index", "range", "step", "reverse", "full"))
    if kind == "index" and d > 0:
        return str(c.integer(-d, d - 1))
    bound = lambda: c.pick(("", str(c.integer(-d - 1, d + 1))))     # noqa: E731 (past the ends too)
    if kind == "reverse":
        return f"{bound()}:{bound()}:{-c.integer(1, 3)}"
    if kind == "step":
        return f"{bound()}:{bound()}:{c.integer(1, 3)}"
    if kind == "range":
        return f"{bound()}:{bound()}"
    return ":"


def build(c: Choices, label: str = "") -> Case:
    """A program of 3 to 25 statements over 1 to 3 inputs, drawn from `c`."""
    count = c.integer(1, 3)
    shapes = _input_shapes(c, count)
    inputs = [random_array(c, s, c.pick(DTYPES)) for s in shapes]
    b = Builder(c)
    b.vars = [Var(f"a{i}", x) for i, x in enumerate(inputs)]
    length = c.integer(3, 25)
    for _ in range(length):
        if not any(b.try_statement() for _ in range(ATTEMPTS)):
            break
    made = b.vars[len(inputs):] or b.vars
    outputs = [made[-1]] + [c.pick(made) for _ in range(c.integer(0, 2))]
    params = ", ".join(f"a{i}" for i in range(count))
    body = "\n".join(b.lines)
    returns = ", ".join(v.name for v in outputs)
    source = f"def program({params}):\n{body}\n    return ({returns},)\n"
    return Case(source, inputs, [v.rtol for v in outputs], label)


def generate(seed: int) -> Case:
    """The program of `seed`: the same seed gives the same program on every machine."""
    return build(SeededChoices(seed), label=f"seed {seed}")

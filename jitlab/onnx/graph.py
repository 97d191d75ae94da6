"""The program under construction: emitting `np` ops, folding those whose operands are
known at import time, and `T`, the tensor handle ONNX handlers compute with.

Every value has an op in the IR; values whose contents are known while importing
(initializers, constants, shapes of statically shaped tensors, and whatever is computed
only from those) are also kept in `Graph.known`. An op whose operands are all known is
evaluated right away by its numpy reference implementation (the O0 semantics, so folding
never changes an answer) and becomes a constant. Shape subgraphs (Shape -> Gather ->
Concat -> Reshape) fold this way; with symbolic dims they fold to object arrays of dims,
which `np.dims` turns back into a tensor when one is needed.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..dialects.reference import concrete_attrs
from ..errors import CompileError, JitlabError, ShapeError
from ..ir.attributes import Dense, normalize_attrs
from ..ir.builder import Builder, infer_types
from ..ir.core import Value
from ..ir.opdef import Trait, get_opdef
from ..ir.program import Program
from ..ir.shapes import Sym
from ..ir.types import TensorType

CONSTANT_LIMIT = 16      # folded arrays with more elements become weights, as in tracing
FOLD_LIMIT_BYTES = 256 * 2**20   # results larger than this stay ops: folding would hold them in memory

# Ops that also fold over symbolic dims (object arrays): index moves and integer arithmetic.
_SYMBOLIC_STRUCTURAL = {"np.take", "np.concatenate", "np.expand_dims", "np.squeeze", "np.reshape",
                        "np.slice", "np.broadcast_to", "np.prod", "np.sum"}
_SYMBOLIC_ARITHMETIC = {"np.add": operator.add, "np.sub": operator.sub, "np.mul": operator.mul}


class Graph:
    """Emits ops into a Program, folding the ones whose operands are all known."""

    def __init__(self, program: Program):
        self.program = program
        self.builder = Builder(program.body, constraints=program.constraints)
        self.known: dict[Value, np.ndarray] = {}
        self._constants: dict[tuple, Value] = {}
        self.weight_hint = "const"

    # -- emitting -------------------------------------------------------------------
    def op(self, name: str, *operands: T | Value, **attrs: Any) -> T:
        """Emits a single-result op (or its folded constant)."""
        return self.ops(name, operands, **attrs)[0]

    def ops(self, name: str, operands: Sequence[T | Value], **attrs: Any) -> list[T]:
        """Emits an op (or the constants it folds to) and returns handles for all its results."""
        values = [x.value if isinstance(x, T) else x for x in operands]
        folded = self._fold(name, values, attrs)
        if folded is None:
            folded = self.builder.create(name, values, attrs).results
            _no_negative_dims(name, [v.type for v in folded])
        return [T(v, self) for v in folded]

    def _fold(self, name: str, values: list[Value], attrs: dict) -> list[Value] | None:
        arrays = [self.known.get(v) for v in values]
        opdef = get_opdef(name)
        if not values or any(a is None for a in arrays) or not opdef.has(Trait.PURE) or opdef.reference is None:
            return None
        attrs = normalize_attrs(name, opdef.attrs, dict(attrs))
        types = infer_types(opdef, [v.type for v in values], attrs, self.program.constraints)
        _no_negative_dims(name, types)
        if any(not t.is_static for t in types):
            return None
        if sum(math.prod(t.shape) * t.dtype.itemsize for t in types) > FOLD_LIMIT_BYTES:
            return None
        if any(a.dtype == object for a in arrays):
            outs = _fold_symbolic(name, arrays, attrs, types)
            if outs is None:
                return None
        elif name == "np.broadcast_to" and arrays[0].size == 1 and math.prod(types[0].shape) > CONSTANT_LIMIT:
            # a fill (ConstantOfShape, Expand of a scalar) stays a read-only broadcast of its one
            # value: no bytes until something computes with it, where a light model's 94 MB of
            # weights cost 0.06 s of every load to materialise
            outs = [np.broadcast_to(arrays[0].reshape(()), types[0].shape)]
        else:
            outs = _evaluate(name, opdef.reference, arrays, attrs, types)
        return [self.constant(o) for o in outs]

    # -- constants --------------------------------------------------------------------
    def constant(self, array: np.ndarray) -> Value:
        """A value holding `array`: np.constant when small, else a weight; object arrays of
        dims become np.dims."""
        array = np.asarray(array)
        if array.dtype == object:
            return self._dims(array)
        if array.size <= CONSTANT_LIMIT:
            key = (array.dtype.str, array.shape, array.tobytes())
            if key not in self._constants:
                value = self.builder.create("np.constant", attrs={"value": Dense(array)}).result
                self.known[value] = np.asarray(value.owner.attrs["value"].array)
                self._constants[key] = value
            return self._constants[key]
        return self.weight(self.weight_hint, array)

    def weight(self, hint: str, array: np.ndarray) -> Value:
        """A new weight of the program holding `array`, named after `hint`."""
        name, k = hint, 1
        while name in self.program.weights:
            name, k = f"{hint}_{k}", k + 1
        array = np.asarray(array)
        self.program.weights[name] = array
        op = self.builder.create("np.weight", attrs={"name": name},
                                 result_types=[TensorType(array.shape, array.dtype)])
        op.result.name = name
        self.known[op.result] = array
        return op.result

    def adopt_name(self, value: Value, name: str) -> None:
        """Names a value after an ONNX tensor; a weight folded by the current node takes the name too."""
        op = getattr(value, "op", None)
        folded = op is not None and op.name == "np.weight" and op.attrs["name"] == value.name \
            and value.name.startswith(self.weight_hint)
        if folded and name not in self.program.weights:
            self.program.weights[name] = self.program.weights.pop(value.name)
            op.attrs["name"] = value.name = name
        elif value.name is None:
            value.name = name

    def _dims(self, array: np.ndarray) -> Value:
        value = self.builder.create("np.dims", attrs={"dims": tuple(array.reshape(-1))}).result
        if array.ndim != 1:
            value = self.builder.create("np.reshape", [value], {"shape": array.shape}).result
        self.known[value] = array
        return value

    def const(self, array, dtype=None) -> T:
        """A tensor handle for a constant array."""
        return T(self.constant(np.asarray(array, dtype=dtype)), self)

    def full(self, shape, value, dtype) -> T:
        """A tensor of `shape` filled with `value`: a broadcast scalar, so a large one is never
        built as a constant here (folding builds it only up to FOLD_LIMIT_BYTES)."""
        return self.op("np.broadcast_to", self.scalar(value, dtype), shape=tuple(shape))

    def scalar(self, value, dtype) -> T:
        """A rank-0 constant of `dtype`."""
        return self.const(np.asarray(value).astype(dtype))

    def value_of(self, x: T | Value) -> np.ndarray | None:
        """The contents of `x` if known at import time (an object array when symbolic)."""
        return self.known.get(x.value if isinstance(x, T) else x)


def _no_negative_dims(name: str, types: list[TensorType]) -> None:
    """The IR takes a negative dim for a number (an allocation of -60 bytes), and no tensor
    can hold more bytes than a 64-bit address reaches; an ONNX shape, pad or size that makes
    either is an error of the node."""
    for t in types:
        check_dims(t, f"{name} would give {t}")


def check_dims(t: TensorType, what: str) -> None:
    """ShapeError unless every static dim of t is >= 0 and its static size fits in 2**63 bytes."""
    if any(isinstance(d, int) and d < 0 for d in t.shape):
        raise ShapeError(f"{what}: a dim is negative")
    if math.prod(d for d in t.shape if isinstance(d, int)) * t.dtype.itemsize >= 2**63:
        raise ShapeError(f"{what}: more than 2**63 bytes, past what any machine addresses")


def _evaluate(name: str, reference, arrays: list[np.ndarray], attrs: dict, types: list[TensorType]
              ) -> list[np.ndarray]:
    outs = reference(*arrays, **concrete_attrs(attrs, {}))
    outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
    result = []
    for out, t in zip(outs, types):
        out = np.asarray(out)
        if out.shape != t.shape or out.dtype != t.dtype:
            raise CompileError(f"{name}: folding gave {out.dtype}{list(out.shape)}, its type is {t}")
        result.append(out)
    return result


def _fold_symbolic(name: str, arrays: list[np.ndarray], attrs: dict, types: list[TensorType]
                   ) -> list[np.ndarray] | None:
    """Folds an op over arrays of symbolic dims, or None when it cannot be done exactly."""
    if name == "np.cast":
        return [arrays[0]] if types[0].dtype.kind in "iu" else None
    if name in _SYMBOLIC_ARITHMETIC:
        fn = np.frompyfunc(_SYMBOLIC_ARITHMETIC[name], 2, 1)
        out = np.asarray(fn(*np.broadcast_arrays(*arrays)), dtype=object)
    elif name in _SYMBOLIC_STRUCTURAL:
        try:
            out = np.asarray(get_opdef(name).reference(*arrays, **attrs), dtype=object)
        except (TypeError, ValueError, JitlabError):
            return None
    else:
        return None
    if out.shape != types[0].shape:
        return None
    return [settle(out)]


def settle(array: np.ndarray) -> np.ndarray:
    """An object array of dims as int64 when no symbol is left in it."""
    if array.dtype == object and not any(isinstance(d, Sym) for d in array.reshape(-1)):
        return array.astype(np.int64)
    return array


class T:
    """A tensor while importing: an IR value plus operators that emit `np` ops without numpy's
    type promotion (ONNX operands already share a dtype; Python scalars take the tensor's)."""

    __slots__ = ("value", "g")

    def __init__(self, value: Value, g: Graph):
        self.value, self.g = value, g

    @property
    def type(self) -> TensorType:
        return self.value.type

    @property
    def shape(self) -> tuple:
        return self.value.type.shape

    @property
    def dtype(self) -> np.dtype:
        return self.value.type.dtype

    @property
    def rank(self) -> int:
        return self.value.type.rank

    @property
    def known(self) -> np.ndarray | None:
        return self.g.value_of(self)

    def _lift(self, other) -> T:
        return other if isinstance(other, T) else self.g.scalar(other, self.dtype)

    def _binary(self, name: str, other, reverse: bool = False) -> T:
        other = self._lift(other)
        return self.g.op(name, other, self) if reverse else self.g.op(name, self, other)

    def __add__(self, o):
        return self._binary("np.add", o)

    def __radd__(self, o):
        return self._binary("np.add", o, True)

    def __sub__(self, o):
        return self._binary("np.sub", o)

    def __rsub__(self, o):
        return self._binary("np.sub", o, True)

    def __mul__(self, o):
        return self._binary("np.mul", o)

    def __rmul__(self, o):
        return self._binary("np.mul", o, True)

    def __truediv__(self, o):
        return self._binary("np.div", o)

    def __rtruediv__(self, o):
        return self._binary("np.div", o, True)

    def __pow__(self, o):
        return self._binary("np.pow", o)

    def __neg__(self):
        return self.g.op("np.neg", self)

    def __lt__(self, o):
        return self._binary("np.less", o)

    def __le__(self, o):
        return self._binary("np.less_equal", o)

    def __gt__(self, o):
        return self._binary("np.greater", o)

    def __ge__(self, o):
        return self._binary("np.greater_equal", o)

    def __and__(self, o):
        return self._binary("np.logical_and" if self.dtype.kind == "b" else "np.bitwise_and", o)

    def __or__(self, o):
        return self._binary("np.logical_or" if self.dtype.kind == "b" else "np.bitwise_or", o)

    def __invert__(self):
        return self.g.op("np.logical_not" if self.dtype.kind == "b" else "np.bitwise_not", self)

    def eq(self, o) -> T:
        """Elementwise ==, as a bool tensor (== itself keeps Python's identity meaning)."""
        return self._binary("np.equal", o)

    def ne(self, o) -> T:
        """Elementwise !=, as a bool tensor."""
        return self._binary("np.not_equal", o)

    def cast(self, dtype) -> T:
        """This tensor in another dtype (itself when already of it)."""
        return self if self.dtype == np.dtype(dtype) else self.g.op("np.cast", self, dtype=np.dtype(dtype))

    def reshape(self, shape) -> T:
        """This tensor under another shape (itself when already of it)."""
        shape = tuple(shape)
        return self if shape == self.shape else self.g.op("np.reshape", self, shape=shape)

    def transpose(self, perm) -> T:
        """Axes permuted (itself for the identity permutation)."""
        perm = tuple(perm)
        return self if perm == tuple(range(self.rank)) else self.g.op("np.transpose", self, perm=perm)

    def reduce(self, kind: str, axes, keepdims: bool = False) -> T:
        """np.sum, np.max ... (`kind`) over `axes`."""
        return self.g.op(f"np.{kind}", self, axes=tuple(sorted(axes)), keepdims=keepdims)

    def __repr__(self) -> str:
        return f"T(%{self.value.name or '?'} : {self.type})"

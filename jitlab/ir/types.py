"""The IR's value type: a tensor of static or symbolic shape and a dtype, printed `f32[B,4]`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .dtypes import as_dtype, dtype_name
from .shapes import Dim, Sym, evaluate_shape, is_static, num_elements


@dataclass(frozen=True)
class TensorType:
    """Shape and element type of an SSA value; rank 0 is a scalar, `f32[]`."""

    shape: tuple[Dim, ...]
    dtype: np.dtype

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(d if isinstance(d, Sym) else int(d) for d in self.shape))
        object.__setattr__(self, "dtype", as_dtype(self.dtype))

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_static(self) -> bool:
        return is_static(self.shape)

    @property
    def size(self) -> Dim:
        return num_elements(self.shape)

    @property
    def symbols(self) -> frozenset[str]:
        return frozenset(s for d in self.shape if isinstance(d, Sym) for s in d.symbols)

    def nbytes(self, bindings=None) -> int:
        shape = self.shape if bindings is None else evaluate_shape(self.shape, bindings)
        return int(np.prod(shape, dtype=np.int64)) * self.dtype.itemsize

    def with_shape(self, shape) -> TensorType:
        return TensorType(tuple(shape), self.dtype)

    def with_dtype(self, dtype) -> TensorType:
        return TensorType(self.shape, dtype)

    def __str__(self) -> str:
        return f"{dtype_name(self.dtype)}[{','.join(str(d) for d in self.shape)}]"

    def __repr__(self) -> str:
        return f"TensorType({self})"


def type_of(array) -> TensorType:
    """The TensorType of a concrete array."""
    array = np.asarray(array)
    return TensorType(array.shape, array.dtype)

"""Attributes: immutable values attached to ops, their schemas, and how they print.

Attribute values are plain immutable Python values (int, float, bool, str, None, tuples
of them, numpy dtypes, symbolic dims) plus `Dense` for constant arrays. A schema entry
(`Attr`) says which kind a name takes and its default; the verifier checks it and the
printer elides values equal to their default.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import DTypeError, VerifyError
from .dtypes import as_dtype, dtype_name
from .shapes import Sym


@dataclass(frozen=True, eq=False)
class Dense:
    """A constant array held by an attribute; compared and hashed by its contents."""

    array: np.ndarray

    def __post_init__(self):
        array = np.array(self.array, copy=True)
        array.setflags(write=False)
        object.__setattr__(self, "array", array)

    def __eq__(self, other) -> bool:
        return (
            isinstance(other, Dense)
            and self.array.dtype == other.array.dtype
            and self.array.shape == other.array.shape
            and self.array.tobytes() == other.array.tobytes()
        )

    def __hash__(self) -> int:
        return hash((self.array.dtype.str, self.array.shape, self.array.tobytes()))

    def __repr__(self) -> str:
        return f"Dense({format_attr(self)})"


REQUIRED = object()


@dataclass(frozen=True)
class AttrKind:
    """A kind of attribute value: a name for messages and a normalizing check."""

    name: str
    check: Callable[[Any], Any] = field(repr=False)

    def normalize(self, value: Any) -> Any:
        return self.check(value)


def _int(v):
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise TypeError
    return int(v)


def _float(v):
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise TypeError
    return float(v)


def _bool(v):
    if not isinstance(v, (bool, np.bool_)):
        raise TypeError
    return bool(v)


def _str(v):
    if not isinstance(v, str):
        raise TypeError
    return v


def _dim(v):
    return v if isinstance(v, Sym) else _int(v)


def _tuple_of(item):
    def check(v):
        if not isinstance(v, (tuple, list)):
            raise TypeError
        return tuple(item(x) for x in v)

    return check


def _dense(v):
    if not isinstance(v, Dense):
        raise TypeError
    return v


def _optional(kind: AttrKind) -> AttrKind:
    return AttrKind(f"{kind.name} or none", lambda v: None if v is None else kind.check(v))


INT = AttrKind("int", _int)
FLOAT = AttrKind("float", _float)
BOOL = AttrKind("bool", _bool)
STR = AttrKind("string", _str)
INTS = AttrKind("list of ints", _tuple_of(_int))
FLOATS = AttrKind("list of floats", _tuple_of(_float))
SHAPE = AttrKind("shape", _tuple_of(_dim))
DTYPE = AttrKind("dtype", lambda v: as_dtype(v))
DENSE = AttrKind("dense array", _dense)
OPT_INT = _optional(INT)
OPT_FLOAT = _optional(FLOAT)
OPT_INTS = _optional(INTS)


def one_of(*choices: str) -> AttrKind:
    """A string attribute restricted to `choices`."""

    def check(v):
        if v not in choices:
            raise TypeError
        return v

    return AttrKind("one of " + ", ".join(repr(c) for c in choices), check)


@dataclass(frozen=True)
class Attr:
    """Schema of one attribute: its kind, and its default (REQUIRED when it has none)."""

    kind: AttrKind
    default: Any = REQUIRED
    doc: str = ""


def normalize_attrs(op_name: str, schema: dict[str, Attr], attrs: dict[str, Any]) -> dict[str, Any]:
    """Checks `attrs` against `schema`, fills defaults and returns the normalized dict."""
    unknown = set(attrs) - set(schema)
    if unknown:
        raise VerifyError(f"{op_name}: unknown attribute(s) {', '.join(sorted(unknown))}; "
                          f"it takes {', '.join(schema) or 'none'}")
    out = {}
    for name, spec in schema.items():
        if name not in attrs:
            if spec.default is REQUIRED:
                raise VerifyError(f"{op_name}: missing required attribute '{name}' ({spec.kind.name})")
            out[name] = spec.default
            continue
        try:
            out[name] = spec.kind.normalize(attrs[name])
        except (TypeError, ValueError, DTypeError):
            raise VerifyError(f"{op_name}: attribute '{name}' must be a {spec.kind.name}, "
                              f"got {attrs[name]!r}") from None
    return out


def format_float(v: float) -> str:
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return repr(float(v))


def _format_scalar(v: Any, dtype: np.dtype | None = None) -> str:
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, np.floating):
        if math.isnan(v) or math.isinf(v):
            return format_float(float(v))
        return repr(float(v)) if v.dtype == np.float64 else _short_float(v)
    if isinstance(v, float):
        return format_float(v)
    if isinstance(v, np.complexfloating):
        return f"({_format_scalar(v.real)}, {_format_scalar(v.imag)})"
    raise TypeError(type(v))


def _short_float(v: np.floating) -> str:
    """Shortest text that reads back to the same f16/f32 value, always with a '.' or 'e'."""
    text = np.format_float_positional(v, unique=True, trim="-") if 1e-4 <= abs(float(v)) < 1e16 or v == 0 \
        else np.format_float_scientific(v, unique=True, trim="-")
    if "." not in text and "e" not in text:
        text += ".0"
    return text.replace("e+", "e")


def _format_nested(array: np.ndarray) -> str:
    if array.ndim == 0:
        return _format_scalar(array[()])
    return "[" + ", ".join(_format_nested(a) for a in array) + "]"


def format_attr(v: Any) -> str:
    """The IR text of an attribute value."""
    if v is None:
        return "none"
    if isinstance(v, (bool, int, float, np.bool_, np.integer, np.floating)):
        return _format_scalar(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, Sym):
        return str(v)
    if isinstance(v, np.dtype):
        return dtype_name(v)
    if isinstance(v, tuple):
        return "[" + ", ".join(format_attr(x) for x in v) + "]"
    if isinstance(v, Dense):
        a = v.array
        shape = ",".join(str(d) for d in a.shape)
        return f"dense<{dtype_name(a.dtype)}[{shape}] {_format_nested(a)}>"
    raise TypeError(f"cannot print attribute value {v!r}")

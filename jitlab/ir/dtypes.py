"""Element types of the IR: numpy dtypes with short printed names."""

from __future__ import annotations

import numpy as np

from ..errors import DTypeError

_NAMES = {
    "bool": np.dtype(np.bool_),
    "i8": np.dtype(np.int8),
    "i16": np.dtype(np.int16),
    "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64),
    "u8": np.dtype(np.uint8),
    "u16": np.dtype(np.uint16),
    "u32": np.dtype(np.uint32),
    "u64": np.dtype(np.uint64),
    "f16": np.dtype(np.float16),
    "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
    "c64": np.dtype(np.complex64),
    "c128": np.dtype(np.complex128),
}
_BY_DTYPE = {dt: name for name, dt in _NAMES.items()}

DTYPE_NAMES = frozenset(_NAMES)
BOOL = _NAMES["bool"]
F32 = _NAMES["f32"]
F64 = _NAMES["f64"]
I32 = _NAMES["i32"]
I64 = _NAMES["i64"]


def dtype_from_name(name: str) -> np.dtype:
    """The numpy dtype printed as `name` (f32, i64, bool, ...)."""
    return _NAMES[name]


def dtype_name(dtype: np.dtype) -> str:
    """The printed name of a numpy dtype the IR supports."""
    return _BY_DTYPE[np.dtype(dtype)]


def as_dtype(dtype, what: str = "dtype") -> np.dtype:
    """Converts anything numpy accepts as a dtype, or an IR name, to a supported dtype."""
    if isinstance(dtype, str) and dtype in _NAMES:
        return _NAMES[dtype]
    try:
        dt = np.dtype(dtype)
    except TypeError as e:
        raise DTypeError(f"{what}: {dtype!r} is not a dtype") from e
    if dt not in _BY_DTYPE:
        supported = ", ".join(sorted(_NAMES))
        raise DTypeError(f"{what}: dtype {dt} is not supported (supported: {supported})")
    return dt


def is_float(dtype: np.dtype) -> bool:
    return dtype.kind == "f"


def is_complex(dtype: np.dtype) -> bool:
    return dtype.kind == "c"


def real_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype of a complex dtype's parts (f32 for c64); any other dtype unchanged."""
    return np.dtype(f"f{dtype.itemsize // 2}") if dtype.kind == "c" else dtype


def is_int(dtype: np.dtype) -> bool:
    return dtype.kind in "iu"


def is_bool(dtype: np.dtype) -> bool:
    return dtype.kind == "b"

"""Reading a model: a path, bytes or a ModelProto, checked; tensors to numpy arrays,
external data read only from inside the model's own folder."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import TensorProto

from ..errors import ModelError, UnsupportedOp

DTYPES: dict[int, np.dtype] = {
    TensorProto.FLOAT: np.dtype(np.float32), TensorProto.DOUBLE: np.dtype(np.float64),
    TensorProto.FLOAT16: np.dtype(np.float16), TensorProto.BOOL: np.dtype(np.bool_),
    TensorProto.INT8: np.dtype(np.int8), TensorProto.INT16: np.dtype(np.int16),
    TensorProto.INT32: np.dtype(np.int32), TensorProto.INT64: np.dtype(np.int64),
    TensorProto.UINT8: np.dtype(np.uint8), TensorProto.UINT16: np.dtype(np.uint16),
    TensorProto.UINT32: np.dtype(np.uint32), TensorProto.UINT64: np.dtype(np.uint64),
}


@dataclass
class Source:
    """A parsed model and where it came from: a label for messages, the folder of its file."""

    model: onnx.ModelProto
    label: str
    folder: str | None


def read_model(model) -> Source:
    """The model behind a path, bytes or ModelProto, parsed and checked by onnx's checker."""
    path = None
    if isinstance(model, onnx.ModelProto):
        source = Source(model, model.graph.name or "<onnx model>", None)
    elif isinstance(model, (bytes, bytearray, memoryview)):
        source = Source(_parse(bytes(model), "the model bytes"), "<onnx bytes>", None)
    elif isinstance(model, (str, os.PathLike)):
        path = os.path.abspath(os.fspath(model))
        if not os.path.isfile(path):
            raise ModelError(f"no ONNX model file at {os.fspath(model)!r}")
        with open(path, "rb") as f:
            data = f.read()
        source = Source(_parse(data, repr(os.fspath(model))), os.path.basename(path), os.path.dirname(path))
    else:
        raise ModelError(f"jl.onnx.load takes a path, bytes or onnx.ModelProto, got {type(model).__name__}")
    _check_text(source.model, source.label)
    _check_external(source)
    _check(source, path)
    return source


def _check_text(message, label: str) -> None:
    """Every string field is text: protobuf hands back a string field that is not valid UTF-8
    as bytes, which names and op types must never be."""
    for field, value in message.ListFields():
        if field.type == field.TYPE_STRING:
            for text in (value if field.is_repeated else [value]):
                if isinstance(text, bytes):
                    raise ModelError(f"{label} is not a valid ONNX model: field '{field.name}' of a "
                                     f"{message.DESCRIPTOR.name} is not valid UTF-8: {text[:40]!r}")
        elif field.type == field.TYPE_MESSAGE:
            for sub in (value if field.is_repeated else [value]):
                _check_text(sub, label)


def _parse(data: bytes, what: str) -> onnx.ModelProto:
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except DecodeError as e:
        raise ModelError(f"{what} is not a valid ONNX model (corrupt or truncated): {e}") from None
    if not proto.HasField("graph"):
        raise ModelError(f"{what} is not a valid ONNX model: it has no graph")
    return proto


def _check_external(source: Source) -> None:
    """External data must name files inside the model's folder, before anything looks at them."""
    for t in source.model.graph.initializer:
        if t.data_location == TensorProto.EXTERNAL:
            location = {e.key: e.value for e in t.external_data}.get("location", "")
            if source.folder is None:
                raise ModelError(f"tensor '{t.name}' keeps its data in the external file {location!r}; load the "
                                 "model from its path so jitlab knows the folder to read it from")
            _inside(source.folder, location, f"tensor '{t.name}'")


def _check(source: Source, path: str | None) -> None:
    """onnx's checker; given the path, it finds external data next to the model."""
    try:
        onnx.checker.check_model(path if path is not None else source.model)
    except (onnx.checker.ValidationError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelError(f"{source.label} is not a valid ONNX model: {first}") from None


def dtype_of(code: int, what: str) -> np.dtype:
    """The numpy dtype of an ONNX element type, or UnsupportedOp naming `what`."""
    if code not in DTYPES:
        name = TensorProto.DataType.Name(code) if code in TensorProto.DataType.values() else str(code)
        raise UnsupportedOp(f"{what} has element type {name}, which jitlab does not support "
                            "(supported: bool, int8-64, uint8-64, float16, float32, float64)")
    return DTYPES[code]


def tensor_to_array(tensor: TensorProto, folder: str | None, what: str | None = None) -> np.ndarray:
    """The contents of a TensorProto; external data must lie inside `folder`."""
    what = what or f"tensor '{tensor.name}'"
    dtype_of(tensor.data_type, what)
    if tensor.data_location == TensorProto.EXTERNAL:
        tensor = _with_external_data(tensor, folder, what)
    try:
        array = onnx.numpy_helper.to_array(tensor)
    except (ValueError, TypeError) as e:
        raise ModelError(f"{what} cannot be read: {e}") from None
    return array


def _with_external_data(tensor: TensorProto, folder: str | None, what: str) -> TensorProto:
    info = {e.key: e.value for e in tensor.external_data}
    location = info.get("location", "")
    if folder is None:
        raise ModelError(f"{what} keeps its data in the external file {location!r}; load the model "
                         "from its path so jitlab knows the folder to read it from")
    path = _inside(folder, location, what)
    try:
        offset, length = int(info.get("offset", 0)), int(info.get("length", -1))
    except ValueError as e:
        raise ModelError(f"{what}: external data offset/length must be integers: {e}") from None
    if "length" in info and length < 0:
        raise ModelError(f"{what}: external data length must be >= 0, got {length}")
    try:
        # O_NOFOLLOW: a link put in place of the checked file after the check is not followed
        with open(os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)), "rb") as f:
            size = os.fstat(f.fileno()).st_size
            # checked before reading, so a bogus length is an error and never a huge allocation
            if offset < 0 or length < -1 or offset > size or (length >= 0 and offset + length > size):
                raise ModelError(f"{what}: external data at offset {offset} with length {length} does not lie "
                                 f"within the file {location!r} ({size} bytes)")
            f.seek(offset)
            data = f.read(length)
    except OSError as e:
        raise ModelError(f"{what}: cannot read its external data from {location!r}: {e}") from None
    copy = TensorProto()
    copy.CopyFrom(tensor)
    del copy.external_data[:]
    copy.data_location = TensorProto.DEFAULT
    copy.raw_data = data
    return copy


def _inside(folder: str, location: str, what: str) -> str:
    """The real path of `location` under `folder`, refusing anything that leaves it."""
    if not location or os.path.isabs(location) or "\0" in location:
        raise ModelError(f"{what}: external data location {location!r} must be a relative path "
                         "inside the model's folder")
    root = os.path.realpath(folder)
    path = os.path.realpath(os.path.join(root, location))
    if os.path.commonpath([root, path]) != root:
        raise ModelError(f"{what}: external data location {location!r} points outside the model's "
                         f"folder {root!r}; jitlab reads nothing outside it")
    if not os.path.isfile(path):
        raise ModelError(f"{what}: external data file {location!r} does not exist in {root!r}")
    return path

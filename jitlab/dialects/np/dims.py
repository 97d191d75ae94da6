"""Dims as data: `np.dims` turns (possibly symbolic) dimensions into an int64 tensor, so a
shape computed from symbolic input dims can flow through the graph as a value."""

from __future__ import annotations

import numpy as np

from ...ir.attributes import SHAPE
from ...ir.dtypes import I64
from ...ir.opdef import Trait, defop
from ...ir.types import TensorType
from .common import attr


def _dims_infer(ctx, types, attrs):
    return [TensorType((len(attrs["dims"]),), I64)]


defop("np.dims", operands=0, attrs={"dims": attr(SHAPE, doc="the values, ints or symbolic dims")},
      traits=(Trait.PURE,), infer=_dims_infer,
      reference=lambda dims: np.array(dims, dtype=np.int64).reshape(len(dims)),
      doc="A 1-D int64 tensor holding `dims`, symbols evaluated with the call's bindings.")

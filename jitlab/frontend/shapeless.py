"""Traced values whose shape is known only at run time (`x[mask]`, `a[:j]`): what needs it is refused."""

from __future__ import annotations

import numpy as np

from ..errors import UnsupportedOp


class Shapeless(np.lib.mixins.NDArrayOperatorsMixin):
    """A traced value with no static shape: its shape, size, length, truth value, items and conversion
    to an array are refused, naming the line and what the value can be used for."""

    __array_priority__ = 1001
    NAME = ""                                   # the value, as the messages name it
    ADVICE = ""                                 # what it can be used for
    AS_ARRAY = "converting to a numpy array"

    def _refuse(self, what: str):
        raise UnsupportedOp(f"{what} of {self.NAME} ({self.ctx.where()}): {self.ADVICE}")

    @property
    def shape(self):
        self._refuse("the shape")

    @property
    def size(self):
        self._refuse("the size")

    def __len__(self):
        self._refuse("len()")

    def __iter__(self):
        self._refuse("iterating")

    def __bool__(self):
        self._refuse("the truth value")

    def __array__(self, dtype=None, copy=None):
        self._refuse(self.AS_ARRAY)

    def __getitem__(self, key):
        self._refuse("indexing")

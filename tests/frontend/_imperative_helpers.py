"""A module of helpers for test_functionalize: its np.zeros must be traced too."""

import numpy as np


def rows_times(x, k):
    out = np.zeros((x.shape[0], 2))
    for i in range(x.shape[0]):
        out[i] = x[i, :2] * k
    return out

"""Hypothesis strategies shared by the test folders."""

import numpy as np
from hypothesis import strategies as st

INDEX_KINDS = ("int", "slice", "neg", "array", "mask", "ellipsis", "none")


def write_index(draw, n: int, kinds: tuple[str, ...] = INDEX_KINDS):
    """One index into a dim of size n, of a kind numpy code writes with: an int, a slice (forwards, or
    backwards with a step), an integer array, a bool mask, Ellipsis or None."""
    kind = draw(st.sampled_from(kinds))
    if kind == "int":
        return draw(st.integers(-n, n - 1))
    if kind in ("slice", "neg"):
        start, stop = draw(st.integers(0, n)), draw(st.integers(0, n))
        return slice(start, stop) if kind == "slice" else slice(stop, None, -draw(st.integers(1, 2)))
    if kind == "array":
        return np.array(draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=3)))
    if kind == "mask":
        return np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    return Ellipsis if kind == "ellipsis" else None

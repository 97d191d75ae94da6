"""Donated inputs at call time: whether a donated array may take its output, and handing
results back in the donated arrays. The plan comes from the IR (passes/donation.py)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..passes.donation import Donation


def safe_to_donate(arrays: Sequence[np.ndarray], d: Donation) -> bool:
    """The donated array is a plain writable array and backs no other argument."""
    a = arrays[d.input]
    return (type(a) is np.ndarray and a.flags.c_contiguous and a.flags.writeable
            and not any(j != d.input and np.may_share_memory(a, b) for j, b in enumerate(arrays)))


def hand_back(arrays: Sequence[np.ndarray], results: list[np.ndarray], donations: Sequence[Donation]) -> list:
    """Results with each donated output living in its donated input array."""
    for d in donations:
        a, out = arrays[d.input], results[d.output]
        if out is a or type(a) is not np.ndarray or not a.flags.writeable or a.shape != out.shape:
            continue
        if any(k != d.output and np.may_share_memory(a, r) for k, r in enumerate(results)):
            continue          # another result still reads the old content: leave a alone
        np.copyto(a, out)
        results[d.output] = a
    return results

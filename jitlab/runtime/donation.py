"""Donated inputs at call time: handing results back in the donated arrays. The plan comes from
the IR (passes/donation.py); whether a donated array may take its output is backends/host.py's."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..report import DonationRecord


def hand_back(arrays: Sequence[np.ndarray], results: list[np.ndarray], donations: Sequence[DonationRecord]) -> list:
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

"""Gradients through the `scf` ops: refused with a clear reason until reverse mode through regions
exists (issue 31, item 6: carries saved per iteration or recomputed)."""

from __future__ import annotations

from ..registry import unsupported_gradient

unsupported_gradient("reverse mode through loops and branches is not built yet (issue 31); differentiate "
                     "an unrolled Python loop instead", "scf.for", "scf.while", "scf.if")

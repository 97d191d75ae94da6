"""The numpy backend: every op by its numpy reference implementation, one op at a time."""

from __future__ import annotations

from ..ir.core import Operation
from .base import Backend, register_backend


@register_backend
class NumpyBackend(Backend):
    """Runs ops with numpy; the library kernels leftover ops use at O1."""

    name = "numpy"
    device = "cpu"

    def supports(self, op: Operation) -> str | None:
        return "the numpy backend runs ops one at a time; it compiles no groups"

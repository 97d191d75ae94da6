"""What passes ask of a backend, as a protocol: passes never import a backend.

A backend answers which ops it compiles (`supports`) and how each takes part in fusion
(`fusion_kind`), and states what its runners do (`donates_in_place`,
`folds_operand_transposes`). `jitlab.backends` registers the lookup from a target or
backend name to its backend when it is imported; `jl.compile` hands its own lookup to
the pass context, so a pass context built by hand (a test, a notebook cell) finds the
same backends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ..errors import PassError
from ..ir.core import Operation


class BackendCapability(Protocol):
    """A backend as the passes see it (jitlab.backends.Backend is one)."""

    name: str
    # True when compiled programs write an output straight into a donated input's array;
    # fusion then keeps the updates of donated inputs out of contraction epilogues.
    donates_in_place: bool
    # True when a contraction group may read an operand through a 2-D transpose inside it.
    folds_operand_transposes: bool

    def supports(self, op: Operation) -> str | None:
        """None if the backend compiles `op` inside a group, else the reason it does not."""

    def fusion_kind(self, op: Operation) -> str:
        """How `op` takes part in fusion: elementwise, injective, view, reduction, contraction, write or opaque."""


BackendLookup = Callable[[str], BackendCapability]
_PROVIDED: list[BackendLookup] = []


def provide_backends(lookup: BackendLookup) -> None:
    """Called by jitlab.backends on import: `lookup(name)` is the backend of a target or backend name."""
    _PROVIDED[:] = [lookup]


def registered_backend(name: str) -> BackendCapability:
    """The backend `name` names, through the lookup jitlab.backends provided."""
    if not _PROVIDED:
        raise PassError(f"no backends are registered to look up {name!r} (import jitlab.backends first)")
    return _PROVIDED[0](name)

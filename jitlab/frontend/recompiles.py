"""Every signature a jitted function compiled, and why each compile after the first happened:
which input's shape or dtype (or which static argument's value) differs from the signature
compiled before it, as tlparse reports recompiles."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

from ..ir.types import TensorType


@dataclass
class CompileRecord:
    """One compiled signature of a jitted function."""

    index: int
    signature: dict[str, Any]                  # input name -> TensorType; static argument -> its value's repr
    reason: str
    changed: list[dict[str, str]]
    seconds: float
    executable: Any = field(default=None, repr=False)

    def to_dict(self, current: Any = None) -> dict[str, Any]:
        return {"index": self.index, "signature": {k: str(v) for k, v in self.signature.items()},
                "reason": self.reason, "changed": list(self.changed), "seconds": self.seconds,
                "current": current is not None and self.executable is current}


def signature(program, bound: inspect.BoundArguments, static_argnums: tuple[int, ...]) -> dict[str, Any]:
    """The traced program's input types by name, and the static arguments' values."""
    out: dict[str, Any] = dict(zip(program.input_names, (v.type for v in program.inputs)))
    names = list(bound.arguments)
    for i in static_argnums:
        if i < len(names):
            out[names[i]] = repr(bound.arguments[names[i]])
    return out


def differences(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, str]]:
    """What differs between two signatures, input by input."""
    out = []
    for name in [*after, *(n for n in before if n not in after)]:
        a, b = before.get(name), after.get(name)
        if a is None or b is None:
            out.append({"input": name, "what": "added" if a is None else "removed",
                        "before": "" if a is None else str(a), "after": "" if b is None else str(b)})
        elif isinstance(a, TensorType) and isinstance(b, TensorType):
            what = [w for w, differs in (("dtype", a.dtype != b.dtype), ("shape", a.shape != b.shape)) if differs]
            if what:
                out.append({"input": name, "what": " and ".join(what), "before": str(a), "after": str(b)})
        elif str(a) != str(b):
            out.append({"input": name, "what": "value", "before": str(a), "after": str(b)})
    return out


def record(records: list[CompileRecord], sig: dict[str, Any], seconds: float, executable: Any) -> CompileRecord:
    """Appends the compile of `sig`, with what differs from the signature compiled last."""
    changed = differences(records[-1].signature, sig) if records else []
    reason = "; ".join(f"{c['input']}: {c['what']} {c['before'] or '-'} -> {c['after'] or '-'}" for c in changed)
    entry = CompileRecord(len(records), sig, reason or ("first call" if not records else "the same signature"),
                          changed, seconds, executable)
    records.append(entry)
    return entry

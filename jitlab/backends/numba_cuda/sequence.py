"""O2 on the GPU: the whole launch sequence as one generated Python function.

Where O1 walks its steps, O2 runs straight-line code: every allocation, launch, event
and view in program order, each on its stream, with no synchronisation and no transfer
in between (a leftover host op, if any, is one visible `host(...)` call). The source
is kept in the report (`report.launch_sequence`), so what the GPU is asked to do can
be read in one place.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ...ir.opdef import Trait


def _ident(name: str | None, slot: int) -> str:
    text = re.sub(r"\W", "_", name or "")
    return f"v_{text}" if text else f"v{slot}"


class SequenceWriter:
    """Writes the launch function for a DeviceExecutor's steps."""

    def __init__(self, executor):
        self.ex = executor
        self.names = {slot: _ident(v.name, slot) for v, slot in executor.slots.items()}
        self.ns: dict[str, Any] = {"np": np, "alloc": executor.allocator.get, "host": executor.host_step,
                                   "executor": executor}
        self.lines: list[str] = []

    def _shape(self, step, k: int) -> str:
        if step.types[k].is_static:
            return repr(tuple(int(d) for d in step.types[k].shape))
        name = f"shape_{step.outs[k]}"
        self.ns[name] = lambda bindings, step=step, k=k: step.shapes(bindings)[k]
        return f"{name}(bindings)"

    def _names(self, slots: list[int]) -> str:
        return ", ".join(self.names[s] for s in slots) + ("," if len(slots) == 1 else "")

    def write(self) -> str:
        ex = self.ex
        for slot, array in ex.resident.items():
            self.ns[self.names[slot]] = array
        for k, s in enumerate(ex.streams):
            self.ns[f"s{k}"] = s
        inputs = [self.names[i] for i in range(len(ex.input_types))]
        self.lines.append(f"def launch({', '.join([*inputs, 'bindings'])}):")
        for k, step in enumerate(ex.steps):
            self._step(k, step)
        self.lines.append(f"    return [{', '.join(self.names[s] for s in ex.outputs)}]")
        return "\n".join(self.lines) + "\n"

    def _step(self, k: int, step) -> None:
        stream, add = f"s{step.stream}", self.lines.append
        for e, event in enumerate(step.waits):
            self.ns[f"wait_{k}_{e}"] = event
            add(f"    wait_{k}_{e}.wait({stream})")
        outs, ins = self._names(step.outs), self._names(step.ins)
        if step.kernel is not None:
            self.ns[f"group_{k}"] = step.kernel.run
            for j, slot in enumerate(step.outs):
                add(f"    {self.names[slot]} = alloc({slot}, {self._shape(step, j)}, "
                    f"np.{np.dtype(step.types[j].dtype).name}, {stream})")
            names = ", ".join(op.name for op in step.op.body.ops if not op.has(Trait.TERMINATOR))
            add(f"    group_{k}(({ins}), ({outs}), bindings, {stream})    # group {step.op.attrs['id']}: {names}")
        elif step.op.has(Trait.VIEW):
            add(f"    {self.names[step.outs[0]]} = {self.names[step.ins[0]]}.reshape({self._shape(step, 0)})")
        elif step.device_run is not None or step.op.name.startswith("scf."):
            self.ns[f"step_{k}"] = step         # a region op's runner is set after this is written
            add(f"    {outs} = step_{k}.device_run(executor, step_{k}, ({ins}), bindings, alloc, {stream})"
                f"    # {step.op.name}")
        else:
            self.ns[f"step_{k}"] = step
            add(f"    {outs} = host(step_{k}, ({ins}), bindings, {stream})    # {step.op.name} on the host")
        for e, event in enumerate(step.records):
            self.ns[f"done_{k}_{e}"] = event
            add(f"    done_{k}_{e}.record({stream})")


def compile_sequence(executor) -> tuple[str, Any]:
    """The launch function's source and the function itself."""
    writer = SequenceWriter(executor)
    source = writer.write()
    exec(compile(source, "<jitlab launch sequence>", "exec"), writer.ns)
    return source, writer.ns["launch"]

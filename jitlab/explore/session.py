"""What an explorer widget was made from, and the work it does on request from the
browser: dry runs and repro files."""

from __future__ import annotations

import copy
import pathlib
from dataclasses import dataclass, field
from typing import Any

from ..errors import JitlabError
from ..ir.program import Program
from ..report import CompileReport, snapshot
from . import model, repro, sizes
from .memview import memory_data


@dataclass
class Session:
    """One compilation as the explorer sees it: its report and, when known, its Executable."""

    report: CompileReport
    exe: Any = None                       # jl.Executable, for dry runs and repros
    program: Program | None = None        # the program as traced (pass inputs replay on it)
    data: dict[str, Any] = field(default_factory=dict)
    recompiles: list[dict[str, Any]] = field(default_factory=list)   # a jitted function's signatures

    def build(self, title: str = "") -> dict[str, Any]:
        self.data = model.build(self.report, title, self.dims())
        self.data["dry_run"] = sizes.dry_run_data(self.exe)
        self.data["recompiles"] = list(self.recompiles)
        self.data["repros"] = self.repros()
        return self.data

    def compiled(self) -> Program | None:
        """The program as compiled (its groups formed), else as traced."""
        return getattr(self.exe, "program", None) or self.program

    def bindings(self) -> dict[str, int]:
        return dict(self.report.memory.bindings) if self.report.memory else {}

    def repros(self) -> dict[str, dict[str, Any] | None]:
        """Each group's repro text and input shapes, by group id (None: too large for the page)."""
        program = self.compiled()
        if program is None:
            return {}
        return {str(g.id): repro.group_repro(program, g.id, self.bindings()) for g in self.report.groups}

    def repro_file(self, gid: int) -> pathlib.Path:
        """Writes group `gid` with seeded random inputs of its shapes to `<program>_group<gid>.npz` here."""
        program = self.compiled()
        if program is None:
            raise JitlabError("a repro needs the program: explore an Executable, a jitted function or a Program")
        sub = repro.group_program(program, gid)
        return repro.save(pathlib.Path.cwd() / f"{sub.name}.npz", sub, repro.sample_inputs(sub, self.bindings()))

    def dims(self) -> dict[str, list[int]]:
        """The batch-like dims (symbols, or a static program's leading dim), each with its
        compiled value and a slider range."""
        if self.exe is None or not hasattr(self.exe, "dry_run"):
            return {}
        return {d["name"]: [1, d["base"], max(64, 4 * d["base"])] for d in sizes.batch_dims(self.exe)}

    def dry_run(self, values: dict[str, int]) -> dict[str, Any]:
        """The memory view's data for the plan the compiler gives under these dim values."""
        if self.exe is None or not hasattr(self.exe, "dry_run"):
            raise JitlabError("this build has no dry run (Executable.dry_run is missing)")
        values = {k: int(v) for k, v in values.items()}
        shapes = sizes.shapes_for(self.exe, sizes.batch_dims(self.exe), values)
        return memory_data(self.exe.dry_run(shapes), self.data.get("ops", {}))

    def static_data(self, data: dict[str, Any] | None = None) -> dict[str, Any]:
        """`data` (the widget's, by default this session's) for a page with no kernel to ask: marked static."""
        data = copy.deepcopy(self.data if data is None else data)
        data["static"] = True
        return data

    def handle(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """The reply to one request from the browser (errors come back as text, never raised)."""
        kind = message.get("type")
        try:
            if kind == "repro":
                return {"type": kind, "group": message["group"], "path": str(self.repro_file(int(message["group"])))}
            if kind == "dry_run":
                return {"type": kind, "values": message["values"], "memory": self.dry_run(message["values"])}
        except (JitlabError, KeyError, ValueError, TypeError) as e:
            return {"type": kind, "error": f"{type(e).__name__}: {e}", **{k: v for k, v in message.items()
                                                                          if k != "type"}}
        return None


def from_object(x: Any) -> Session:
    """A Session for a JitFunction (its last call), an Executable, a Program or a CompileReport."""
    from ..frontend.jit import JitFunction
    from ..runtime.executable import Executable

    if isinstance(x, JitFunction):
        if x.last is None:
            raise JitlabError(f"{x!r} has not been called yet: call it once, then explore it")
        return Session(x.last.report, x.last, x.last.source, recompiles=[r.to_dict(x.last) for r in x.compiles])
    if isinstance(x, Executable):
        return Session(x.report, x, x.source)
    if isinstance(x, Program):
        report = CompileReport(program=x.name)
        report.graph = snapshot(x)
        return Session(report, None, x)
    if isinstance(x, CompileReport):
        return Session(x)
    raise JitlabError(f"jl.explore takes a jitted function, an Executable, a Program or a CompileReport, "
                      f"got {type(x).__name__}")

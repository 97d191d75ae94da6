"""Passes, their registry, pipeline strings and the pass manager that records each run.

A pass is a small dataclass with a registered `name`; its fields are its options, set
from a pipeline string as in mlir-opt: `"canonicalize,schedule{order=dfs}"`. The
manager runs a pipeline, verifies after each pass when asked, and appends one
`PassRecord` per run to the CompileReport.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, TextIO

from ..errors import JitlabError, PassError, VerifyError
from ..ir.printer import print_program
from ..ir.program import Program
from ..ir.verifier import verify
from ..registry import Registry
from ..report import CompileReport, PassRecord, snapshot
from .capability import BackendCapability, BackendLookup, registered_backend
from .rewriter import RECORD_LINES, RewriteLog

if TYPE_CHECKING:
    from .fusion import Marking

PASSES: Registry[str, type[Pass]] = Registry("pass", PassError)


def register_pass(cls: type[Pass]) -> type[Pass]:
    """Class decorator: makes a pass available by its `name` in pipeline strings."""
    return PASSES.add(cls.name, cls)


@dataclass(kw_only=True)
class PassContext:
    """What a pass may read besides the program: the report, the target, its backend and
    the compile's options that passes take into account."""

    report: CompileReport = field(default_factory=CompileReport)
    target: str = "cpu"
    log: RewriteLog = field(default_factory=RewriteLog)
    donate: tuple[str, ...] = ()              # donated inputs: fusion and the memory plan write outputs into them
    bindings: dict[str, int] | None = None    # symbol values the schedule and memory plan assume
    memory_limit: int | None = None           # bytes: recompute's limit when its own is 0
    streams: int | None = None                # assign-streams' stream count, over its max_streams
    marking: Marking | None = None            # mark-subgraphs' clusters, for fuse
    backends: BackendLookup = field(default=registered_backend, repr=False)   # a target or backend name -> its backend

    def backend(self, name: str = "") -> BackendCapability:
        """The backend `name` names (an engine's), else the target's."""
        return self.backends(name or self.target)


@dataclass
class Pass:
    """Base of all passes: `apply` changes the program in place and returns it."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""

    def apply(self, program: Program, ctx: PassContext) -> Program:
        raise NotImplementedError

    def options_text(self) -> str:
        items = [f"{f.name}={_format_option(getattr(self, f.name))}" for f in dataclasses.fields(self)
                 if getattr(self, f.name) != f.default]
        return "{" + ",".join(items) + "}" if items else ""


def _format_option(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (tuple, list)):
        return ":".join(str(x) for x in v)
    return str(v)


def _parse_option(p: type[Pass], f: dataclasses.Field, text: str) -> Any:
    kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
    try:
        if kind == "bool":
            if text not in ("true", "false", "1", "0"):
                raise ValueError
            return text in ("true", "1")
        if kind == "int":
            return int(text)
        if kind == "float":
            return float(text)
        if kind.startswith("tuple"):
            return tuple(x for x in text.split(":") if x)
        return text
    except ValueError:
        raise PassError(f"pass {p.name}: option {f.name} takes a {kind}, got {text!r}") from None


_PIPELINE_ITEM = re.compile(r"\s*([A-Za-z0-9_\-]+)\s*(\{[^}]*\})?\s*(,|$)")


def parse_pipeline(text: str) -> list[Pass]:
    """`"canonicalize,schedule{order=dfs}"` -> pass instances."""
    passes, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _PIPELINE_ITEM.match(text, pos)
        if m is None or m.end() == pos:
            raise PassError(f"cannot read the pipeline at column {pos + 1}: {text[pos:]!r}")
        name, options = m.group(1), m.group(2)
        passes.append(_make_pass(PASSES.lookup(name), options[1:-1] if options else ""))
        pos = m.end()
    return passes


def _make_pass(cls: type[Pass], options: str) -> Pass:
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs = {}
    for item in filter(None, (s.strip() for s in options.split(","))):
        key, eq, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if key not in fields or not eq:
            raise PassError(f"pass {cls.name}: unknown option {key!r}; options are "
                            f"{', '.join(fields) or 'none'}")
        kwargs[key] = _parse_option(cls, fields[key], value.strip())
    return cls(**kwargs)


@dataclass
class Settings:
    """Process-wide defaults of the pass manager (the test suite turns verify_each on)."""

    verify_each: bool = False


SETTINGS = Settings()
INSTRUMENTATION = ("verify_each", "print_after_all", "print_after_change", "stop_after", "snapshots", "out")


def split_instrumentation(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(pass-manager options such as print_after_all, every other option)."""
    ours = {k: v for k, v in options.items() if k in INSTRUMENTATION}
    return ours, {k: v for k, v in options.items() if k not in INSTRUMENTATION}


class _Seen(NamedTuple):
    """The IR as a pass's record shows it: its text, op counts by dialect and graph snapshot."""

    text: str
    ops: dict[str, int]
    graph: Any


@dataclass
class PassManager:
    """Runs passes in order, recording each run into the report.

    verify_each: verify the IR after every pass (None: `SETTINGS.verify_each`);
    print_after_all / print_after_change: print the IR after every pass / every pass
    that changed it to `out`; stop_after: the name of the pass to stop after."""

    passes: list[Pass]
    verify_each: bool | None = None
    print_after_all: bool = False
    print_after_change: bool = False
    stop_after: str | None = None
    snapshots: bool = True
    out: TextIO | None = field(default=None, repr=False)

    @classmethod
    def parse(cls, pipeline: str, **options) -> PassManager:
        return cls(parse_pipeline(pipeline), **options)

    def run(self, program: Program, ctx: PassContext | None = None) -> Program:
        ctx = ctx or PassContext()
        names = [p.name for p in self.passes]
        if self.stop_after is not None and self.stop_after not in names:
            raise PassError(f"stop_after names {self.stop_after!r}, which is not in the pipeline "
                            f"({', '.join(names) or 'empty'})")
        lines = RECORD_LINES.set(self.snapshots)
        seen = None
        try:
            for p in self.passes:
                program, seen = self.run_one(p, program, ctx, seen)
                if self.stop_after == p.name:
                    break
        finally:
            RECORD_LINES.reset(lines)
        return program

    def run_one(self, p: Pass, program: Program, ctx: PassContext, seen: _Seen | None = None
                ) -> tuple[Program, _Seen]:
        """Runs `p` and records it. `seen` is what the previous pass recorded after it, which is the
        IR this pass starts from: printed and drawn once, not twice. Returns the program and what
        this pass saw after it."""
        before, ops_before, graph_before = seen if seen is not None else self._seen(program)
        mark = len(ctx.log.rewrites), len(ctx.log.misses)
        notes_mark = len(ctx.log.notes)
        start = time.perf_counter()
        try:
            program = p.apply(program, ctx)
        except JitlabError as e:
            if hasattr(e, "add_note"):
                e.add_note(f"(raised by pass {p.name}{p.options_text()})")
            raise
        except Exception as e:
            raise PassError(f"pass {p.name} failed: {type(e).__name__}: {e}") from e
        seconds = time.perf_counter() - start
        after = print_program(program)
        if self.verify_each if self.verify_each is not None else SETTINGS.verify_each:
            self._verify(p, program, after)
        _, ops_after, graph_after = seen_after = self._seen(program, after)
        record = PassRecord(name=p.name, options=p.options_text(), before=before, after=after, seconds=seconds,
                            changed=before != after, ops_before=ops_before, ops_after=ops_after,
                            rewrites=ctx.log.rewrites[mark[0]:], misses=ctx.log.misses[mark[1]:],
                            graph_before=graph_before, graph_after=graph_after, notes=ctx.log.notes[notes_mark:])
        ctx.report.passes.append(record)
        if self.print_after_all or (self.print_after_change and record.changed):
            print(f"// ----- IR after {p.name}{p.options_text()} -----\n{after}", file=self.out or sys.stdout)
        return program, seen_after

    def _seen(self, program: Program, text: str | None = None) -> _Seen:
        return _Seen(print_program(program) if text is None else text, dict(program.op_counts("dialect")),
                     snapshot(program) if self.snapshots else None)

    def _verify(self, p: Pass, program: Program, text: str) -> None:
        try:
            verify(program)
        except VerifyError as e:
            shown = _mark_line(text, str(e).rsplit("\n", 1)[-1].strip())
            raise PassError(f"pass {p.name} left the IR invalid: {e}\n--- IR after {p.name} ---\n{shown}") from None


def _mark_line(text: str, op_line: str) -> str:
    """The IR text with the offending op's line marked."""
    return "\n".join(line + "    // <-- here" if op_line and line.strip() == op_line else line
                     for line in text.rstrip("\n").split("\n"))


def run_pipeline(program: Program, pipeline: str, ctx: PassContext | None = None, **options) -> Program:
    return PassManager.parse(pipeline, **options).run(program, ctx)


def function_pass(name: str, summary: str = "") -> Callable[[Callable], type[Pass]]:
    """Registers a plain `fn(program, ctx)` as an option-less pass (handy in a notebook cell)."""

    def wrap(fn: Callable[[Program, PassContext], Program | None]) -> type[Pass]:
        def apply(self, program, ctx):
            result = fn(program, ctx)
            return program if result is None else result

        cls = dataclass(type(fn.__name__, (Pass,), {"name": name, "summary": summary or (fn.__doc__ or ""),
                                                   "apply": apply, "__module__": fn.__module__}))
        return register_pass(cls)

    return wrap

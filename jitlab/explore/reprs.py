"""Rich notebook reprs of Program and Executable: the IR text beside a small graph,
registered with the IR's display hook (ir/display.py) when the explorer is imported."""

from __future__ import annotations

import html

from ..ir.display import register_html
from ..ir.program import Program
from ..report import snapshot
from ..runtime.executable import Executable
from . import layout

MAX_DRAWN = 120


def small_graph(graph) -> str:
    """The graph as SVG, or a note when it is too large to draw inline."""
    vg = layout.from_snapshot(graph)
    if len(vg.nodes) > MAX_DRAWN:
        return f"<div style='opacity:.7'>{len(vg.nodes)} nodes: use jl.explore(...) to browse this graph</div>"
    svg = layout.draw(vg, {})
    return f"<div style='max-height:420px;overflow:auto'>{svg}</div>"


def ir_block(text: str) -> str:
    return (f"<pre style='margin:0;max-height:420px;overflow:auto;font-size:12px'>{html.escape(text)}</pre>")


def side_by_side(left: str, right: str, caption: str) -> str:
    return (f"<div><div style='font-weight:600;margin-bottom:4px'>{html.escape(caption)}</div>"
            f"<div style='display:flex;gap:16px;align-items:flex-start'><div style='flex:1;min-width:0'>{left}</div>"
            f"<div style='flex:0 0 auto;max-width:45%'>{right}</div></div></div>")


def program_html(program) -> str:
    """HTML for a Program: its IR text and its graph."""
    return side_by_side(ir_block(str(program)), small_graph(snapshot(program)), repr(program))


def executable_html(exe) -> str:
    """HTML for an Executable: what it was compiled to, the compiled IR and its graph."""
    r = exe.report
    facts = [f"{exe.level} on {exe.target}", f"{len(r.groups)} groups", f"{len(r.kernels)} kernels",
             f"{len(r.passes)} pass runs"]
    if r.memory is not None:
        facts.append(f"peak {r.memory.peak_bytes:,} bytes")
    caption = f"{repr(exe)} · " + " · ".join(facts) + " · jl.explore(exe) for every view"
    return side_by_side(ir_block(str(exe.program)), small_graph(snapshot(exe.program)), caption)


register_html(Program, program_html)
register_html(Executable, executable_html)

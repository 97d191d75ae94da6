"""Dry-run plans for a range of sizes of each batch-like dim, carried in the page so its
slider works offline (docs/explorer-data.md, `dry_run`).

The batch-like dims are a symbolic program's symbols, or a static program's leading dim:
the first input's, and every input's that equals it. All move together: each plan is the level's memory plan for
the inputs with those dims set to one size, made from types alone (runtime/reinfer.py).
"""

from __future__ import annotations

from typing import Any

from ..errors import JitlabError
from ..ir.shapes import Sym, evaluate_shape
from ..report import MemoryPlan

MAX_PLANS = 9
BELOW = 4           # sizes down to 1/16 of the compiled one, the rest above it


def batch_dims(exe) -> list[dict[str, Any]]:
    """The dims the slider moves: symbols with their bound value, else the shared leading dim."""
    inputs = list(zip(exe.input_names, (v.type for v in exe.program.inputs)))
    bound = exe.report.memory.bindings if exe.report.memory else {}
    symbols = sorted({s for _, t in inputs for d in t.shape if isinstance(d, Sym) for s in d.symbols})
    if symbols:
        return [{"name": s, "input": None, "axis": None, "base": int(bound.get(s, 1)), "symbol": s,
                 "positions": []} for s in symbols]
    # The data comes first; inputs that share its leading dim (labels, masks) move with it.
    first = next((t for _, t in inputs if t.rank >= 1 and t.shape[0] > 0), None)
    if first is None:
        return []
    base = first.shape[0]
    positions = [[name, 0] for name, t in inputs if t.rank >= 1 and t.shape[0] == base]
    name, axis = positions[0]
    return [{"name": f"{name}.{axis}", "input": name, "axis": axis, "base": int(base), "symbol": None,
             "positions": positions}]


def sizes(base: int) -> list[int]:
    """MAX_PLANS sizes around the compiled one: 1, up to BELOW halvings, then doublings."""
    out = {1, base, *(base >> k for k in range(1, BELOW + 1) if (base >> k) << k == base and base >> k)}
    k = 1
    while len(out) < MAX_PLANS:
        out.add(base << k)
        k += 1
    return sorted(out)


def shapes_for(exe, dims: list[dict[str, Any]], values: dict[str, int]) -> dict[str, tuple[int, ...]]:
    """The input shapes that these dim values give."""
    symbols = {d["symbol"]: int(values.get(d["name"], d["base"])) for d in dims if d["symbol"]}
    shapes = {}
    for name, v in zip(exe.input_names, exe.program.inputs):
        dims_of = list(evaluate_shape(v.type.shape, symbols)) if symbols else list(v.type.shape)
        for d in dims:
            if d["symbol"] is None and [name, d["axis"]] in d["positions"]:
                dims_of[d["axis"]] = int(values.get(d["name"], d["base"]))
        shapes[name] = tuple(dims_of)
    return shapes


def plan_summary(plan: MemoryPlan) -> dict[str, Any]:
    """What the slider redraws: the one peak, when, the live curve and the tensors at the peak."""
    live = plan.largest_live_at_peak(8)
    return {"peak_bytes": plan.peak_bytes, "peak_step": plan.peak_step(), "lower_bound_bytes": plan.lower_bound_bytes,
            "naive_bytes": plan.naive_bytes, "overhead_bytes": plan.overhead_bytes(),
            "live_bytes": list(plan.live_bytes), "live_at_peak": [b.name for b in live],
            "live_at_peak_bytes": [b.bytes for b in live], "bindings": dict(plan.bindings),
            # inputs' bytes at this size (weights keep theirs): what the activations-only curve leaves out
            "input_bytes": {b.name: b.bytes for b in plan.buffers if b.kind == "input" and b.alias_of is None}}


def dry_run_data(exe) -> dict[str, Any] | None:
    """The batch-like dims and a plan per size, for a page without a kernel to ask."""
    if exe is None or not hasattr(exe, "dry_run"):
        return None
    dims = batch_dims(exe)
    plans: list[dict[str, Any]] = []
    error = None if dims else "no batch-like dim: the inputs share no leading dim"
    base = dims[0]["base"] if dims else 1
    for size in sizes(base) if dims else []:
        values = {d["name"]: max(1, size * d["base"] // base) for d in dims}
        shapes = shapes_for(exe, dims, values)
        try:
            plan = exe.dry_run(shapes)
        except JitlabError as e:
            error = f"{type(e).__name__}: {e}"
            continue
        plans.append({"scale": size / base, "values": values, "shapes": {k: list(v) for k, v in shapes.items()},
                      **plan_summary(plan)})
    return {"dims": dims, "plans": plans, "error": error}

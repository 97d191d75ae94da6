"""Dry-run plans for a range of sizes of each batch-like dim, carried in the page so its
slider works offline (docs/explorer-data.md, `dry_run`).

The batch-like dims are a symbolic program's symbols, or for a static program the leading
dims of its data inputs: of the inputs' leading dims grouped by size, the group whose
inputs alone can take another size (the program traces or re-infers with only them changed:
a weight's dim cannot, its neighbours' dims are tied to it) and that the most values carry
(a batch runs through every activation; an embedding table's row count through few). `step(params, x)`
varies x's batch, not the first parameter's rows. All its dims move together: each plan is the
level's memory plan for the inputs with those dims set to one size, made from types alone
(runtime/reinfer.py, or the function traced again).
"""

from __future__ import annotations

import weakref
from typing import Any

from ..errors import JitlabError
from ..ir.shapes import Sym, evaluate_shape
from ..report import MemoryPlan

MAX_PLANS = 9
BELOW = 4           # sizes down to 1/16 of the compiled one, the rest above it
_FOUND: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()     # executable -> its batch-like dims


def batch_dims(exe) -> list[dict[str, Any]]:
    """The dims the slider moves: symbols with their bound value, else the data inputs' leading dim."""
    if exe not in _FOUND:
        _FOUND[exe] = _batch_dims(exe)
    return _FOUND[exe]


def _batch_dims(exe) -> list[dict[str, Any]]:
    inputs = list(zip(exe.input_names, (v.type for v in exe.program.inputs)))
    bound = exe.report.memory.bindings if exe.report.memory else {}
    symbols = sorted({s for _, t in inputs for d in t.shape if isinstance(d, Sym) for s in d.symbols})
    if symbols:
        return [{"name": s, "input": None, "axis": None, "base": int(bound.get(s, 1)), "symbol": s,
                 "positions": []} for s in symbols]
    groups: dict[int, list[str]] = {}
    for name, t in inputs:
        if t.rank >= 1 and t.shape[0] > 0:
            groups.setdefault(t.shape[0], []).append(name)
    candidates = [names for names in groups.values()]
    candidates += [[name] for names in groups.values() if len(names) > 1 for name in names]
    scored = [(_carried(exe, names, groups), -k, names) for k, names in enumerate(candidates)]
    carried, _, names = max(scored, default=(0, 0, []))
    if not carried:
        return []
    base = dict(inputs)[names[0]].shape[0]
    return [{"name": f"{names[0]}.0", "input": names[0], "axis": 0, "base": int(base), "symbol": None,
             "positions": [[name, 0] for name in names]}]


def _carried(exe, names: list[str], groups: dict[int, list[str]]) -> int:
    """How many values carry these inputs' leading dim once it is given a size no dim has (0 when
    the program cannot take it: a dim tied to others'); the first input's dim counts when alone."""
    from ..runtime.dryrun import source_at

    source = exe.source
    if len(groups) == 1 and len(names) == len(next(iter(groups.values()))):
        return 1
    taken = {d for op in source.walk() for r in op.results for d in r.type.shape if isinstance(d, int)}
    taken |= {d for v in source.inputs for d in v.type.shape if isinstance(d, int)}
    probe = next(n for n in range(2, max(taken, default=0) + 2) if n not in taken)
    shapes = {name: (probe, *v.type.shape[1:]) for name, v in zip(exe.input_names, source.inputs) if name in names}
    try:
        program, _, _ = source_at(source, shapes, exe.input_names)
    except JitlabError:
        return 0
    return sum(probe in r.type.shape for op in program.walk() for r in op.results)


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
            "input_bytes": {b.name: b.bytes for b in plan.buffers if b.kind == "input" and b.alias_of is None},
            # every buffer's bytes at this size: the by-category chart redrawn for it
            "buffer_bytes": {b.name: b.bytes for b in plan.buffers if b.alias_of is None}}


def dry_run_data(exe) -> dict[str, Any] | None:
    """The batch-like dims and a plan per size, for a page without a kernel to ask."""
    if exe is None or not hasattr(exe, "dry_run"):
        return None
    dims = batch_dims(exe)
    plans: list[dict[str, Any]] = []
    error = None if dims else "no batch-like dim: no input's leading dim can take another size alone"
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

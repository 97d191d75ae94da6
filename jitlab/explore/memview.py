"""The Schedule and Memory views' data: the recorded order and plan, joined to ops by uid."""

from __future__ import annotations

from typing import Any

from ..report import CompileReport, MemoryPlan


def schedule_data(report: CompileReport) -> dict[str, Any] | None:
    """The order used, each op's step, and every order compared with its peak."""
    s = report.schedule
    if s is None:
        return None
    # The orders' peaks are their largest live sets (the memory plan's `peak_bytes` is the peak).
    return {"order": list(s.order), "strategy": s.strategy, "peaks": dict(s.peaks), "peak_kind": "largest live set",
            "orders": {k: list(v) for k, v in s.orders.items()},
            "step_of": {str(uid): i for i, uid in enumerate(s.order)}}


def streams_data(report: CompileReport) -> dict[str, Any] | None:
    """Each stream's ops in launch order, and the events that order reads across streams."""
    plan = report.streams
    if plan is None:
        return None
    lanes = [[uid for uid, s in zip(plan.ops, plan.stream_of) if s == k] for k in range(plan.streams)]
    return {"lanes": lanes, "events": [{"producer": e.producer, "consumer": e.consumer, "from": e.from_stream,
                                        "to": e.to_stream} for e in plan.events]}


POOL_SERIES = ("reserved", "in_use")     # the byte counts the timeline draws; the rest are counts and ratios


def pool_series(pool: list[dict[str, int]]) -> dict[str, list[int]]:
    """The pool's bytes reserved from the system and in use, per step, for the timeline."""
    return {k: [int(step.get(k, 0)) for step in pool] for k in POOL_SERIES if pool and k in pool[0]}


def memory_data(plan: MemoryPlan | None, ops: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """A memory plan for drawing: buffers tagged with their producer's group."""
    if plan is None:
        return None
    live = list(plan.live_bytes)
    peak_step = plan.peak_step()
    buffers = [{"name": b.name, "bytes": b.bytes, "offset": b.offset, "first": b.first, "last": b.last,
                "producer": b.producer, "producer_name": b.producer_name, "kind": b.kind, "alias_of": b.alias_of,
                "region": b.region, "role": b.role, "category": category(b, ops.get(str(b.producer))),
                **_made_by(ops.get(str(b.producer)) or {})}
               for b in plan.buffers]
    # One peak: `peak_bytes` (what the plan holds at most) reached at `peak_step`; the live curve
    # counts tensors only, `overhead_bytes` is the rest (report.py: MemoryPlan.peak_step).
    return {"peak_bytes": plan.peak_bytes, "overhead_bytes": plan.overhead_bytes(),
            "lower_bound_bytes": plan.lower_bound_bytes,
            "naive_bytes": plan.naive_bytes, "mode": plan.mode, "alignment": plan.alignment, "live_bytes": live,
            "peak_step": peak_step, "live_at_peak": [b.name for b in plan.largest_live_at_peak(8)],
            "heuristic": plan.heuristic, "heuristics": dict(plan.heuristics), "pool": pool_series(plan.pool),
            "bindings": dict(plan.bindings), "buffers": buffers,
            "activation_bytes": sum(b.bytes for b in plan.buffers if b.role == "activation"),
            "donated": donated_outputs(plan)}


CATEGORIES = ("weight", "input", "activation", "gradient", "temporary", "output")
BACKWARD = "backward of "       # how a backward op's location prints (passes/activations.py: BackwardLocation)


def category(b, op: dict[str, Any] | None) -> str:
    """What a buffer holds, for the memory view: one of CATEGORIES, or "view" for a view of another buffer.

    A gradient is a buffer a backward op makes (the gradient of a forward value, or a partial sum of one;
    a group is the op it grew from, whose location it carries: an optimizer's update fused with the
    weight's gradient makes the new weight, an output); an activation is a forward value kept for the
    backward pass (`role`); a temporary is the rest that no output holds."""
    if b.kind in ("weight", "constant"):
        return "weight"
    if b.kind == "input":
        return "input"
    if b.kind == "view":
        return "view"
    if op is not None and str(op.get("loc") or "").startswith(BACKWARD):
        return "gradient"
    if b.role == "activation":
        return "activation"
    return "output" if b.kind == "output" else "temporary"


def _made_by(op: dict[str, Any]) -> dict[str, Any]:
    """The group, scope path and source line of the op that made a buffer."""
    return {"group": op.get("group"), "path": op.get("path"), "loc": op.get("loc")}


def donated_outputs(plan: MemoryPlan) -> list[dict[str, Any]]:
    """Outputs the plan lodges in donated inputs' arrays: memory a training step does not hold twice."""
    inputs = {b.name for b in plan.buffers if b.kind == "input"}
    return [{"name": b.name, "input": b.alias_of, "bytes": b.bytes} for b in plan.buffers
            if b.kind == "inplace" and b.alias_of in inputs]

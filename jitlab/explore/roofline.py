"""The roofline's data: each profiled step's achieved bandwidth and FLOP/s against the
device's measured bounds (the profile's `bounds`), its time at the bound and how far it is
from it, and whether bytes or FLOPs bound it. Steps of one kernel are also summed per kernel.
Nothing is measured here: the profile holds the seconds, bytes, FLOPs and bounds."""

from __future__ import annotations

from typing import Any

from ..report import CompileReport


def point(seconds: float, nbytes: int, flops: int | None, bounds: dict[str, Any]) -> dict[str, Any]:
    """One kernel's (or step's) place on the roofline."""
    memory = nbytes / bounds["bandwidth"]
    compute = flops / bounds["flops"] if flops and bounds.get("flops") else 0.0
    bound = max(memory, compute)
    return {"seconds": seconds, "bytes": nbytes, "flops": flops,
            "intensity": flops / nbytes if flops is not None and nbytes else None,
            "bandwidth": nbytes / seconds if seconds > 0 else None,
            "flops_per_second": flops / seconds if flops is not None and seconds > 0 else None,
            "bound_seconds": bound, "percent": 100.0 * bound / seconds if seconds > 0 else None,
            "limit": "compute" if compute > memory else "memory"}


def _steps(profile: dict[str, Any]) -> list[dict[str, Any]]:
    """The steps that move data or compute (views and bookkeeping move nothing)."""
    return [s for s in profile.get("steps", []) if s.get("bytes") or s.get("flops")]


def roofline_data(report: CompileReport) -> dict[str, Any] | None:
    """Per step and per kernel, where the profile places it against its device's bounds; None unprofiled."""
    profile = report.profile or {}
    bounds = profile.get("bounds")
    if not bounds or not bounds.get("bandwidth"):
        return None
    steps = [{"index": s["index"], "uid": s["uid"], "name": s["name"], "group": s["group"], "kernel": s["kernel"],
              **point(s["median"], s["bytes"], s.get("flops"), bounds)} for s in _steps(profile)]
    kernels = []
    for key, runs in _by_kernel(steps).items():
        flops = None if any(r["flops"] is None for r in runs) else sum(r["flops"] for r in runs)
        kernels.append({"key": key, "groups": [r["group"] for r in runs],
                        **point(sum(r["seconds"] for r in runs), sum(r["bytes"] for r in runs), flops, bounds)})
    timed = sum(s["seconds"] for s in steps)
    at_bound = sum(s["bound_seconds"] for s in steps)
    return {"bounds": dict(bounds), "target": profile.get("target", report.target), "steps": steps,
            "kernels": kernels, "seconds": timed, "bound_seconds": at_bound}


def _by_kernel(steps: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for s in steps:
        if s["kernel"] is not None:
            out.setdefault(s["kernel"], []).append(s)
    return out

"""The recompute benchmark (issue 10): a deep tanh MLP's SGD step, differentiated by
`jl.value_and_grad`, at each level with and without `recompute` under a limit of 60% of the
step's own unconstrained planned peak: the memory saved and the time it costs."""

from __future__ import annotations

import numpy as np

from ..timing import interleaved_medians

NAME = "recompute"
LIMIT_SHARE = 0.6
# layers, width, batch: activations (batch x width per layer) dominate the weights, as in the
# deep networks rematerialization is for
SHAPES = {False: (8, 64, 2048), True: (8, 16, 512)}


def _names(layers: int) -> list[str]:
    return [f"w{i}" for i in range(layers)]


def deep_loss(p, x):
    """Mean square of a stack of tanh(h @ w) layers."""
    h = x
    for k in sorted(p, key=lambda k: int(k[1:])):
        h = np.tanh(h @ p[k])
    return np.mean(h * h)


def sgd_step(p, x):
    """One SGD step: the loss and the new weights."""
    import jitlab as jl
    from jitlab import optim

    loss, g = jl.value_and_grad(deep_loss)(p, x)
    return loss, optim.sgd(p, g, 0.1)


def inputs(quick: bool, seed: int = 0) -> tuple[dict, np.ndarray]:
    layers, width, batch = SHAPES[quick]
    rng = np.random.default_rng(seed)
    p = {k: (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32) for k in _names(layers)}
    return p, rng.standard_normal((batch, width)).astype(np.float32)


def _flat(result) -> np.ndarray:
    loss, p = result
    return np.concatenate([np.ravel(loss)] + [np.ravel(p[k]) for k in sorted(p)])


def run_recompute(levels: list[str], repeats: int, quick: bool, target: str = "cpu") -> dict:
    """Per level: time and planned peak of the plain step and of the step recomputing under the limit."""
    import jitlab as jl

    p, x = inputs(quick)
    layers, width, batch = SHAPES[quick]
    rows = []
    for level in levels:
        plain = jl.jit(sgd_step, level=level, target=target)
        expected = _flat(plain(p, x))
        planned = plain.last.report.memory.peak_bytes
        limit = int(LIMIT_SHARE * planned)
        remat = jl.jit(sgd_step, level=level, target=target, recompute=True, memory_limit=limit)
        same = bool(np.allclose(_flat(remat(p, x)), expected, rtol=1e-4, atol=1e-6))
        record = remat.last.report.recompute
        medians = interleaved_medians({"plain": lambda f=plain: f(p, x), "recompute": lambda f=remat: f(p, x)},
                                      repeats)
        rows.append({"level": level, "plain_ms": medians["plain"] * 1e3, "recompute_ms": medians["recompute"] * 1e3,
                     "plain_peak_bytes": planned, "limit_bytes": limit,
                     "recompute_peak_bytes": remat.last.report.memory.peak_bytes,
                     "ops_added": record.ops_added if record else 0, "values": record.values if record else [],
                     "same_result": same})
    return {"name": NAME, "size": f"{layers} layers of {batch}x{width}", "rows": rows}


def format_recompute(data: dict) -> list[str]:
    """The table: peaks and times without and with recomputation, and their ratios."""
    from ..units import format_bytes

    lines = ["", f"recompute: SGD step of a deep tanh MLP ({data['size']}), limit {LIMIT_SHARE:.0%} of the "
                 "unconstrained planned peak",
             "| level | planned peak | limit | with recompute | peak ratio | ms | ms with recompute | time ratio "
             "| ops added | same result |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in data["rows"]:
        lines.append(f"| {r['level']} | {format_bytes(r['plain_peak_bytes'])} | {format_bytes(r['limit_bytes'])} | "
                     f"{format_bytes(r['recompute_peak_bytes'])} | "
                     f"{r['recompute_peak_bytes'] / r['plain_peak_bytes']:.2f} | {r['plain_ms']:.3f} | "
                     f"{r['recompute_ms']:.3f} | {r['recompute_ms'] / r['plain_ms']:.2f} | {r['ops_added']} | "
                     f"{'yes' if r['same_result'] else 'NO'} |")
    return lines

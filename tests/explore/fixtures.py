"""Hand-built compilations with every report section filled, standing in for the
fusion, scheduling, memory and code generation stages until those land."""

import numpy as np

import jitlab as jl
from jitlab.report import BufferRecord, FusionDecision, GroupRecord, KernelRecord, MemoryPlan, Rejection, ScheduleRecord

GROUPED = """func @mlp(%x: f32[B,8], %w1: f32[8,16], %b1: f32[16], %w2: f32[16,4], %b2: f32[4]) -> (f32[B,4], f32[B,4]) {
  %h = np.matmul(%x, %w1) : f32[B,16]
  %dead = np.tanh(%x) : f32[B,8]
  %g0 = jit.group(%h, %b1) {id = 0, key = "k-relu", backend = "numba_cpu"} : f32[B,16] {
  ^bb(%p: f32[B,16], %q: f32[16]):
    %a = np.add(%p, %q) : f32[B,16]
    %z = np.constant() {value = dense<f32[] 0.0>} : f32[]
    %r = np.maximum(%a, %z) : f32[B,16]
    jit.yield(%r)
  }
  %l = np.matmul(%g0, %w2) : f32[B,4]
  %g1 = jit.group(%l, %b2) {id = 1, key = "k-exp", backend = "numba_cpu"} : f32[B,4] {
  ^bb(%u: f32[B,4], %v: f32[4]):
    %s = np.add(%u, %v) : f32[B,4]
    %e = np.exp(%s) : f32[B,4]
    jit.yield(%e)
  }
  %c = np.cumsum(%g1) {axis = 1} : f32[B,4]
  %t = np.reshape(%c) {shape = [B, 4]} : f32[B,4]
  func.return(%g1, %t)
}
"""


def inputs(batch=3, seed=0):
    rng = np.random.default_rng(seed)
    f = lambda *s: rng.standard_normal(s).astype(np.float32)
    return [f(batch, 8), f(8, 16), f(16), f(16, 4), f(4)]


def by_name(report):
    """Op uids of the final graph by result name (group ops by their group id)."""
    names = {}
    for n in report.graph.nodes:
        for r in n.results:
            names[r] = n.uid
    return names


def fill(report, batch=3):
    """Adds groups, rejections, fusion decisions, a schedule, a memory plan and kernels."""
    uid = by_name(report)
    members = {0: ["a", "z", "r"], 1: ["s", "e"]}
    report.groups = [GroupRecord(id=g, ops=[uid[m] for m in ms], op_names=[report_name(report, uid[m]) for m in ms],
                                 backend="numba_cpu", key=f"k{g}", kind="elementwise", inputs=["h"], outputs=["g0"])
                     for g, ms in members.items()]
    report.rejected = [Rejection(op=uid["c"], name="np.cumsum", reason="scan ops are not fusible"),
                       Rejection(op=uid["h"], name="np.matmul", reason="library kernel (BLAS)")]
    report.fusion = [FusionDecision(producer=uid["h"], consumer=uid["a"], fused=False,
                                    reason="producer is a library matmul"),
                     FusionDecision(producer=uid["a"], consumer=uid["r"], fused=True,
                                    reason="elementwise into elementwise"),
                     FusionDecision(producer=uid["e"], consumer=uid["c"], fused=False, reason="consumer is a scan")]
    order = [uid[n] for n in ("h", "a", "z", "r", "l", "s", "e", "c", "t")]
    report.schedule = ScheduleRecord(order=order, strategy="memory-aware",
                                     peaks={"bfs": 900, "dfs": 800, "memory-aware": 700},
                                     orders={"bfs": order, "dfs": order, "memory-aware": order})
    row = 4 * batch
    sizes = {"h": 16 * row, "a": 16 * row, "r": 16 * row, "l": 4 * row, "s": 4 * row, "e": 4 * row, "c": 4 * row}
    spans = {"h": (0, 1), "a": (1, 3), "r": (3, 4), "l": (4, 5), "s": (5, 6), "e": (6, 8), "c": (7, 8)}
    offsets = {"h": 0, "a": 256, "r": 0, "l": 256, "s": 0, "e": 512, "c": 0}
    buffers = [BufferRecord(name=n, bytes=sizes[n], offset=offsets[n], first=spans[n][0], last=spans[n][1],
                            producer=uid[n], producer_name=report_name(report, uid[n])) for n in sizes]
    buffers.append(BufferRecord(name="t", bytes=4 * row, offset=None, first=8, last=8, producer=uid["t"],
                                producer_name="np.reshape", kind="view", alias_of="c"))
    live = [sum(b.bytes for b in buffers if b.first <= s <= b.last and b.alias_of is None) for s in range(9)]
    report.memory = MemoryPlan(peak_bytes=max(live) + 64, lower_bound_bytes=max(live), naive_bytes=sum(sizes.values()),
                               buffers=buffers, live_bytes=live,
                               heuristic="best-fit", heuristics={"best-fit": max(live) + 64, "first-fit": max(live) + 128},
                               pool=[{"reserved": max(live[: s + 1]) + 64} for s in range(9)], bindings={"B": batch})
    report.kernels = [KernelRecord(key="k0", backend="numba_cpu",
                                   source="@numba.njit\ndef k0(p, q, out):\n    for i in range(p.shape[0]):\n"
                                          "        out[i] = max(p[i] + q[i], 0.0)\n",
                                   compile_seconds=0.61, cache_hit=False, miss_reason="no entry for this key", group=0),
                      KernelRecord(key="k1", backend="numba_cpu", source="def k1(u, v, out):\n    out[:] = np.exp(u + v)\n",
                                   compile_seconds=0.0, cache_hit=True, group=1)]
    report.profile = {"kernels": {"k0": {"calls": 4, "seconds": 0.004}, "k1": 0.0005}}
    return report


def report_name(report, uid):
    return next(n.name for n in report.graph.nodes if n.uid == uid)


class DryRunExecutable:
    """An O0 Executable with the dry run the memory stage will add: plan scaled by B."""

    def __init__(self, exe):
        self.exe = exe
        self.calls = []

    def __getattr__(self, name):
        return getattr(self.exe, name)

    def dry_run(self, shapes):
        self.calls.append(shapes)
        batch = shapes["x"][0]
        plan = self.exe.report.memory
        scale = batch / plan.bindings["B"]
        buffers = [BufferRecord(name=b.name, bytes=int(b.bytes * scale),
                                offset=None if b.offset is None else int(b.offset * scale), first=b.first, last=b.last,
                                producer=b.producer, producer_name=b.producer_name, kind=b.kind, alias_of=b.alias_of)
                   for b in plan.buffers]
        return MemoryPlan(peak_bytes=int(plan.peak_bytes * scale), lower_bound_bytes=int(plan.lower_bound_bytes * scale),
                          naive_bytes=int(plan.naive_bytes * scale), buffers=buffers,
                          live_bytes=[int(v * scale) for v in plan.live_bytes], bindings={"B": batch})


def compiled(batch=3):
    """(Executable with a full report, its inputs)."""
    program = jl.parse(GROUPED)
    exe = jl.compile(program, level="O1", passes="verify,infer-shapes,dce")   # keep the hand-made groups
    fill(exe.report, batch)
    return exe, inputs(batch)

// Loops and branches (scf.for, scf.while, scf.if) outside the graph: one line on what a loop costs per
// iteration, its regions' sub-steps for the Schedule view, and what one iteration makes for the Memory view.

import { fmtBytes, fmtSec, h, opLink, plural } from "./core.js";

export function loopOf(data, uid) {
  return (data.loops || {})[String(uid)] || null;
}

// "for × 100 · 11 ops per iteration · 3.2 µs per iteration (320 µs in all)".
export function loopLine(loop) {
  const ops = loop.regions.reduce((a, r) => a + r.steps.length, 0);
  const per = loop.op === "scf.if" ? "" : " per iteration";
  let time = "";
  if (typeof loop.seconds === "number") {
    time = typeof loop.seconds_per_iteration === "number"
      ? ` · ${fmtSec(loop.seconds_per_iteration)} per iteration (${fmtSec(loop.seconds)} in all)`
      : ` · ${fmtSec(loop.seconds)} in all${loop.op === "scf.if" ? "" : " (trip count known only when it runs: no time per iteration)"}`;
  }
  return `${loop.label} · ${plural(ops, "op")}${per}${time}`;
}

// What one iteration (a branch: both branches) holds: a native loop's own buffers, allocated once and
// reused every iteration; otherwise the bytes of every value the body makes, an upper bound (a loop run
// from the host calls its body's executable, whose plan the report does not keep).
export function iterationLine(loop) {
  if (typeof loop.buffer_bytes === "number") {
    return `one native loop: one iteration lives in ${plural(loop.buffer_count, "buffer")}, ${fmtBytes(loop.buffer_bytes)}, allocated once and reused every iteration`;
  }
  const what = loop.op === "scf.if" ? "its branches make" : "one iteration makes";
  const bytes = typeof loop.iteration_bytes === "number" ? `, ${fmtBytes(loop.iteration_bytes)}` : "";
  const runs = loop.runs ? `; runs from the host: ${loop.runs}` : "";
  return `${what} ${plural(loop.iteration_values, "value")}${bytes} (at most live at once inside it; the body's own memory plan is not recorded)${runs}`;
}

// The loop's step: each region's sub-steps, in the order they run every iteration.
export function loopSteps(ctx, uid) {
  const loop = loopOf(ctx.data, uid);
  if (!loop) return null;
  const regions = loop.regions.map((r) => h("div", { class: "jl-ordercol", "data-region": r.name },
    h("b", {}, `${r.name} · ${plural(r.steps.length, "sub-step")}`),
    h("ol", { start: 1 }, r.steps.map((u) => h("li", {}, loopOf(ctx.data, u) ? [opLink(ctx, u), ` ${loopOf(ctx.data, u).label}`] : opLink(ctx, u))))));
  return h("div", { class: "jl-loopsteps" }, h("h4", {}, loopLine(loop)),
    h("div", { class: "jl-muted" }, iterationLine(loop)), h("div", { class: "jl-ordercols" }, regions));
}

// Every loop at its step, for the Memory view: the live set the plan gives at that step is the one outside it.
export function loopsPanel(ctx) {
  const entries = Object.entries(ctx.data.loops || {});
  if (!entries.length) return null;
  const stepOf = (ctx.data.schedule || {}).step_of || {};
  const rows = entries.map(([uid, loop]) => h("li", { "data-uid": uid }, opLink(ctx, Number(uid)),
    stepOf[uid] !== undefined ? ` at step ${stepOf[uid]}` : " (inside another loop)", ` · ${loopLine(loop)} · ${iterationLine(loop)}`));
  return h("div", { class: "jl-loops" }, h("h4", {}, `loops and branches: ${entries.length}`),
    h("div", { class: "jl-muted" }, "the plan's live set at a loop's step is what lives around it while it runs"), h("ul", {}, rows));
}

// The roofline (data.roofline): each profiled kernel step's achieved FLOP/s against its
// arithmetic intensity, under the device's measured roofs (copy bandwidth, peak FLOP/s), with a
// table of the steps farthest from what the hardware allows; and the graph's "% of bound" colours.

import { chip, fmtBytes, fmtSec, h, s } from "./core.js";

const RF_W = 600;
const RF_H = 300;
const RF_ROWS = 12;
const RF_PAD = { l: 64, r: 16, t: 14, b: 40 };

export function fmtRate(x, unit) {
  if (x === null || x === undefined) return "–";
  const steps = [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
  const [div, prefix] = steps.find(([d]) => Math.abs(x) >= d) || [1, ""];
  return `${(x / div).toFixed(x / div < 10 ? 2 : 1)} ${prefix}${unit}`;
}

// A power of ten as "100 M": the axis names the unit.
function tickText(v) {
  const e = Math.round(Math.log10(v));
  const k = Math.max(0, Math.min(4, Math.floor(e / 3)));
  return `${10 ** (e - 3 * k)}${["", " k", " M", " G", " T"][k]}`;
}

function fmtCount(x) {
  return x === null || x === undefined ? "unknown" : fmtRate(x, "").trim() || "0";
}

export function pctText(p) {
  return p === null || p === undefined ? "–" : `${p < 10 ? p.toFixed(1) : p.toFixed(0)}%`;
}

// Far from the bound is red, at it green (linear in % of bound, capped at 100).
export function boundColor(pct) {
  const t = Math.max(0, Math.min(1, pct / 100));
  const c = (a, b) => Math.round(a + (b - a) * t);
  return `rgb(${c(230, 140)},${c(110, 205)},${c(95, 125)})`;
}

export function boundLegend() {
  return h("span", { class: "jl-chip jl-scale jl-bound-legend" }, "% of bound (time at the roofline / measured): 0%",
    h("span", { class: "jl-ramp", style: `background:linear-gradient(90deg, ${boundColor(0)}, ${boundColor(50)}, ${boundColor(100)})` }),
    "100% · uncoloured: not timed");
}

// The roofline's steps by group and by uid, once per data object (kept apart from the data, which is the page's as saved).
const STEP_INDEX = new WeakMap();

function stepIndex(data) {
  if (!STEP_INDEX.has(data)) {
    const byGroup = new Map();
    const byUid = new Map();
    for (const st of (data.roofline || {}).steps || []) {
      if (st.group !== null && st.group !== undefined) (byGroup.get(st.group) || byGroup.set(st.group, []).get(st.group)).push(st);
      else byUid.set(st.uid, st);
    }
    STEP_INDEX.set(data, { byGroup, byUid });
  }
  return STEP_INDEX.get(data);
}

// The % of bound of a set of graph leaves: the time their steps would take at the bounds over their measured time.
export function boundOfLeaves(data, leaves) {
  const { byGroup, byUid } = stepIndex(data);
  const seen = new Set();
  let measured = 0;
  let bound = 0;
  for (const leaf of leaves) {
    const steps = leaf.group !== null && leaf.group !== undefined ? byGroup.get(leaf.group) || [] : leaf.op && byUid.has(leaf.op.uid) ? [byUid.get(leaf.op.uid)] : [];
    for (const st of steps) {
      if (seen.has(st.index)) continue;
      seen.add(st.index);
      measured += st.seconds;
      bound += st.bound_seconds;
    }
  }
  return measured > 0 ? (100 * bound) / measured : null;
}

function stepLabel(data, st) {
  return st.group !== null && st.group !== undefined ? `group ${st.group}` : `${st.name} #${st.uid}`;
}

function stepTitle(data, st, bounds) {
  const share = st.bandwidth ? ` (${pctText((100 * st.bandwidth) / bounds.bandwidth)} of copy bandwidth)` : "";
  return [`${stepLabel(data, st)}${st.kernel ? ` · kernel ${st.kernel.slice(0, 16)}` : ""}`,
    `${fmtSec(st.seconds)} measured · ${fmtSec(st.bound_seconds)} at the bound · ${pctText(st.percent)} of bound`,
    `${fmtBytes(st.bytes)} moved · ${fmtRate(st.bandwidth, "B/s")}${share}`,
    `${fmtCount(st.flops)} FLOP · ${fmtRate(st.flops_per_second, "FLOP/s")} · ${st.intensity === null ? "–" : st.intensity.toFixed(2)} FLOP/byte`,
    `${st.limit}-bound`].join("\n");
}

export class Roofline {
  constructor(ctx) {
    this.ctx = ctx;
    this.data = ctx.data;
    this.rf = ctx.data.roofline;
    this.el = h("div", { class: "jl-roofline" });
    ctx.on("select", (sel) => this.mark(sel));
  }

  select(st) {
    const g = (this.data.groups || []).find((x) => x.id === st.group);
    const uids = g ? g.ops : st.uid !== null ? [st.uid] : [];
    this.ctx.select({ kind: st.group !== null ? "group" : "op", id: st.group, uids, label: stepLabel(this.data, st), source: "roofline" });
  }

  // The log-log chart: x FLOP per byte, y FLOP/s; the roofs, and one dot per step that computes.
  chart(points) {
    const b = this.rf.bounds;
    const xs = points.map((p) => p.intensity);
    const ys = points.map((p) => p.flops_per_second);
    const ridge = b.flops ? b.flops / b.bandwidth : null;
    const x0 = Math.min(...xs, ridge || Infinity, 1) / 4;
    const x1 = Math.max(...xs, ridge || 0, 1) * 4;
    const top = b.flops || b.bandwidth * x1;
    const y0 = Math.min(...ys, b.bandwidth * x0) / 4;
    const y1 = Math.max(...ys, top) * 2;
    const X = (v) => RF_PAD.l + ((Math.log10(v) - Math.log10(x0)) / (Math.log10(x1) - Math.log10(x0))) * (RF_W - RF_PAD.l - RF_PAD.r);
    const Y = (v) => RF_H - RF_PAD.b - ((Math.log10(v) - Math.log10(y0)) / (Math.log10(y1) - Math.log10(y0))) * (RF_H - RF_PAD.t - RF_PAD.b);
    const ticks = (lo, hi) => { const out = []; for (let e = Math.ceil(Math.log10(lo)); e <= Math.floor(Math.log10(hi)); e++) out.push(10 ** e); return out; };
    const grid = [
      ...ticks(x0, x1).map((v) => [s("line", { x1: X(v), x2: X(v), y1: RF_PAD.t, y2: RF_H - RF_PAD.b, class: "jl-rf-grid" }),
        s("text", { x: X(v), y: RF_H - RF_PAD.b + 14, class: "jl-rf-tick", "text-anchor": "middle" }, tickText(v))]),
      ...ticks(y0, y1).map((v) => [s("line", { x1: RF_PAD.l, x2: RF_W - RF_PAD.r, y1: Y(v), y2: Y(v), class: "jl-rf-grid" }),
        s("text", { x: RF_PAD.l - 4, y: Y(v) + 4, class: "jl-rf-tick", "text-anchor": "end" }, tickText(v))])];
    const knee = ridge ? Math.min(ridge, x1) : x1;
    const roofs = [s("polyline", { class: "jl-rf-roof", "data-roof": "memory",
      points: `${X(x0)},${Y(b.bandwidth * x0)} ${X(knee)},${Y(b.bandwidth * knee)}${ridge ? ` ${X(x1)},${Y(b.flops)}` : ""}` }),
    s("text", { x: X(x0) + 6, y: Y(b.bandwidth * x0) - 8, class: "jl-rf-rooflabel" }, `copy ${fmtRate(b.bandwidth, "B/s")}`),
    ridge ? s("text", { x: X(x1) - 4, y: Y(b.flops) - 6, class: "jl-rf-rooflabel", "text-anchor": "end" }, `peak ${fmtRate(b.flops, "FLOP/s")}`) : null];
    const total = points.reduce((a, p) => a + p.seconds, 0) || 1;
    const dots = points.map((p) => s("circle", { class: `jl-rf-dot jl-rf-${p.limit}`, "data-step": p.index, "data-group": p.group ?? "", "data-uid": p.uid ?? "",
      cx: X(p.intensity), cy: Y(p.flops_per_second), r: 3 + 9 * Math.sqrt(p.seconds / total),
      fill: this.data.colors[String(p.group)] || "#b8b8b8", onclick: () => this.select(p) }, s("title", {}, stepTitle(this.data, p, b))));
    const axes = [s("text", { x: (RF_PAD.l + RF_W - RF_PAD.r) / 2, y: RF_H - 6, class: "jl-rf-axis", "text-anchor": "middle" }, "arithmetic intensity (FLOP per byte moved)"),
      s("text", { x: 12, y: (RF_PAD.t + RF_H - RF_PAD.b) / 2, class: "jl-rf-axis", "text-anchor": "middle", transform: `rotate(-90 12 ${(RF_PAD.t + RF_H - RF_PAD.b) / 2})` }, "achieved FLOP/s")];
    return s("svg", { class: "jl-rf-chart", width: RF_W, height: RF_H, viewBox: `0 0 ${RF_W} ${RF_H}` }, grid.flat(), roofs, axes, dots);
  }

  // The steps by time lost against the bound, the farthest first.
  table(steps) {
    const rows = [...steps].sort((a, b) => (b.seconds - b.bound_seconds) - (a.seconds - a.bound_seconds)).map((st) =>
      h("tr", { "data-step": st.index, "data-group": st.group ?? "", "data-uid": st.uid ?? "", title: stepTitle(this.data, st, this.rf.bounds), onclick: () => this.select(st) },
        h("td", {}, st.group !== null ? chip(this.data.colors[String(st.group)], `group ${st.group}`) : `${st.name} #${st.uid}`),
        h("td", { class: "jl-num" }, fmtSec(st.seconds)), h("td", { class: "jl-num" }, fmtSec(st.bound_seconds)),
        h("td", { class: "jl-num jl-rf-pct", style: `background:${boundColor(st.percent)}` }, pctText(st.percent)),
        h("td", {}, st.limit), h("td", { class: "jl-num" }, fmtBytes(st.bytes)), h("td", { class: "jl-num" }, fmtRate(st.bandwidth, "B/s")),
        h("td", { class: "jl-num" }, fmtCount(st.flops)), h("td", { class: "jl-num" }, fmtRate(st.flops_per_second, "FLOP/s"))));
    // The farthest first, RF_ROWS of them until asked for the rest.
    const body = h("tbody", {}, rows.slice(0, RF_ROWS));
    const more = rows.length > RF_ROWS ? h("a", { href: "#", class: "jl-rf-more", onclick: (e) => {
      e.preventDefault(); body.append(...rows.slice(RF_ROWS)); more.remove(); this.mark(this.ctx.selection);
    } }, `show the other ${rows.length - RF_ROWS} steps`) : null;
    return h("div", {}, h("table", { class: "jl-table jl-rf-table" },
      h("thead", {}, h("tr", {}, ["step", "measured", "at bound", "% of bound", "bound by", "bytes", "bandwidth", "FLOPs", "FLOP/s"].map((t) => h("th", {}, t)))),
      body), more);
  }

  mark(sel) {
    const uids = new Set((sel && sel.uids) || []);
    const groups = new Set([...uids].map((u) => (this.data.ops[String(u)] || {}).group).filter((g) => g !== null && g !== undefined));
    this.el.querySelectorAll("[data-step]").forEach((e) => {
      const g = e.dataset.group === "" ? null : Number(e.dataset.group);
      // a step outside any group (a host op such as a pool) is selected by its op
      const own = e.dataset.uid !== "" && uids.has(Number(e.dataset.uid));
      e.classList.toggle("jl-rf-selected", (g !== null && groups.has(g)) || (g === null && own));
    });
  }

  mount(parent) {
    parent.append(this.el);
    const rf = this.rf;
    const b = rf.bounds;
    const placed = rf.steps.filter((st) => st.flops && st.intensity && st.flops_per_second);
    const overall = rf.seconds > 0 ? (100 * rf.bound_seconds) / rf.seconds : null;
    this.el.append(h("h4", {}, `roofline on ${rf.target}: ${rf.steps.length} timed steps take ${fmtSec(rf.seconds)}; at the bounds ${fmtSec(rf.bound_seconds)} (${pctText(overall)} of bound)`),
      h("div", { class: "jl-muted jl-rf-bounds" }, `${b.device}: copy bandwidth ${fmtRate(b.bandwidth, "B/s")}, peak ${b.flops ? fmtRate(b.flops, "FLOP/s") : "FLOP/s not measured"} (measured: ${b.how})`),
      h("div", { class: "jl-rf-body" }, placed.length ? this.chart(placed) : null,
        h("div", { class: "jl-muted jl-rf-note" }, `${rf.steps.length - placed.length} steps that only move data are in the table, not on the chart. `,
          "Above 100%: the data came from cache, faster than the copy bandwidth.")),
      this.table(rf.steps));
    this.mark(this.ctx.selection);
  }
}

// The Memory view: live bytes over the schedule (peak, lower bound, pool reserve), the
// buffer layout as a Gantt chart, and a dry run for other values of symbolic dims.

import { bufferLabel, chip, empty, fmtBytes, h, opLink, s } from "./core.js";
import { loopsPanel } from "./loops.js";
import { LiveQuery } from "./memquery.js";

const W = 760;
const FIXED = new Set(["weight", "input", "constant"]);     // held from the first step to the last
const PAD = { l: 64, r: 12, t: 14, b: 24 };

function steps(mem) {
  const last = Math.max(0, ...mem.buffers.map((b) => b.last + 1));
  return Math.max(mem.live_bytes.length, last, 1);
}

function axisLabel(x, y, text, anchor = "end") {
  return s("text", { x, y, class: "jl-axis", "text-anchor": anchor }, text);
}

// Live bytes per step with the peak marked; calls onStep when clicked; moveCursor(step) follows the scrubber.
export function timeline(mem, onStep, height = 170) {
  const n = steps(mem);
  const pool = mem.pool || {};
  const top = Math.max(1, mem.peak_bytes, mem.lower_bound_bytes, ...mem.live_bytes, ...Object.values(pool).flat());
  const x = (i) => PAD.l + (i / Math.max(1, n - 1)) * (W - PAD.l - PAD.r);
  const y = (v) => height - PAD.b - (v / top) * (height - PAD.t - PAD.b);
  const svg = s("svg", { class: "jl-chart jl-timeline", viewBox: `0 0 ${W} ${height}`, width: "100%" });
  svg.append(s("line", { x1: PAD.l, x2: W - PAD.r, y1: y(0), y2: y(0), class: "jl-axisline" }));
  svg.append(axisLabel(PAD.l - 4, y(top) + 4, fmtBytes(top)), axisLabel(PAD.l - 4, y(0), "0"));
  svg.append(axisLabel(W - PAD.r, height - 6, `step (${n})`), axisLabel(PAD.l, height - 6, "0", "start"));
  if (mem.live_bytes.length) {
    const pts = mem.live_bytes.map((v, i) => `${x(i)},${y(v)}`);
    svg.append(s("polygon", { class: "jl-live-area", points: `${x(0)},${y(0)} ${pts.join(" ")} ${x(mem.live_bytes.length - 1)},${y(0)}` }));
    svg.append(s("polyline", { class: "jl-live-line", points: pts.join(" ") }));
  }
  const right = [];     // labels at the right edge, spread apart below so none overprint
  for (const [key, series] of Object.entries(pool)) {
    const last = series[series.length - 1] || 0;
    svg.append(s("polyline", { class: `jl-pool jl-pool-${key}`, points: series.map((v, i) => `${x(i)},${y(v)}`).join(" ") }));
    right.push([y(last) - 3, `pool ${key.replace("_", " ")} ${fmtBytes(last)}`]);
  }
  if (mem.lower_bound_bytes) {
    svg.append(s("line", { class: "jl-bound", x1: PAD.l, x2: W - PAD.r, y1: y(mem.lower_bound_bytes), y2: y(mem.lower_bound_bytes) }));
    right.push([y(mem.lower_bound_bytes) + 12, `lower bound ${fmtBytes(mem.lower_bound_bytes)}`]);
  }
  right.sort((a, b) => a[0] - b[0]);
  let floor = PAD.t;
  for (const [ly, text] of right) {
    floor = Math.max(ly, floor);
    svg.append(axisLabel(W - PAD.r, floor, text));
    floor += 12;
  }
  if (mem.peak_step !== null && mem.peak_step !== undefined) {
    const px = x(mem.peak_step);
    const py = y(mem.live_bytes[mem.peak_step]);
    // The peak figure is stated once (the summary's); the curve only marks when it happens.
    svg.append(s("circle", { class: "jl-peak", cx: px, cy: py, r: 4 }),
      axisLabel(px + 6, Math.max(12, py - 4), `peak at step ${mem.peak_step}`, px > W * 0.6 ? "end" : "start"));
  }
  const cursor = s("line", { class: "jl-cursor", x1: x(0), x2: x(0), y1: PAD.t, y2: y(0) });
  svg.append(cursor);
  const stepAt = (evt) => {
    const r = svg.getBoundingClientRect();
    const px = ((evt.clientX - r.left) / r.width) * W;
    return Math.min(n - 1, Math.max(0, Math.round(((px - PAD.l) / (W - PAD.l - PAD.r)) * (n - 1))));
  };
  svg.addEventListener("click", (evt) => { if (onStep) onStep(stepAt(evt)); });
  return {
    el: svg,
    stepAt,
    moveCursor(step) {
      cursor.setAttribute("x1", x(step));
      cursor.setAttribute("x2", x(step));
      svg.dataset.cursor = String(step);
    },
  };
}

// What each buffer holds (memview.category), bottom to top in the chart, with its colour.
export const CATEGORIES = [["weight", "weights", "#aab4bf"], ["input", "inputs", "#8fbce6"], ["activation", "activations", "#f5b971"],
  ["gradient", "gradients", "#c9a0dc"], ["temporary", "temporaries", "#9ad9a8"], ["output", "outputs", "#ecd06a"]];

// Live bytes per step by category, stacked (weights and inputs left out when `apart`), and each
// category's bytes at the peak; built from the buffers in one pass (difference arrays).
export function categoryChart(mem, apart, height = 150) {
  const n = steps(mem);
  const shown = CATEGORIES.filter(([c]) => !apart || (c !== "weight" && c !== "input"));
  const series = new Map(CATEGORIES.map(([c]) => [c, new Float64Array(n + 1)]));
  for (const b of mem.buffers) {
    const d = series.get(b.category);
    if (!d || b.alias_of) continue;
    d[Math.max(0, b.first)] += b.bytes;
    d[Math.min(n, b.last + 1)] -= b.bytes;
  }
  for (const d of series.values()) for (let k = 1; k <= n; k += 1) d[k] += d[k - 1];
  const stacked = [];
  let below = new Float64Array(n);
  for (const [c, label, color] of shown) {
    const above = below.map((v, k) => v + series.get(c)[k]);
    stacked.push([c, label, color, below, above]);
    below = above;
  }
  const top = Math.max(1, ...below);
  const x = (i) => PAD.l + (i / Math.max(1, n - 1)) * (W - PAD.l - PAD.r);
  const y = (v) => height - PAD.b - (v / top) * (height - PAD.t - PAD.b);
  const svg = s("svg", { class: "jl-chart jl-categories", viewBox: `0 0 ${W} ${height}`, width: "100%" });
  svg.append(axisLabel(PAD.l - 4, y(top) + 4, fmtBytes(top)), axisLabel(PAD.l - 4, y(0), "0"), axisLabel(W - PAD.r, height - 6, `step (${n})`));
  for (const [c, label, color, lo, hi] of stacked) {
    if (!hi.some((v, k) => v > lo[k])) continue;
    const up = [...hi].map((v, k) => `${x(k)},${y(v)}`);
    const down = [...lo].map((v, k) => `${x(k)},${y(v)}`).reverse();
    svg.append(s("polygon", { class: `jl-cat jl-cat-${c}`, "data-category": c, points: [...up, ...down].join(" "), fill: color }, s("title", {}, label)));
  }
  const step = mem.peak_step ?? 0;
  const legend = h("div", { class: "jl-catlegend" }, h("span", { class: "jl-muted" }, `live at the peak (step ${step}): `),
    CATEGORIES.map(([c, label, color]) => {
      const bytes = series.get(c)[Math.min(step, n - 1)];
      return bytes ? h("span", { "data-category": c }, chip(color, `${label} ${fmtBytes(bytes)}`)) : null;
    }));
  return h("div", { class: "jl-catchart" }, svg, legend);
}

function lanes(buffers) {
  // Draws buffers without arena offsets (dynamic mode) in the first free lane.
  const ends = [];
  return buffers.map((b) => {
    let lane = ends.findIndex((end) => end < b.first);
    if (lane < 0) { lane = ends.length; ends.push(0); }
    ends[lane] = b.last;
    return lane;
  });
}

export function gantt(ctx, mem, height = 260) {
  const n = steps(mem);
  const all = mem.buffers.filter((b) => b.kind !== "view" && !b.alias_of);
  // Weights and inputs live throughout: in a pool drawing each takes a lane for the whole run and hides the rest.
  const owners = mem.mode !== "static" ? all.filter((b) => !FIXED.has(b.kind)) : all;
  // A static plan draws its arena at the offsets it chose; inputs, outputs and the temporaries
  // lodged in an output's bytes are outside the arena.
  const inArena = (b) => b.offset !== null && b.offset !== undefined && (!b.region || b.region === "arena");
  const dynamic = mem.mode !== "static" || !owners.some(inArena);
  const placed = dynamic ? owners : owners.filter(inArena);
  const lane = dynamic ? lanes(placed) : null;
  const top = dynamic ? Math.max(1, ...lane) + 1 : Math.max(1, ...placed.map((b) => b.offset + b.bytes));
  const x = (i) => PAD.l + (i / n) * (W - PAD.l - PAD.r);
  const y = (v) => height - PAD.b - (v / top) * (height - PAD.t - PAD.b);
  const svg = s("svg", { class: "jl-chart jl-gantt", viewBox: `0 0 ${W} ${height}`, width: "100%" });
  svg.append(axisLabel(PAD.l - 4, y(top) + 4, dynamic ? `${top} lanes` : fmtBytes(top)), axisLabel(PAD.l - 4, y(0), "0"),
    axisLabel(W - PAD.r, height - 6, dynamic ? `step · one lane per live buffer (pool, no fixed offsets; ${all.length - owners.length} weights and inputs not drawn)`
      : `step · y = arena offset (${owners.length - placed.length} buffers outside the arena not drawn)`));
  placed.forEach((b, i) => {
    const lo = dynamic ? lane[i] : b.offset;
    const hi = dynamic ? lane[i] + 0.9 : b.offset + b.bytes;
    const color = ctx.data.colors[String(b.group)] || "var(--jl-neutral)";
    const rect = s("rect", { class: b.role === "activation" ? "jl-buffer jl-activation" : "jl-buffer", "data-buffer": b.name, "data-uid": b.producer ?? "",
      x: x(b.first), width: Math.max(1.5, x(b.last + 1) - x(b.first)), y: y(hi), height: Math.max(1.5, y(lo) - y(hi)), fill: color },
      s("title", {}, `${bufferLabel(ctx.data, b)}: ${fmtBytes(b.bytes)} at ${b.offset ?? "pool"}, steps ${b.first}–${b.last}, ${b.category || b.kind}${b.role === "activation" ? " · activation kept for the backward pass" : ""}${b.producer_name ? `, from ${b.producer_name}` : ""}`));
    rect.addEventListener("click", () => ctx.select({ kind: "buffer", id: b.name, uids: b.producer === null ? [] : [b.producer], label: `buffer ${b.name}`, source: "memory" }));
    svg.append(rect);
  });
  const cursor = s("line", { class: "jl-cursor", x1: x(0), x2: x(0), y1: PAD.t, y2: y(0) });
  svg.append(cursor);
  const highlight = (sel) => {
    const uids = new Set(sel && sel.uids ? sel.uids : []);
    svg.querySelectorAll(".jl-buffer").forEach((r) => r.classList.toggle("selected",
      (sel && sel.kind === "buffer" && r.dataset.buffer === sel.id) || uids.has(Number(r.dataset.uid))));
  };
  return { el: svg, highlight, moveCursor(step) { cursor.setAttribute("x1", x(step + 0.5)); cursor.setAttribute("x2", x(step + 0.5)); } };
}

export class MemoryView {
  constructor(ctx) {
    this.ctx = ctx;
    this.mem = ctx.data.memory;
    this.dry = null;
    this.charts = h("div", { class: "jl-memcharts" });
    this.el = h("div", { class: "jl-memory" });
    ctx.on("step", (step) => this.moveCursor(step));
    ctx.on("select", (sel) => this.gantt && this.gantt.highlight(sel));
    ctx.on("msg", (msg) => this.onReply(msg));
  }

  // `view`: what the page knows of a plan beyond the data's shape (planned for another size, its largest buffers, inputs' bytes).
  summary(mem, view) {
    const item = (label, value) => h("div", { class: "jl-stat" }, h("div", { class: "jl-muted" }, label), h("b", {}, value));
    return h("div", { class: "jl-stats" },
      item(view.planned ? "peak (planned; nothing ran)" : "peak", fmtBytes(mem.peak_bytes)),
      typeof mem.overhead_bytes === "number" ? item("of it, pool or arena overhead", fmtBytes(mem.overhead_bytes)) : null,
      item("lower bound (largest live set)", fmtBytes(mem.lower_bound_bytes)),
      item("naive (every buffer apart)", fmtBytes(mem.naive_bytes)),
      mem.activation_bytes ? item("activations (forward → backward, outlined)", fmtBytes(mem.activation_bytes)) : null,
      (mem.donated || []).length ? item("written into donated inputs (not allocated)",
        `${mem.donated.length} outputs · ${fmtBytes(mem.donated.reduce((t, d) => t + d.bytes, 0))}`) : null, item("mode", mem.mode + (mem.heuristic ? ` · ${mem.heuristic}` : "")),
      Object.keys(mem.heuristics || {}).length ? item("heuristics", Object.entries(mem.heuristics).map(([k, v]) => `${k} ${fmtBytes(v)}`).join(" · ")) : null);
  }

  // What is live at the peak: activations and temporaries by name, largest first; weights and inputs summed apart.
  atPeak(mem, view) {
    const step = mem.peak_step;
    if (step === null || step === undefined) return null;
    const live = mem.buffers.filter((b) => b.first <= step && step <= b.last && b.kind !== "view" && !b.alias_of);
    const fixed = live.filter((b) => FIXED.has(b.kind));
    const moving = live.filter((b) => !FIXED.has(b.kind)).sort((a, b) => b.bytes - a.bytes);
    const row = (b) => h("li", {},
      chip(this.ctx.data.colors[String(b.group)] || "var(--jl-neutral)", `${bufferLabel(this.ctx.data, b)} · ${fmtBytes(b.bytes)}`), " ",
      b.producer !== null ? opLink(this.ctx, b.producer) : null);
    if (view.largest) {      // a plan for another size lists only its largest buffers live at the peak, with their bytes at that size
      const [held, others] = [view.largest.filter((b) => FIXED.has(b.kind)), view.largest.filter((b) => !FIXED.has(b.kind))];
      return h("div", {}, h("h4", {}, `largest buffers live at the peak (step ${step}, planned)`),
        held.length ? h("div", { class: "jl-muted jl-fixed" }, `among them held for the whole run (${[...new Set(held.map((b) => b.kind))].join(", ")}): ` +
          `${held.length}, ${fmtBytes(held.reduce((a, b) => a + b.bytes, 0))}`) : null,
        h("ul", { class: "jl-peaklist" }, others.map(row)));
    }
    const rows = moving.slice(0, 10).map(row);
    const total = (bs) => fmtBytes(bs.reduce((a, b) => a + b.bytes, 0));
    const rest = moving.length > 10 ? h("li", { class: "jl-muted" }, `and ${moving.length - 10} smaller: ${total(moving.slice(10))}`) : null;
    const kinds = [...new Set(fixed.map((b) => b.kind))].join(", ");
    return h("div", {}, h("h4", {}, `live at the peak (step ${step})`),
      fixed.length ? h("div", { class: "jl-muted jl-fixed" }, `${kinds}: ${fixed.length} buffers, ${total(fixed)} (held for the whole run)`) : null,
      h("div", {}, `${moving.some((b) => b.category === "gradient") ? "activations, gradients" : "activations"} and temporaries: ${moving.length} buffers, ${total(moving)}`),
      h("ul", { class: "jl-peaklist" }, rows, rest));
  }

  // Plans for other sizes made at compile time: the slider works in a saved page too.
  planSlider(dr) {
    const plans = dr.plans;
    const start = Math.max(0, plans.findIndex((p) => p.scale === 1));
    const label = h("b", {});
    const status = h("span", { class: "jl-muted" });
    const show = (k, redraw) => {
      const plan = plans[k];
      label.textContent = Object.entries(plan.values || {}).map(([n, v]) => `${n} = ${v}`).join(", ");
      // The peak is stated once, in the summary below, which shows the plan picked here.
      status.textContent = plan.scale === 1 ? " the compiled size" : " planned for this size; nothing ran";
      this.el.dataset.plan = String(k);
      if (redraw) this.drawCharts(...this.planMemory(plan));
    };
    const input = h("input", { type: "range", min: 0, max: plans.length - 1, value: start, class: "jl-planslider",
      oninput: (e) => show(Number(e.target.value), true) });
    show(start, false);
    return h("div", { class: "jl-dryrun" }, h("b", {}, "dry run "), h("label", { class: "jl-dim" }, label, input), status);
  }

  planMemory(plan) {
    const byName = new Map(this.mem.buffers.map((b) => [b.name, b]));
    const largest = (plan.live_at_peak || []).map((name, k) => ({ ...(byName.get(name) || { name, kind: "buffer", producer: null }), bytes: plan.live_at_peak_bytes[k] }));
    // The compiled plan's buffers (same order, same steps) with their bytes at this size, for the by-category chart.
    const buffers = plan.buffer_bytes ? this.mem.buffers.filter((b) => b.name in plan.buffer_bytes).map((b) => ({ ...b, bytes: plan.buffer_bytes[b.name] }))
      : this.mem.buffers;
    const mem = { ...this.mem, buffers, peak_bytes: plan.peak_bytes, peak_step: plan.peak_step, lower_bound_bytes: plan.lower_bound_bytes,
      naive_bytes: plan.naive_bytes, overhead_bytes: plan.overhead_bytes, live_bytes: plan.live_bytes || [], pool: {},
      live_at_peak: plan.live_at_peak || [] };
    return [mem, { planned: plan.scale !== 1, largest: plan.scale !== 1 ? largest : null, inputBytes: plan.input_bytes || {} }];
  }

  dryRun() {
    const dr = this.ctx.data.dry_run;
    if (dr && (dr.plans || []).length) return this.planSlider(dr);
    if (dr && dr.error && this.ctx.isStatic) return h("div", { class: "jl-muted" }, `dry run: ${dr.error}`);
    const dims = this.ctx.data.dry_run_dims || {};
    const names = Object.keys(dims);
    if (!names.length) return h("div", { class: "jl-muted" }, "dry run: no symbolic dims (trace with jl.spec or dynamic= to explore other shapes)");
    if (this.ctx.isStatic) return h("div", { class: "jl-muted" }, "dry run: needs a running kernel (not available in a saved page)");
    this.values = Object.fromEntries(names.map((n) => [n, dims[n][1]]));
    this.dryStatus = h("span", { class: "jl-muted" });
    let timer = null;
    const sliders = names.map((n) => {
      const label = h("b", {}, `${n} = ${dims[n][1]}`);
      const input = h("input", { type: "range", min: dims[n][0], max: dims[n][2], value: dims[n][1], "data-dim": n,
        oninput: (e) => {
          this.values[n] = Number(e.target.value);
          label.textContent = `${n} = ${e.target.value}`;
          clearTimeout(timer);
          timer = setTimeout(() => { this.dryStatus.textContent = " planning…"; this.ctx.request({ type: "dry_run", values: { ...this.values } }); }, 200);
        } });
      return h("label", { class: "jl-dim" }, label, input);
    });
    return h("div", { class: "jl-dryrun" }, h("b", {}, "dry run "), sliders, this.dryStatus);
  }

  onReply(msg) {
    if (msg.type !== "dry_run") return;
    if (msg.error) { this.dryStatus.textContent = ` ${msg.error}`; return; }
    this.dryStatus.textContent = ` plan for ${Object.entries(msg.values).map(([k, v]) => `${k}=${v}`).join(", ")} below (nothing ran)`;
    this.drawCharts(msg.memory, { planned: true });
  }

  // The live curve without what is held for the whole run (weights, inputs): on a real model that is most
  // of the bytes, and the activations would be a flat strip on top of it.
  movingOnly(mem, view) {
    const n = mem.live_bytes.length;
    const fixed = new Array(n).fill(0);
    for (const b of mem.buffers) {
      if (!FIXED.has(b.kind) || b.alias_of || b.kind === "view") continue;
      // A plan for another size: weights keep their bytes, inputs have that size's.
      const bytes = (view.inputBytes || {})[b.name] ?? b.bytes;
      for (let k = Math.max(0, b.first); k <= Math.min(n - 1, b.last); k += 1) fixed[k] += bytes;
    }
    const live = mem.live_bytes.map((v, k) => Math.max(0, v - fixed[k]));
    const top = Math.max(0, ...live, ...Object.values(mem.pool || {}).flat());
    return { mem: { ...mem, live_bytes: live, peak_bytes: top, lower_bound_bytes: null }, held: Math.max(0, ...fixed) };
  }

  drawCharts(mem, view = {}) {
    const apart = this.movingOnly(mem, view);
    const split = apart.held > 0;
    if (this.apart === undefined) this.apart = apart.held > 0.5 * Math.max(1, ...mem.live_bytes);
    const shown = split && this.apart ? apart.mem : mem;
    this.timeline = timeline(shown, (step) => this.ctx.setStep(step, "memory"));
    this.gantt = gantt(this.ctx, mem);
    this.query = view.planned ? null : new LiveQuery(this.ctx, mem);
    this.query?.attach(this.timeline);
    const toggle = split ? h("label", { class: "jl-filter jl-apart" },
      h("input", { type: "checkbox", checked: this.apart, onchange: (e) => { this.apart = e.target.checked; this.drawCharts(mem, view); } }),
      `activations and temporaries only (weights and inputs: ${fmtBytes(apart.held)}, held throughout)`) : null;
    // By category at every size: a plan for another size carries each buffer's bytes at that size.
    const byCategory = (!view.planned || mem.buffers !== this.mem.buffers) && mem.buffers.some((b) => b.category)
      ? [h("h4", {}, "live memory by category"), categoryChart(mem, split && this.apart)] : [];
    this.charts.replaceChildren(this.summary(mem, view), h("h4", {}, "live memory per step"), toggle, this.timeline.el, this.query?.el,
      ...byCategory, this.atPeak(mem, view), ...[loopsPanel(this.ctx)].filter(Boolean), h("h4", {}, "buffer layout"), this.gantt.el);
    this.gantt.highlight(this.ctx.selection);
    this.moveCursor(this.ctx.step);
  }

  moveCursor(step) {
    this.query?.show(step);
    if (this.timeline) this.timeline.moveCursor(step);
    if (this.gantt) this.gantt.moveCursor(step);
  }

  mount(parent) {
    parent.append(this.el);
    if (!this.mem) {
      this.el.append(empty("No memory plan recorded: memory planning runs at O1 and O2 (this is an O0 compilation or a plain program)."));
      return;
    }
    this.el.append(this.dryRun(), this.charts);
    this.drawCharts(this.mem);
  }
}

// The Schedule view: the execution order numbered on the graph, a scrubber that lights
// up the buffers live at each step and moves the memory cursor, and the orders compared.

import { bufferLabel, callTimeText, empty, fmtBytes, fmtSec, h, opLink, opName, plural, s } from "./core.js";
import { GraphView } from "./graph.js";
import { loopOf, loopSteps } from "./loops.js";
import { timeline } from "./memory.js";

const HELD = ["weight", "input"];     // categories held from the first step to the last

// A step by what it runs: "group 3 · res2_0/branch2a" for a group's launch, else the op.
export function stepName(data, uid) {
  const op = data.ops[String(uid)];
  if (loopOf(data, uid)) return `${opName(data, uid)} · ${loopOf(data, uid).label}`;
  if (!op || op.name !== "jit.group") return opName(data, uid);
  const scope = String(op.path || "").split("/").filter((p) => p && !/^group \d+$/.test(p)).join("/");
  return `group ${op.group}${scope ? ` · ${scope}` : ""}`;
}

function stepLink(ctx, uid) {
  const link = opLink(ctx, uid);
  link.textContent = stepName(ctx.data, uid);
  return link;
}

// The buffers live at a step, largest first, each with the op, scope and line that made it; weights,
// inputs and constants (held throughout) summed on one line.
function liveList(ctx, buffers, step) {
  const fixed = buffers.filter((b) => HELD.includes(b.category));
  const moving = buffers.filter((b) => !fixed.includes(b)).sort((a, b) => b.bytes - a.bytes);
  const sum = (list) => fmtBytes(list.reduce((a, b) => a + b.bytes, 0));
  const row = (b) => h("li", { "data-name": b.name }, `${bufferLabel(ctx.data, b)} · ${fmtBytes(b.bytes)} · ${b.category || b.kind}, steps ${b.first}–${b.last}`);
  return h("div", {}, h("h4", {}, `live at step ${step}: ${plural(moving.length, "buffer")}, ${sum(moving)}`),
    h("ul", { class: "jl-peaklist" }, moving.slice(0, 40).map(row),
      moving.length > 40 ? h("li", { class: "jl-muted" }, `… ${moving.length - 40} more`) : null),
    fixed.length ? h("div", { class: "jl-muted jl-fixedlive" }, `weights and inputs (held throughout): ${plural(fixed.length, "buffer")}, ${sum(fixed)}`) : null);
}

export class ScheduleView {
  constructor(ctx) {
    this.ctx = ctx;
    this.sched = ctx.data.schedule;
    this.mem = ctx.data.memory;
    this.el = h("div", { class: "jl-schedule" });
    this.timer = null;
    ctx.on("step", (step, source) => { if (source !== "schedule") this.show(step); });
  }

  liveBuffers(step) {
    if (!this.mem) return [];
    return this.mem.buffers.filter((b) => b.first <= step && step <= b.last && b.producer !== null && !b.alias_of);
  }

  liveAt(step) {
    return this.liveBuffers(step).map((b) => b.producer);
  }

  show(step) {
    const order = this.sched.order;
    step = Math.max(0, Math.min(order.length - 1, step));
    this.slider.value = String(step);
    const uid = order[step];
    const buffers = this.liveBuffers(step);
    const bytes = this.mem && this.mem.live_bytes.length ? ` · live ${fmtBytes(this.mem.live_bytes[step])}` : "";
    const held = buffers.filter((b) => HELD.includes(b.category)).length;
    this.label.replaceChildren(`step ${step} / ${order.length - 1}: `, stepLink(this.ctx, uid),
      ` · ${plural(buffers.length - held, "live buffer")}${held ? ` (and ${held} weights and inputs)` : ""}${bytes}`);
    this.liveEl.replaceChildren(...[loopSteps(this.ctx, uid), liveList(this.ctx, buffers, step)].filter(Boolean));
    this.graph.setLive(buffers.map((b) => b.producer), uid);
    if (this.chart) this.chart.moveCursor(step);
    this.el.dataset.step = String(step);
  }

  scrub(step) {
    this.show(step);
    this.ctx.setStep(Number(this.slider.value), "schedule");
  }

  play() {
    if (this.timer) { clearInterval(this.timer); this.timer = null; this.playButton.textContent = "▶ play"; return; }
    this.playButton.textContent = "❚❚ pause";
    this.timer = setInterval(() => {
      const next = Number(this.slider.value) + 1;
      if (next >= this.sched.order.length) { this.play(); return; }
      this.scrub(next);
    }, 120);
  }

  // Each order's largest live set (tensors only: the plan's peak, in the Memory view, adds the pool's
  // overhead), and the orders' steps with weights and constants (held from the start) left out of the rows.
  orders() {
    const entries = Object.entries(this.sched.peaks || {});
    if (!entries.length) return null;
    const top = Math.max(...entries.map(([, v]) => v));
    const rows = entries.map(([name, peak]) => h("tr", { class: name === this.sched.strategy ? "jl-current" : "" },
      h("td", {}, name, name === this.sched.strategy ? " (used)" : ""), h("td", { class: "jl-num" }, fmtBytes(peak)),
      h("td", {}, h("div", { class: "jl-bar", style: `width:${(100 * peak) / top}%` }))));
    const held = (u) => /^np\.(weight|constant)$/.test(this.ctx.data.ops[String(u)]?.name || "");
    const columns = Object.entries(this.sched.orders || {}).map(([name, order]) => {
      const steps = order.map((u, k) => [u, k]).filter(([u]) => !held(u));
      return h("div", { class: "jl-ordercol" }, h("b", {}, `${name} · largest live set ${fmtBytes(this.sched.peaks[name])}`),
        h("div", { class: "jl-muted" }, `${plural(order.length - steps.length, "weight or constant", "weights and constants")} not listed`),
        h("ol", {}, steps.slice(0, 300).map(([u, k]) => h("li", { value: k }, stepLink(this.ctx, u)))));
    });
    const peak = this.mem ? ` · the plan's peak (tensors and pool overhead, the Memory view's one figure): ${fmtBytes(this.mem.peak_bytes)}` : "";
    return h("div", {}, h("h4", {}, "orders compared: largest live set of each"), h("div", { class: "jl-muted jl-peaknote" }, `largest live set: tensors live at once, no pool overhead${peak}`),
      h("table", { class: "jl-table jl-peaks" }, h("tbody", {}, rows)), columns.length ? h("div", { class: "jl-ordercols" }, columns) : null);
  }

  // Measured kernels on a time axis, one lane per stream, when the compilation was profiled.
  timeline() {
    const steps = ((this.ctx.data.profile || {}).steps || []).filter((st) => typeof st.median === "number");
    if (!steps.length) return null;
    const W = 760;
    const lanes = Math.max(1, ...steps.map((st) => (st.stream || 0) + 1));
    const lane = 18;
    const starts = steps.map((st, k) => (typeof st.start === "number" ? st.start : steps.slice(0, k).reduce((a, x) => a + x.median, 0)));
    const end = Math.max(...steps.map((st, k) => starts[k] + st.median)) || 1;
    const x = (t) => 40 + (t / end) * (W - 50);
    const svg = s("svg", { class: "jl-chart jl-kerneltime", viewBox: `0 0 ${W} ${lanes * lane + 22}`, width: "100%" });
    for (let k = 0; k < lanes; k += 1) svg.append(s("text", { x: 2, y: k * lane + 13, class: "jl-axis" }, `s${k}`));
    steps.forEach((st, k) => {
      const color = this.ctx.data.colors[String(st.group)] || "var(--jl-neutral)";
      const rect = s("rect", { class: "jl-kstep", x: x(starts[k]), width: Math.max(1, x(starts[k] + st.median) - x(starts[k])),
        y: (st.stream || 0) * lane + 2, height: lane - 4, fill: color, "data-uid": st.uid },
      s("title", {}, `${stepName(this.ctx.data, st.uid)}${st.kernel ? ` · kernel ${st.kernel}` : ""}: ${fmtSec(st.median)}` +
        `${typeof st.spread === "number" ? ` ± ${fmtSec(st.spread)}` : ""}`));
      rect.addEventListener("click", () => this.ctx.select({ kind: "op", uids: [st.uid], label: stepName(this.ctx.data, st.uid), source: "schedule" }));
      svg.append(rect);
    });
    svg.append(s("text", { x: W - 4, y: lanes * lane + 16, class: "jl-axis", "text-anchor": "end" }, `${fmtSec(end)}: the steps' span`));
    return h("div", {}, h("h4", {}, `measured kernels: ${plural(steps.length, "step")}`),
      h("div", { class: "jl-calltime" }, callTimeText(this.ctx.data)), svg);
  }

  streams() {
    const st = this.ctx.data.streams;
    if (!st || !st.lanes.length) return null;
    const lanes = st.lanes.map((uids, k) => h("div", { class: "jl-ordercol" }, h("b", {}, `stream ${k} · ${uids.length} ops`),
      h("ol", { start: 0 }, uids.map((u) => h("li", {}, opLink(this.ctx, u))))));
    const events = st.events.map((e) => h("li", {}, opLink(this.ctx, e.consumer), ` (stream ${e.to}) waits for `,
      opLink(this.ctx, e.producer), ` (stream ${e.from})`));
    return h("div", { class: "jl-streams" }, h("h4", {}, `streams: ${st.lanes.length}, events: ${st.events.length}`),
      h("div", { class: "jl-ordercols" }, lanes), events.length ? h("ul", {}, events) : null);
  }

  mount(parent) {
    parent.append(this.el);
    const streams = this.streams();
    if (!this.sched || !this.sched.order.length) {
      this.el.append(empty("No schedule recorded: scheduling runs at O1 and O2 (this is an O0 compilation or a plain program)."));
      if (streams) this.el.append(streams);
      return;
    }
    const n = this.sched.order.length;
    this.slider = h("input", { type: "range", min: 0, max: n - 1, value: 0, class: "jl-scrubber", oninput: (e) => this.scrub(Number(e.target.value)) });
    this.playButton = h("button", { class: "jl-btn", onclick: () => this.play() }, "▶ play");
    this.label = h("span", { class: "jl-steplabel" });
    this.liveEl = h("div", { class: "jl-livelist" });
    this.graph = new GraphView(this.ctx, { schedule: true, stepOf: this.sched.step_of });
    this.chart = this.mem ? timeline(this.mem, (step) => this.scrub(step), 120) : null;
    this.el.append(h("div", { class: "jl-toolbar" }, this.playButton, this.slider, this.label),
      h("div", { class: "jl-muted" }, `order: ${this.sched.strategy} · ${n} steps · first step ${stepName(this.ctx.data, this.sched.order[0])}`),
      this.chart ? this.chart.el : h("div", { class: "jl-muted" }, "no memory plan recorded: the scrubber shows the order only"), this.liveEl);
    const measured = this.timeline();
    if (measured) this.el.append(measured);
    this.graph.mount(this.el);
    const extra = this.orders();
    if (extra) this.el.append(extra);
    if (streams) this.el.append(streams);
    this.show(this.ctx.step || 0);
  }
}

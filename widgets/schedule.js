// The Schedule view: the execution order numbered on the graph, a scrubber that lights
// up the buffers live at each step and moves the memory cursor, and the orders compared.

import { empty, fmtBytes, fmtSec, h, opLink, opName, s } from "./core.js";
import { GraphView } from "./graph.js";
import { timeline } from "./memory.js";

export class ScheduleView {
  constructor(ctx) {
    this.ctx = ctx;
    this.sched = ctx.data.schedule;
    this.mem = ctx.data.memory;
    this.el = h("div", { class: "jl-schedule" });
    this.timer = null;
    ctx.on("step", (step, source) => { if (source !== "schedule") this.show(step); });
  }

  liveAt(step) {
    if (!this.mem) return [];
    return this.mem.buffers.filter((b) => b.first <= step && step <= b.last && b.producer !== null).map((b) => b.producer);
  }

  show(step) {
    const order = this.sched.order;
    step = Math.max(0, Math.min(order.length - 1, step));
    this.slider.value = String(step);
    const uid = order[step];
    const live = this.liveAt(step);
    const bytes = this.mem && this.mem.live_bytes.length ? ` · live ${fmtBytes(this.mem.live_bytes[step])}` : "";
    this.label.replaceChildren(`step ${step} / ${order.length - 1}: `, opLink(this.ctx, uid), ` · ${live.length} live buffers${bytes}`);
    this.graph.setLive(live, uid);
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

  orders() {
    const entries = Object.entries(this.sched.peaks || {});
    if (!entries.length) return null;
    const top = Math.max(...entries.map(([, v]) => v));
    const rows = entries.map(([name, peak]) => h("tr", { class: name === this.sched.strategy ? "jl-current" : "" },
      h("td", {}, name, name === this.sched.strategy ? " (used)" : ""), h("td", { class: "jl-num" }, fmtBytes(peak)),
      h("td", {}, h("div", { class: "jl-bar", style: `width:${(100 * peak) / top}%` }))));
    const orders = Object.entries(this.sched.orders || {});
    const columns = orders.map(([name, order]) => h("div", { class: "jl-ordercol" }, h("b", {}, `${name} · peak ${fmtBytes(this.sched.peaks[name])}`),
      h("ol", { start: 0 }, order.slice(0, 300).map((u) => h("li", {}, opLink(this.ctx, u))))));
    return h("div", {}, h("h4", {}, "orders compared"), h("table", { class: "jl-table jl-peaks" }, h("tbody", {}, rows)),
      columns.length ? h("div", { class: "jl-ordercols" }, columns) : null);
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
      s("title", {}, `${st.kernel || st.name}${st.group !== null && st.group !== undefined ? ` · group ${st.group}` : ""}: ${fmtSec(st.median)}` +
        `${typeof st.spread === "number" ? ` ± ${fmtSec(st.spread)}` : ""}`));
      rect.addEventListener("click", () => this.ctx.select({ kind: "op", uids: [st.uid], label: opName(this.ctx.data, st.uid), source: "schedule" }));
      svg.append(rect);
    });
    svg.append(s("text", { x: W - 4, y: lanes * lane + 16, class: "jl-axis", "text-anchor": "end" }, `${fmtSec(end)} per call (measured)`));
    return h("div", {}, h("h4", {}, `measured kernels: ${steps.length} steps`), svg);
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
    this.graph = new GraphView(this.ctx, { schedule: true, stepOf: this.sched.step_of });
    this.chart = this.mem ? timeline(this.mem, (step) => this.scrub(step), 120) : null;
    this.el.append(h("div", { class: "jl-toolbar" }, this.playButton, this.slider, this.label),
      h("div", { class: "jl-muted" }, `order: ${this.sched.strategy} · ${n} steps · first op ${opName(this.ctx.data, this.sched.order[0])}`),
      this.chart ? this.chart.el : h("div", { class: "jl-muted" }, "no memory plan recorded: the scrubber shows the order only"));
    const measured = this.timeline();
    if (measured) this.el.append(measured);
    this.graph.mount(this.el);
    const extra = this.orders();
    if (extra) this.el.append(extra);
    if (streams) this.el.append(streams);
    this.show(this.ctx.step || 0);
  }
}

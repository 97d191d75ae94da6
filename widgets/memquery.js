// Asking the live-memory curve: hovering a step lists the buffers live there by category, each
// with the op that made it, its scope and its source line; a click pins that step (the shared
// step, which the Schedule view follows too).

import { bufferLabel, chip, fmtBytes, h } from "./core.js";

const CATEGORY_NAMES = { weight: "weights", input: "inputs", activation: "activations", gradient: "gradients",
  temporary: "temporaries", output: "outputs" };
const PER_CATEGORY = 12;

export class LiveQuery {
  constructor(ctx, mem) {
    this.ctx = ctx;
    this.mem = mem;
    this.pinned = ctx.step || 0;
    this.el = h("div", { class: "jl-livequery" });
  }

  // The buffers live at `step` (views and aliases hold no bytes of their own), by category, largest first.
  liveAt(step) {
    const byCategory = new Map(Object.keys(CATEGORY_NAMES).map((c) => [c, []]));
    for (const b of this.mem.buffers) {
      if (b.first > step || step > b.last || b.kind === "view" || b.alias_of) continue;
      const list = byCategory.get(b.category) || byCategory.set(b.category, []).get(b.category);
      list.push(b);
    }
    for (const list of byCategory.values()) list.sort((a, b) => b.bytes - a.bytes);
    return [...byCategory].filter(([, list]) => list.length);
  }

  // A buffer: its value, scope, the op that made it and that op's source line or ONNX node (bufferLabel), and a
  // link selecting that op (its group's ops for a group's result) in every view.
  item(b) {
    const op = b.producer !== null && b.producer !== undefined ? this.ctx.data.ops[String(b.producer)] : null;
    const g = op && op.name === "jit.group" ? (this.ctx.data.groups || []).find((x) => x.id === op.group) : null;
    const select = (e) => {
      e.preventDefault();
      this.ctx.select(g ? { kind: "group", id: g.id, uids: g.ops, label: `group ${g.id}`, source: "memory" }
        : { kind: "op", uids: [b.producer], label: bufferLabel(this.ctx.data, b), source: "memory" });
    };
    return h("li", { "data-buffer": b.name },
      chip(this.ctx.data.colors[String(b.group)] || "var(--jl-neutral)", `${bufferLabel(this.ctx.data, b)} · ${fmtBytes(b.bytes)}`), " ",
      op ? h("a", { href: "#", class: "jl-lq-select", onclick: select }, "select") : h("span", { class: "jl-muted" }, b.kind));
  }

  // `how`: "hover" while the pointer is over the curve, "pinned" for the clicked (shared) step.
  show(step, how = "pinned") {
    if (how === "pinned") this.pinned = step;
    const groups = this.liveAt(step);
    const total = groups.reduce((a, [, list]) => a + list.reduce((t, b) => t + b.bytes, 0), 0);
    this.el.dataset.step = step;
    this.el.dataset.how = how;
    this.el.replaceChildren(h("h4", {}, `live at step ${step}: ${fmtBytes(total)} in ${groups.reduce((a, [, l]) => a + l.length, 0)} buffers`,
      h("span", { class: "jl-muted" }, how === "hover" ? " (pointer; click the curve to pin a step)" : " (pinned; hover the curve to look elsewhere)")),
    ...groups.map(([c, list]) => h("details", { class: "jl-lq-cat", "data-category": c, open: c !== "weight" && c !== "input" },
      h("summary", {}, `${CATEGORY_NAMES[c] || c}: ${list.length} · ${fmtBytes(list.reduce((t, b) => t + b.bytes, 0))}`),
      h("ul", {}, list.slice(0, PER_CATEGORY).map((b) => this.item(b)),
        list.length > PER_CATEGORY ? h("li", { class: "jl-muted" }, `and ${list.length - PER_CATEGORY} smaller: ${fmtBytes(list.slice(PER_CATEGORY).reduce((t, b) => t + b.bytes, 0))}`) : null))));
  }

  // Follows the pointer over `chart` (a timeline: its stepAt maps an event to a step).
  attach(chart) {
    chart.el.addEventListener("mousemove", (evt) => this.show(chart.stepAt(evt), "hover"));
    chart.el.addEventListener("mouseleave", () => this.show(this.pinned));
    this.show(this.pinned);
  }
}

// The Graph view's colour overlays, mixed into GraphView: group, backend, dtype, bytes written,
// measured time (each group's steps) and what a pass did; each with a short legend, never one entry
// per group, and recoloured in place without a new layout.

import { callTimeText, chip, fmtBytes, fmtSec, h, plural, typeBytes } from "./core.js";
import { boundColor, boundLegend, boundOfLeaves } from "./roofline.js";

const CHANGE = { added: "var(--jl-add)", removed: "var(--jl-del)", changed: "var(--jl-chg)" };
// Categorical colours for the overlays that are not groups.
const CATS = ["#8cb4e8", "#f2a86f", "#8fd18f", "#e88f8f", "#c3a5e0", "#d9d96a", "#7fd4d9", "#f0a8d8"];

function scaleColor(t) {
  const c = (a, b) => Math.round(a + (b - a) * t);
  return `rgb(${c(255, 215)},${c(245, 48)},${c(200, 39)})`;     // pale yellow to red
}

export const overlayMethods = {
  // Measured seconds per call of every timed group, shared kernel or not (groups[i].seconds).
  groupTimes() {
    return new Map((this.data.groups || []).filter((g) => typeof g.seconds === "number").map((g) => [g.id, g.seconds]));
  },

  scaled() {
    return this.overlay === "bytes" || this.overlay === "time";
  },

  // The overlay's value for a set of leaves (a part: the sum of its groups' and ops'), and the colour it maps to.
  valueOf(leaves, part = null) {
    if (part && part.kind !== "group" && this.scaled()) {
      let sum = null;
      for (const c of part.children) {
        // a view's step takes time too: the data's per-scope sums (the tooltips') count it
        const v = c.children ? this.valueOf(this.leavesOf(c), c) : c.op && (!c.book || this.overlay === "time") ? this.valueOf([c]) : null;
        if (typeof v === "number") sum = (sum || 0) + v;
      }
      return sum;
    }
    if (part && part.kind !== "group" && (this.overlay === "backend" || this.overlay === "dtype")) return this.majority(leaves);
    const ops = leaves.map((l) => l.op).filter(Boolean);
    const group = leaves[0].group;
    switch (this.overlay) {
      case "backend": {
        const g = this.data.groups.find((x) => x.id === group);
        return g ? g.backend || "fused" : ops.length ? "host (numpy)" : null;
      }
      case "dtype": {
        const t = ops.length && ops[ops.length - 1].types[0];
        return t ? String(t).split("[")[0] : null;
      }
      case "bytes": {
        const bind = (this.data.memory || {}).bindings || {};
        const inner = new Set(ops.flatMap((o) => o.operands));
        const outs = group !== null && group !== undefined && leaves.length > 1
          ? ops.filter((o) => o.results.some((r) => !inner.has(r)) || o === ops[ops.length - 1]) : ops;
        const sizes = outs.flatMap((o) => o.types.map((t) => typeBytes(t, bind))).filter((x) => x !== null);
        return sizes.length ? sizes.reduce((a, b) => a + b, 0) : null;
      }
      case "time": {       // a group's steps (the data's sum), else the op's own step
        if (group !== null && group !== undefined) return (this.times || (this.times = this.groupTimes())).get(group) ?? null;
        const measured = ops.map((o) => o.seconds).filter((x) => typeof x === "number");
        return measured.length ? measured.reduce((a, b) => a + b, 0) : null;
      }
      case "bound":
        return boundOfLeaves(this.data, leaves);
      case "change": {        // what a pass did to these ops: one kind, or "changed" for a mix
        const kinds = new Set(leaves.flatMap((l) => l.classes.filter((c) => c in CHANGE)));
        return kinds.size ? (kinds.size === 1 ? [...kinds][0] : "changed") : null;
      }
      default:
        return group;
    }
  },

  // A collapsed scope or part under a categorical overlay: the value most of its ops have.
  majority(leaves) {
    const count = new Map();
    for (const l of leaves) {
      if (!l.op || l.book) continue;
      const v = this.valueOf([l]);
      if (v !== null && v !== undefined) count.set(v, (count.get(v) || 0) + 1);
    }
    return count.size ? [...count].sort((a, b) => b[1] - a[1])[0][0] : null;
  },

  fillOf(leaves, part = null) {
    if (!leaves.length) return null;
    const v = this.valueOf(leaves, part);
    if (v === null || v === undefined) return null;
    if (this.seen) { this.seen.push(v); return null; }
    if (this.overlay === "group") return this.data.colors[String(v)] || null;
    if (this.overlay === "change") return CHANGE[v];
    if (this.overlay === "bound") return boundColor(v);
    if (this.overlay === "bytes" || this.overlay === "time") {
      const [lo, hi] = this.range;
      const t = hi > lo ? (Math.log(v + 1) - Math.log(lo + 1)) / (Math.log(hi + 1) - Math.log(lo + 1)) : 1;
      return scaleColor(Math.max(0, Math.min(1, t)));
    }
    if (!this.cats.has(v)) this.cats.set(v, CATS[this.cats.size % CATS.length]);
    return this.cats.get(v);
  },

  // The legend: a short list or a scale, never one entry per group.
  legend() {
    const styles = [["rejected", "not in any group"], ["view", "view (no data moves)"], ["selected", "selected"], ["match", "search match"]];
    let head;
    if (this.overlay === "group") {
      const swatches = this.groupIds.slice(0, 12).map((g) => h("span", { class: "jl-swatch", style: `background:${this.data.colors[String(g)]}` }));
      head = h("span", { class: "jl-chip jl-legend-groups" }, swatches, ` colour = fusion group · ${plural(this.groupIds.length, "group")}`);
    } else if (this.overlay === "change") {
      head = Object.entries(CHANGE).map(([kind, color]) => chip(color, `${kind} (or holds ${kind} ops)`));
    } else if (this.overlay === "bound") {
      head = boundLegend();
    } else if (this.overlay === "bytes" || this.overlay === "time") {
      const fmt = this.overlay === "bytes" ? fmtBytes : fmtSec;
      const [lo, hi] = this.range;
      const what = this.overlay === "bytes" ? "bytes written" : "time per call";
      if (lo === hi && this.seenCount === 1) head = h("span", { class: "jl-chip jl-scale" }, `${what}: ${fmt(lo)}, the one box with a value; open it to compare its parts`);
      else head = h("span", { class: "jl-chip jl-scale" }, `${what}: ${fmt(lo)}`,
        h("span", { class: "jl-ramp", style: `background:linear-gradient(90deg, ${scaleColor(0)}, ${scaleColor(0.5)}, ${scaleColor(1)})` }), fmt(hi), " (log scale)",
        this.overlay === "time" && this.data.call_time ? h("span", { class: "jl-muted jl-calltime", title: callTimeText(this.data) }, ` · ${callTimeText(this.data, true)}`) : null);
    } else {
      head = [...[...this.cats].map(([v, c]) => chip(c, v)), h("span", { class: "jl-muted" }, "(a closed box: what most of its ops are)")];
    }
    this.legendEl.replaceChildren(h("span", { class: "jl-legend-head" }, head),
      ...styles.map(([cls, label]) => h("span", { class: `jl-chip jl-style-${cls}` }, h("span", { class: "jl-swatch" }), label)),
      ...(this.options.schedule ? [h("span", { class: "jl-chip jl-style-live" }, h("span", { class: "jl-swatch" }), "live at this step")] : []));
  },

  // The scale's range: over what is drawn now, so that collapsed parts and open groups each use all of it.
  prepareOverlay() {
    this.cats = new Map();
    this.range = [0, 0];
    if (!this.scaled()) return;
    this.seen = [];
    this.units();
    const ok = this.seen.filter((v) => typeof v === "number");
    this.seen = null;
    this.seenCount = ok.length;
    this.range = ok.length ? [Math.min(...ok), Math.max(...ok)] : [0, 0];
  },

  // A new overlay changes colours only: the boxes keep their places (no new layout, which on a
  // 10,000-op graph drawn whole takes seconds).
  recolor() {
    if (!this.svg) { this.render(true); return; }
    this.prepareOverlay();
    const paint = (list) => {
      for (const u of list) {
        const g = this.byId.get(u.id);
        const shape = g && g.firstElementChild;
        if (shape) {
          shape.style.fill = u.fill || "";
          if (u.children) shape.style.stroke = u.fill || "";
          else g.classList.toggle("filled", Boolean(u.fill));
        }
        if (u.children) paint(u.children);
      }
    };
    paint(this.units());
    this.legend();
  }
};

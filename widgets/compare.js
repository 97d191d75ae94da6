// The Compare view: several compilations' figures in one table and their graphs side by side.

import { fmtBytes, fmtSec, h, recolor } from "./core.js";
import { GraphView } from "./graph.js";

const ROWS = [
  ["level", (v) => v || "–"], ["target", (v) => v || "–"], ["ops", String], ["groups", String], ["kernels", String],
  ["launches", String], ["bytes_moved", fmtBytes], ["peak_bytes", fmtBytes], ["compile_seconds", fmtSec], ["run_seconds", fmtSec],
];

export class CompareView {
  constructor(ctx) {
    this.ctx = ctx;
    this.cmp = ctx.data.compare;
    this.el = h("div", { class: "jl-compare" });
  }

  mount(parent) {
    parent.append(this.el);
    const { labels, columns, views } = this.cmp;
    const best = (key, i) => {
      const values = columns.map((c) => c[key]).filter((v) => typeof v === "number");
      return typeof columns[i][key] === "number" && values.length > 1 && columns[i][key] === Math.min(...values) && key !== "ops";
    };
    this.el.append(h("table", { class: "jl-table jl-cmp" },
      h("thead", {}, h("tr", {}, h("th", {}, ""), labels.map((l) => h("th", {}, l)))),
      h("tbody", {}, ROWS.map(([key, fmt]) => h("tr", {}, h("td", {}, key.replace("_", " ")),
        columns.map((c, i) => h("td", { class: `jl-num${best(key, i) ? " jl-good" : ""}` }, c[key] === null || c[key] === undefined ? "–" : fmt(c[key]))))))));
    // Each side laid out like the Graph view (collapsed, expandable, searchable); selections stay per side.
    const cols = views.map((view, i) => {
      recolor(view);
      const side = { data: view, selection: {}, isStatic: this.ctx.isStatic, on() {}, select() {}, request() {} };
      const col = h("div", { class: "jl-cmpcol" }, h("b", {}, labels[i]));
      return [col, new GraphView(side)];
    });
    this.el.append(h("div", { class: "jl-cmpgraphs" }, cols.map(([col]) => col)));
    for (const [col, view] of cols) view.mount(col);
  }
}

// The Compare view: several compilations' figures in one table, where they differ per source scope
// (ops grouped differently, time and memory of each side), their pipelines pass by pass, and their
// graphs side by side.

import { fmtBytes, fmtSec, h, recolor } from "./core.js";
import { GraphView } from "./graph.js";
import { diffTable } from "./passes.js";

const num = (v, fmt) => (v === null || v === undefined ? "–" : fmt(v));

function groupName(g) {
  return g === null || g === undefined ? "alone" : `group ${g}`;
}

// Per scope (down to depth 2): each side's ops, groups, bytes live at the peak and time, and the ops that
// side `k` groups with other ops than the first side does, listed under the row when it is opened.
function scopeTable(cmp, k) {
  const [a, b] = [cmp.columns[0].scopes || {}, cmp.columns[k].scopes || {}];
  const diff = cmp.diffs[k - 1].regrouped;
  const paths = [...new Set([...Object.keys(a), ...Object.keys(b)])];
  const names = (uid) => (cmp.views[0].ops[String(uid)] || cmp.views[k].ops[String(uid)] || { name: "op" }).name.replace(/^np\./, "");
  const cells = (s) => s ? [h("td", { class: "jl-num" }, s.op_count), h("td", { class: "jl-num" }, s.groups),
    h("td", { class: "jl-num" }, num(s.peak_bytes, fmtBytes)), h("td", { class: "jl-num" }, num(s.seconds, fmtSec))]
    : [h("td", { colspan: 4, class: "jl-muted" }, "–")];
  const body = h("tbody", {});
  for (const path of paths) {
    const d = diff.scopes[path];
    const depth = path ? path.split("/").length : 0;
    const row = h("tr", { class: `jl-scoperow${d ? " jl-regrouped" : ""}`, "data-path": path },
      h("td", { style: `padding-left: ${4 + 14 * depth}px` }, path ? path.split("/").pop() : "(whole program)"),
      cells(a[path]), cells(b[path]), h("td", { class: `jl-num ${d ? "jl-warn" : "jl-muted"}` }, d ? d.count : "0"));
    body.append(row);
    if (!d) continue;
    const list = h("tr", { class: "jl-regrouped-ops", hidden: true }, h("td", { colspan: 10 },
      h("ul", {}, d.uids.map((u) => {
        const [ga, gb] = diff.ops[String(u)];
        return h("li", {}, `${names(u)} #${u}: ${cmp.labels[0]} ${groupName(ga)} · ${cmp.labels[k]} ${groupName(gb)}`);
      }), d.count > d.uids.length ? h("li", { class: "jl-muted" }, `… ${d.count - d.uids.length} more`) : null)));
    row.addEventListener("click", () => { list.hidden = !list.hidden; });
    body.append(list);
  }
  const side = (label) => [h("th", {}, `${label}: ops`), h("th", {}, "groups"), h("th", {}, "at peak"), h("th", {}, "time")];
  return h("div", { class: "jl-cmpscopes" },
    h("h4", {}, `by scope: ${cmp.labels[0]} vs ${cmp.labels[k]}`),
    h("div", { class: "jl-muted" }, `${Object.keys(diff.ops).length} of the ${diff.shared} computing ops both have are grouped differently; click a scope to list them`),
    h("div", { class: "jl-scroll" }, h("table", { class: "jl-table jl-cmpscope" },
      h("thead", {}, h("tr", {}, h("th", {}, "scope"), side(cmp.labels[0]), side(cmp.labels[k]), h("th", {}, "regrouped"))), body)));
}

// The two pipelines pass by pass (runs paired by name), and the IR diff after the first pair that differs.
function passTable(cmp, k) {
  const pp = cmp.diffs[k - 1].passes;
  if (!pp.rows.length) return null;
  const side = (s) => s ? [h("td", { class: "jl-num" }, s.ops_after), h("td", { class: "jl-num" }, fmtSec(s.seconds))]
    : [h("td", { colspan: 2, class: "jl-muted" }, "not run")];
  const rows = pp.rows.map((r, i) => h("tr", { class: `${r.same ? "jl-unchanged" : ""}${i === pp.first_difference ? " jl-current" : ""}` },
    h("td", {}, r.name), side(r.sides[0]), side(r.sides[1]),
    h("td", { class: r.same ? "jl-muted" : "jl-warn" }, r.same ? "same IR after" : r.sides[0] && r.sides[1] ? "IR differs" : "one side only")));
  const first = pp.first_difference === null ? null : pp.rows[pp.first_difference];
  return h("div", { class: "jl-cmppasses" },
    h("h4", {}, `pipelines pass by pass: ${cmp.labels[0]} vs ${cmp.labels[k]}`),
    h("table", { class: "jl-table" }, h("thead", {}, h("tr", {}, h("th", {}, "pass"), h("th", {}, `${cmp.labels[0]}: IR ops after`), h("th", {}, "time"),
      h("th", {}, `${cmp.labels[k]}: IR ops after`), h("th", {}, "time"), h("th", {}, ""))), h("tbody", {}, rows)),
    first ? h("details", { class: "jl-cmpirdiff" }, h("summary", {}, `IR after ${first.name}, the first pass after which they differ (${first.diff.length} rows)`),
      diffTable(first.diff, [cmp.labels[0], cmp.labels[k]]))
      : h("div", { class: "jl-muted" }, "The programs are the same after every pass both ran."));
}

const ROWS = [
  ["level", (v) => v || "–"], ["target", (v) => v || "–"], ["ops", String], ["groups", String], ["kernels", String],
  ["launches", String], ["bytes_moved", fmtBytes], ["peak_bytes", fmtBytes], ["compile_seconds", fmtSec], ["run_seconds", fmtSec],
];

// An op's identity across compilations of one program (passes renumber the ops they make).
function identity(op) {
  return op ? `${op.name}|${op.path || ""}|${op.loc || ""}|${(op.types || []).join(",")}` : null;
}

// The ops of `data` that are `uids` of `from`: the same uid where it is the same op, else matched by identity.
function mates(from, data, uids) {
  const keys = new Set(uids.map((u) => identity(from.ops[String(u)])));
  const same = uids.filter((u) => identity(data.ops[String(u)]) === identity(from.ops[String(u)]));
  if (same.length) return same;
  return Object.values(data.ops).filter((op) => keys.has(identity(op)) && !op.bookkeeping).map((op) => op.uid).slice(0, 8);
}

// One side's context: its own selection, passed on to the other sides as their matching ops.
function linkedSide(data, isStatic) {
  const listeners = [];
  const side = { data, selection: {}, isStatic, others: [], on(kind, fn) { if (kind === "select") listeners.push(fn); }, request() {} };
  side.show = (sel) => { side.selection = sel; for (const fn of listeners) fn(sel); };
  side.select = (sel) => {
    side.show(sel);
    for (const other of side.others) {
      const uids = mates(data, other.data, (sel && sel.uids) || []);
      other.show(uids.length ? { ...sel, uids, source: "link" } : {});
    }
  };
  return side;
}

// Typing in one side's search box searches the other sides too.
function linkSearch(side) {
  side.view.search.addEventListener("input", () => {
    for (const other of side.others) {
      other.view.search.value = side.view.search.value;
      other.view.find(side.view.search.value, 0);
    }
  });
}

export class CompareView {
  constructor(ctx) {
    this.ctx = ctx;
    this.cmp = ctx.data.compare;
    this.el = h("div", { class: "jl-compare" });
  }

  mount(parent) {
    parent.append(this.el);
    const { labels, columns } = this.cmp;
    // The smaller figure is marked better; a compile served from a cache is a load, not a faster compile.
    const counts = (key, c) => typeof c[key] === "number" && !(key === "compile_seconds" && c.compile_cache);
    const best = (key, i) => {
      const values = columns.filter((c) => counts(key, c)).map((c) => c[key]);
      return counts(key, columns[i]) && values.length > 1 && columns[i][key] === Math.min(...values) && key !== "ops";
    };
    const cache = { executable: " (passes and kernels from the executable cache)", kernel: " (every kernel from the kernel cache)" };
    const shown = (key, c, fmt) => `${fmt(c[key])}${key === "compile_seconds" && c.compile_cache ? cache[c.compile_cache] : ""}`;
    this.el.append(h("table", { class: "jl-table jl-cmp" },
      h("thead", {}, h("tr", {}, h("th", {}, ""), labels.map((l) => h("th", {}, l)))),
      h("tbody", {}, ROWS.map(([key, fmt]) => h("tr", {}, h("td", {}, key.replace("_", " ")),
        columns.map((c, i) => h("td", { class: `jl-num${best(key, i) ? " jl-good" : ""}`, title: key === "run_seconds" && c.time_note ? c.time_note : null },
          c[key] === null || c[key] === undefined ? (key === "run_seconds" && c.time_note ? "not timed" : "–") : shown(key, c, fmt))))))));
    // A side without a profile says so, and how to get its time, where a reader looks for it.
    const notes = columns.map((c, i) => c.time_note ? h("li", {}, `${labels[i]}: ${c.time_note}`) : null).filter(Boolean);
    if (notes.length) this.el.append(h("ul", { class: "jl-muted jl-timenote" }, notes));
    this.graphs();
    for (let k = 1; k < labels.length && this.cmp.diffs; k += 1) this.el.append(scopeTable(this.cmp, k), passTable(this.cmp, k));
  }

  // Each side laid out like the Graph view (collapsed, expandable, searchable), right under the figures,
  // and linked: what is searched or selected on one side is searched or shown on the others.
  graphs() {
    const { labels, views } = this.cmp;
    const sides = views.map((view) => {
      recolor(view);
      return linkedSide(view, this.ctx.isStatic);
    });
    sides.forEach((side) => { side.others = sides.filter((x) => x !== side); });
    const cols = sides.map((side, i) => {
      const col = h("div", { class: "jl-cmpcol", "data-side": i }, h("b", {}, labels[i]));
      side.view = new GraphView(side);
      return col;
    });
    this.el.append(h("div", { class: "jl-muted" }, "the two graphs are linked: search or select on one side, the other follows"),
      h("div", { class: "jl-cmpgraphs" }, cols));
    sides.forEach((side, i) => { side.view.mount(cols[i]); linkSearch(side); });
  }
}

// The Passes view: every pass run with its cost and op-count change, a side-by-side
// IR diff and a graph diff of the selected run, and which rule made the selected op.

import { empty, fmtSec, h, opLink } from "./core.js";
import { GraphView } from "./graph.js";
import { RewriteStepper } from "./rewrites.js";

// Rows drawn at first: a 10,000-op program's first pass has a diff of 10,000 lines (a second to draw).
export const DIFF_ROWS = 600;

export function diffTable(rows, labels = ["before", "after"]) {
  if (!rows.length) return empty("This pass changed nothing: the IR before and after is the same.");
  const row = (r) => {
    if (r.t === "skip") return h("tr", { class: "jl-skip" }, h("td", { colspan: 4 }, `⋯ ${r.n} unchanged lines ⋯`));
    const left = r.t === "add" ? "" : r.t;
    const right = r.t === "del" ? "" : r.t;
    return h("tr", { class: `jl-row-${r.t}` },
      h("td", { class: "jl-ln" }, r.l ?? ""), h("td", { class: `jl-code jl-${left}` }, r.a),
      h("td", { class: "jl-ln" }, r.r ?? ""), h("td", { class: `jl-code jl-${right}` }, r.t === "same" ? r.a : r.b));
  };
  const body = h("tbody", {}, rows.slice(0, DIFF_ROWS).map(row));
  const table = h("table", { class: "jl-diff" },
    h("colgroup", {}, h("col", { class: "jl-lncol" }), h("col", {}), h("col", { class: "jl-lncol" }), h("col", {})),
    h("thead", {}, h("tr", {}, h("th", { colspan: 2 }, labels[0]), h("th", { colspan: 2 }, labels[1]))), body);
  // The rest on demand (and when the selected op's line is among them: PassesView.markSelected).
  table.showAll = () => { more?.remove(); more = null; body.append(...rows.slice(DIFF_ROWS).map(row)); };
  let more = rows.length > DIFF_ROWS ? h("tr", { class: "jl-skip jl-more" }, h("td", { colspan: 4 },
    h("a", { href: "#", onclick: (e) => { e.preventDefault(); table.showAll(); } }, `show the other ${rows.length - DIFF_ROWS} rows`))) : null;
  if (more) body.append(more);
  return table;
}

export class PassesView {
  constructor(ctx) {
    this.ctx = ctx;
    this.passes = ctx.data.passes || [];
    this.onlyChanged = false;
    this.current = this.passes.findIndex((p) => p.changed);
    if (this.current < 0) this.current = this.passes.length ? 0 : -1;
    this.list = h("div", { class: "jl-passlist" });
    this.detail = h("div", { class: "jl-passdetail" });
    this.origin = h("div", { class: "jl-origin" });
    this.el = h("div", { class: "jl-passes" }, h("div", { class: "jl-passcol" }, this.filter(), this.list),
      h("div", { class: "jl-passmain" }, this.origin, this.detail));
    ctx.on("select", (sel) => { this.showOrigin(); this.markSelected(); if (this.diffGraph) this.diffGraph.highlight(sel, false); });
  }

  filter() {
    const box = h("input", { type: "checkbox", onchange: (e) => { this.onlyChanged = e.target.checked; this.showList(); } });
    return h("label", { class: "jl-filter" }, box, " only passes that changed something");
  }

  showList() {
    const total = this.passes.reduce((a, p) => a + p.seconds, 0);
    const rows = this.passes.filter((p) => p.changed || !this.onlyChanged).map((p) => {
      const delta = p.ops_after - p.ops_before;
      return h("tr", { class: `jl-pass${p.changed ? "" : " jl-unchanged"}${p.index === this.current ? " jl-current" : ""}`,
                       "data-index": p.index, onclick: () => this.choose(p.index) },
        h("td", { class: "jl-muted" }, p.index),
        h("td", {}, p.name + (p.options || ""), p.changed ? null : h("span", { class: "jl-muted" }, " · no change")),
        h("td", { class: "jl-num" }, fmtSec(p.seconds)),
        h("td", { class: "jl-num" }, `${p.ops_before}→${p.ops_after}`),
        h("td", { class: `jl-num ${delta < 0 ? "jl-good" : delta > 0 ? "jl-warn" : "jl-muted"}` },
          delta ? (delta > 0 ? `+${delta}` : `${delta}`) : "±0"));
    });
    this.list.replaceChildren(h("table", { class: "jl-table" },
      h("thead", {}, h("tr", {}, h("th", {}, "#"), h("th", {}, "pass"), h("th", {}, "time"), h("th", {}, "ops"), h("th", {}, "Δ"))),
      h("tbody", {}, rows)),
      h("div", { class: "jl-muted" }, `${this.passes.length} pass runs · ${fmtSec(total)} in all`));
  }

  choose(index) {
    if (index < 0 || index >= this.passes.length) return;
    this.current = index;
    this.showList();
    this.showDetail();
  }

  step(direction) {
    let i = this.current + direction;
    while (this.onlyChanged && i >= 0 && i < this.passes.length && !this.passes[i].changed) i += direction;
    this.choose(i);
  }

  graphDiff(p) {
    if (!p.changed) return empty("No change.");
    const g = p.graph_diff;
    const lists = ["added", "removed", "changed"].map((kind) => g[kind].length
      ? h("div", { class: `jl-gd jl-gd-${kind}` }, h("b", {}, `${kind} (${g[kind].length}): `), g[kind].slice(0, 40).map((u) => opLink(this.ctx, u)),
          g[kind].length > 40 ? ` … ${g[kind].length - 40} more` : null)
      : null);
    // The graph after the pass with the ops it removed, laid out here like the Graph view (collapsed to
    // scopes and groups, coloured by what the pass did to what each holds); a click selects an op everywhere.
    const box = h("div", { class: "jl-passgraph" });
    this.diffGraph = null;
    if (p.view) {
      const ctx = this.ctx;
      const side = { data: { ...ctx.data, graph: { view: p.view, folded: {} } }, get selection() { return ctx.selection; },
        isStatic: ctx.isStatic, on() {}, select: (sel) => ctx.select({ ...sel, source: "passes" }), request() {} };
      this.diffGraph = new GraphView(side, { overlay: "change" });
      requestAnimationFrame(() => { this.diffGraph.mount(box); this.stepper.paint(); });
    } else {
      box.append(empty("No graph snapshot recorded for this pass."));
    }
    return h("div", {}, lists, box);
  }

  rules(p) {
    const rewrites = p.rewrites.slice(0, 200).map((r) => h("li", {}, h("b", {}, r.rule), " at ", opLink(this.ctx, r.root),
      r.created.length ? ` made ${r.created.length}` : "", r.erased.length ? ` erased ${r.erased.length}` : "",
      r.moved.length ? ` moved ${r.moved.length}` : ""));
    const misses = p.misses.slice(0, 200).map((m) => h("li", {}, h("b", {}, m.rule), " did not apply at ", opLink(this.ctx, m.op), `: ${m.reason}`));
    return h("div", { class: "jl-rules" },
      rewrites.length ? h("div", {}, h("h4", {}, `rules applied (${p.rewrites.length})`), h("ul", {}, rewrites)) : null,
      misses.length ? h("div", {}, h("h4", {}, `rules that did not apply (${p.misses.length})`), h("ul", {}, misses)) : null,
      p.notes.length ? h("div", { class: "jl-muted" }, p.notes.join("; ")) : null);
  }

  showDetail() {
    const p = this.passes[this.current];
    if (!p) { this.detail.replaceChildren(empty("No passes recorded.")); return; }
    const nav = h("div", { class: "jl-toolbar" },
      h("button", { class: "jl-btn", onclick: () => this.step(-1), disabled: this.current === 0 }, "◀ prev"),
      h("button", { class: "jl-btn", onclick: () => this.step(1), disabled: this.current === this.passes.length - 1 }, "next ▶"),
      h("b", { class: "jl-passtitle" }, `#${p.index} ${p.name}${p.options || ""}`),
      h("span", { class: "jl-muted" }, ` ${fmtSec(p.seconds)} · ops ${p.ops_before}→${p.ops_after}`));
    this.detail.dataset.index = p.index;
    this.stepper = new RewriteStepper(this.ctx, p, () => this.diffGraph);
    const steps = h("div", {});
    this.stepper.mount(steps);
    // The stepper and the graph it updates first, together on screen; the long lists below them.
    this.detail.replaceChildren(nav, h("div", { class: "jl-stepgraph" }, h("h4", {}, "graph diff (ops matched by id)"), steps, this.graphDiff(p)),
      this.rules(p), h("h4", {}, "IR diff"), diffTable(p.diff));
    this.markSelected();
  }

  // The selected ops' lines in the IR diff (the lines defining their results) and their nodes in the graph diff.
  markSelected() {
    const sel = this.ctx.selection;
    const uids = sel && sel.uids ? sel.uids : [];
    const names = new Set(uids.flatMap((u) => (this.ctx.data.ops[String(u)] || { results: [] }).results.map((r) => `%${r}`)));
    let first = null;
    const table = this.detail.querySelector(".jl-diff");
    if (names.size && table && table.showAll && table.querySelector(".jl-more")) {
      const shown = [...table.querySelectorAll("td.jl-code")].some((td) => [...names].some((n) => td.textContent.includes(`${n} =`)));
      if (!shown) table.showAll();
    }
    this.detail.querySelectorAll(".jl-diff tbody tr").forEach((tr) => {
      const hit = [...tr.querySelectorAll("td.jl-code")].some((td) => {
        const m = /^\s*(%[^\s=]+(?:\s*,\s*%[^\s=,]+)*)\s*=/.exec(td.textContent);
        return m && m[1].split(",").some((n) => names.has(n.trim()));
      });
      tr.classList.toggle("jl-ir-selected", hit);
      if (hit && !first) first = tr;
    });
    this.detail.querySelectorAll("svg .selected").forEach((el) => el.classList.remove("selected"));
    for (const u of uids) this.detail.querySelector(`svg [id="op_${u}"]`)?.classList.add("selected");
    if (first && sel.source !== "passes" && this.el.offsetParent) first.scrollIntoView({ block: "nearest" });
  }

  // Which pass and rule made the selected op, and the rules that tried it and did not apply.
  showOrigin() {
    const sel = this.ctx.selection;
    if (!sel || sel.kind !== "op" || !sel.uids || !sel.uids.length) { this.origin.replaceChildren(); return; }
    const uid = sel.uids[0];
    const op = this.ctx.data.ops[String(uid)];
    const made = [];
    const missed = [];
    for (const p of this.passes) {
      for (const r of p.rewrites) if (r.created.includes(uid)) made.push(h("li", {}, `made by rule `, h("b", {}, r.rule), ` in pass #${p.index} ${p.name} (rewriting `, opLink(this.ctx, r.root), ")"));
      for (const m of p.misses) if (m.op === uid) missed.push(h("li", {}, `rule `, h("b", {}, m.rule), ` did not apply (pass #${p.index} ${p.name}): ${m.reason}`));
    }
    const origin = op && op.origin ? op.origin : { pass: "trace" };
    this.origin.replaceChildren(h("div", { class: "jl-note" }, h("b", {}, `selected: ${op ? op.name : "op"} #${uid}`),
      made.length ? h("ul", {}, made) : h("div", {}, `made by: ${origin.pass}${origin.rule ? ` (rule ${origin.rule})` : ""}`),
      missed.length ? h("ul", {}, missed) : h("div", { class: "jl-muted" }, "no rule recorded a miss at this op")));
  }

  mount(parent) {
    parent.append(this.el);
    if (!this.passes.length) { this.el.replaceChildren(empty("No passes recorded: explore an Executable (jl.compile) or a jitted function to see its passes.")); return; }
    this.showList();
    this.showDetail();
    this.showOrigin();
  }
}

// Stepping through a pass's rewrites one by one: each rewrite's rule, where the rule is written,
// the ops it matched and made with their IR lines before and after, and the pass's graph as it
// stands after that rewrite (ops not made yet faded, ops already erased struck, this one's marked).

import { h, opLink } from "./core.js";

const MARKS = ["jl-step-now", "jl-step-gone", "jl-step-future"];

export class RewriteStepper {
  // `graph()` gives the pass's diff graph (a GraphView) once it is drawn, else null.
  constructor(ctx, pass, graph) {
    this.ctx = ctx;
    this.rewrites = pass.rewrites || [];
    this.graph = graph;
    this.k = 0;
    this.made = new Map();      // uid -> the step that made it
    this.erased = new Map();    // uid -> the step that erased it
    this.rewrites.forEach((r, i) => {
      for (const u of r.created) if (!this.made.has(u)) this.made.set(u, i);
      for (const u of r.erased) this.erased.set(u, i);
    });
    this.card = h("div", { class: "jl-step-card" });
    this.slider = h("input", { type: "range", class: "jl-step-slider", min: 1, max: Math.max(1, this.rewrites.length), value: 1,
      oninput: (e) => this.go(Number(e.target.value) - 1) });
    this.counter = h("span", { class: "jl-step-count" });
    const button = (label, title, fn) => h("button", { class: "jl-btn", title, onclick: fn }, label);
    this.el = h("div", { class: "jl-stepper", "data-pass": pass.index },
      h("h4", {}, `step through the ${this.rewrites.length} rewrite${this.rewrites.length === 1 ? "" : "s"}`),
      h("div", { class: "jl-toolbar" }, button("first", "first rewrite", () => this.go(0)), button("◀", "previous rewrite", () => this.go(this.k - 1)),
        this.counter, button("▶", "next rewrite", () => this.go(this.k + 1)), button("last", "last rewrite", () => this.go(this.rewrites.length - 1)),
        this.slider),
      this.card);
  }

  lines(list, sign) {
    return list.map((t) => h("div", { class: `jl-step-line jl-step-${sign === "-" ? "del" : "add"}` }, `${sign} ${t}`));
  }

  go(k) {
    if (!this.rewrites.length) return;
    this.k = Math.max(0, Math.min(this.rewrites.length - 1, k));
    const r = this.rewrites[this.k];
    this.slider.value = this.k + 1;
    this.counter.textContent = ` rewrite ${this.k + 1} of ${this.rewrites.length} `;
    const counts = [["erased", r.erased], ["changed", r.modified], ["made", r.created], ["moved", r.moved]]
      .filter(([, l]) => l.length).map(([n, l]) => `${n} ${l.length}`).join(" · ");
    const made = r.created.filter((u) => this.ctx.data.ops[String(u)]);
    this.card.dataset.step = this.k;
    this.card.dataset.rule = r.rule;
    this.card.replaceChildren(
      h("div", {}, h("b", { class: "jl-step-rule" }, r.rule), " at ", opLink(this.ctx, r.root),
        h("span", { class: "jl-muted" }, ` · ${counts || "no change"}`)),
      h("div", { class: "jl-muted" }, "rule written at ", h("code", { class: "jl-step-source" }, r.source || "(not recorded)")),
      h("div", { class: "jl-step-ir" }, this.lines(r.before || [], "-"), this.lines(r.after || [], "+"),
        (r.before || []).length + (r.after || []).length ? null : h("div", { class: "jl-muted" }, "(ops moved: their lines are unchanged)")),
      made.length ? h("div", {}, "made: ", made.slice(0, 12).map((u) => opLink(this.ctx, u))) : null);
    this.paint();
  }

  // The graph after this rewrite: its ops marked, those made later faded, those erased before struck.
  paint() {
    const graph = this.graph();
    if (!graph || !graph.svg || !this.rewrites.length) return;
    const r = this.rewrites[this.k];
    const touched = [r.root, ...r.created, ...r.erased, ...r.modified, ...r.moved];
    const leaf = touched.map((u) => graph.leaves.get(`op_${u}`)).find(Boolean);
    if (leaf && graph.el.isConnected) graph.reveal(leaf);
    graph.svg.querySelectorAll(MARKS.map((m) => `.${m}`).join(",")).forEach((e) => e.classList.remove(...MARKS));
    const own = (u) => { const e = graph.byId.get(`op_${u}`); return e || null; };
    for (const [u, step] of this.made) if (step > this.k) own(u)?.classList.add("jl-step-future");
    for (const [u, step] of this.erased) if (step < this.k) own(u)?.classList.add("jl-step-gone");
    for (const u of touched) graph.elementFor(u)?.classList.add("jl-step-now");
  }

  mount(parent) {
    if (!this.rewrites.length) return;
    parent.append(this.el);
    this.go(0);
  }
}

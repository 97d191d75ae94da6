// The Fusion view: for each pair of neighbouring ops, fused or not and the recorded
// reason ("why not fused?"), and every op left out of all groups with its reason.

import { empty, h, opLink } from "./core.js";

export class FusionView {
  constructor(ctx) {
    this.ctx = ctx;
    this.fusion = ctx.data.fusion || { decisions: [], rejected: [] };
    this.onlyNot = true;
    this.table = h("div");
    this.note = h("div", { class: "jl-fusion-selected" });
    this.el = h("div", { class: "jl-fusion" });
    ctx.on("select", (sel) => this.mark(sel));
  }

  rows() {
    const shown = this.fusion.decisions.filter((d) => !d.fused || !this.onlyNot);
    if (!shown.length) return empty(this.onlyNot ? "Every recorded pair was fused." : "No pairs recorded.");
    return h("table", { class: "jl-table" },
      h("thead", {}, h("tr", {}, h("th", {}, "producer"), h("th", {}, ""), h("th", {}, "consumer"), h("th", {}, "fused"), h("th", {}, "why"))),
      h("tbody", {}, shown.map((d) => h("tr", { class: `jl-decision ${d.fused ? "jl-fused" : "jl-notfused"}`, "data-pair": `${d.producer}-${d.consumer}`,
        onclick: (e) => { if (e.target.tagName !== "A") this.ctx.select({ kind: "pair", uids: [d.producer, d.consumer], label: `pair ${d.producer}→${d.consumer}`, source: "fusion" }); } },
        h("td", {}, opLink(this.ctx, d.producer)), h("td", {}, "→"), h("td", {}, opLink(this.ctx, d.consumer)),
        h("td", {}, d.fused ? "yes" : "no"), h("td", {}, d.reason)))));
  }

  // The selected op's group, and every recorded decision about it with its reason, above the long table.
  explain(sel) {
    const uid = sel && sel.kind === "op" && sel.uids && sel.uids.length === 1 ? sel.uids[0] : null;
    const op = uid === null ? null : this.ctx.data.ops[String(uid)];
    if (!op) { this.note.replaceChildren(); return; }
    const rejected = this.fusion.rejected.find((r) => r.op === uid);
    const pairs = this.fusion.decisions.filter((d) => d.producer === uid || d.consumer === uid);
    const group = op.group !== null && op.group !== undefined ? this.ctx.data.groups.find((g) => g.id === op.group) : null;
    this.note.replaceChildren(h("div", { class: "jl-note" }, h("b", {}, "selected: "), opLink(this.ctx, uid),
      group ? ` · in group ${group.id} with ${group.ops.length - 1} other ops` : " · in no group",
      rejected ? h("div", { class: "jl-warn" }, `left out of every group: ${rejected.reason}`) : null,
      pairs.length ? h("ul", {}, pairs.slice(0, 12).map((d) => h("li", {}, opLink(this.ctx, d.producer), " → ", opLink(this.ctx, d.consumer),
        d.fused ? " fused" : ` not fused: ${d.reason}`))) : h("div", { class: "jl-muted" }, "no decision recorded with its neighbours")));
  }

  mark(sel) {
    this.explain(sel);
    const uids = new Set(sel && sel.uids ? sel.uids : []);
    this.el.querySelectorAll("[data-pair]").forEach((tr) => {
      const [a, b] = tr.dataset.pair.split("-").map(Number);
      tr.classList.toggle("selected", uids.has(a) || uids.has(b));
    });
  }

  mount(parent) {
    parent.append(this.el);
    const { decisions, rejected } = this.fusion;
    if (!decisions.length && !rejected.length) {
      this.el.append(empty("No fusion decisions recorded: fusion runs at O1 and O2 (this is an O0 compilation or a plain program)."));
      return;
    }
    const box = h("input", { type: "checkbox", checked: true, onchange: (e) => { this.onlyNot = e.target.checked; this.table.replaceChildren(this.rows()); } });
    this.table.append(this.rows());
    this.el.append(this.note, h("h4", {}, `neighbouring pairs (${decisions.length}, ${decisions.filter((d) => !d.fused).length} not fused)`),
      h("label", { class: "jl-filter" }, box, " only pairs not fused"), this.table);
    if (rejected.length) {
      this.el.append(h("h4", {}, `ops left out of every group (${rejected.length})`), h("table", { class: "jl-table" }, h("tbody", {},
        rejected.map((r) => h("tr", { class: "jl-rejected-row" }, h("td", {}, opLink(this.ctx, r.op)), h("td", {}, r.reason))))));
    }
    this.mark(this.ctx.selection);
  }
}

// The Session view (jl.explore.session()): every compile and recompile of the process in
// one index, each with its reason, time, cache state and a link to its own explorer page.

import { empty, fmtSec, h } from "./core.js";

function cacheText(c) {
  const kernels = c.kernels ? ` · kernels ${c.kernel_hits}/${c.kernels} from cache` : " · no kernels";
  return `passes: ${c.executable}${kernels}`;
}

export class SessionView {
  // `openPage(data, el)` draws one compile's explorer into `el`.
  constructor(ctx, openPage) {
    this.ctx = ctx;
    this.openPage = openPage;
    this.compiles = (ctx.data.session || {}).compiles || [];
    this.page = h("div", { class: "jl-session-page" });
    this.el = h("div", { class: "jl-session" });
    ctx.on("msg", (msg) => this.received(msg));
  }

  // A saved index links each page's file; in a notebook the kernel builds the page on request.
  link(c) {
    if (c.page) return h("a", { class: "jl-pagelink", href: c.page, "data-index": c.index }, "open page");
    if (this.ctx.isStatic || !c.alive) return h("span", { class: "jl-muted", title: "the Executable was garbage collected" }, "gone");
    return h("a", { class: "jl-pagelink", href: "#", "data-index": c.index, onclick: (e) => {
      e.preventDefault();
      this.page.replaceChildren(empty(`building compile #${c.index}'s page…`));
      this.ctx.request({ type: "page", index: c.index });
    } }, "open page");
  }

  received(msg) {
    if (msg.type !== "page") return;
    if (msg.error) { this.page.replaceChildren(h("div", { class: "jl-warn" }, msg.error)); return; }
    this.page.replaceChildren();
    this.el.querySelectorAll("tr[data-index]").forEach((tr) => tr.classList.toggle("jl-current", tr.dataset.index === String(msg.index)));
    this.openPage(msg.data, this.page);
  }

  row(c) {
    const first = c.nth === 1;
    return h("tr", { "data-index": c.index, class: first ? "" : "jl-recompile" },
      h("td", { class: "jl-num" }, `#${c.index}`),
      h("td", {}, h("b", {}, c.name), first ? "" : h("span", { class: "jl-warn" }, ` recompile ${c.nth - 1}`)),
      h("td", { class: "jl-num" }, c.clock),
      h("td", { class: "jl-reason" }, c.reason),
      h("td", { class: "jl-muted" }, Object.entries(c.signature || {}).map(([k, v]) => `${k}: ${v}`).join(", ")),
      h("td", {}, `${c.level} · ${c.target}`),
      h("td", { class: "jl-num" }, fmtSec(c.seconds)),
      h("td", { class: c.cache.executable === "hit" ? "jl-good" : "jl-muted" }, cacheText(c.cache)),
      h("td", {}, this.link(c)));
  }

  mount(parent) {
    parent.append(this.el);
    if (!this.compiles.length) { this.el.append(empty("Nothing compiled in this process yet: call a jitted function or jl.compile.")); return; }
    const functions = new Set(this.compiles.map((c) => c.name)).size;
    const again = this.compiles.filter((c) => c.nth > 1).length;
    const total = this.compiles.reduce((a, c) => a + c.seconds, 0);
    this.el.append(h("h4", {}, `${this.compiles.length} compile${this.compiles.length === 1 ? "" : "s"} of ${functions} function${functions === 1 ? "" : "s"}`,
      h("span", { class: "jl-muted" }, ` · ${again} recompile${again === 1 ? "" : "s"} · ${fmtSec(total)} compiling in all`)),
    h("table", { class: "jl-table jl-session-index" },
      h("thead", {}, h("tr", {}, ["#", "function", "at", "why", "signature", "level", "compile", "cache", ""].map((t) => h("th", {}, t)))),
      h("tbody", {}, this.compiles.map((c) => this.row(c)))), this.page);
  }
}

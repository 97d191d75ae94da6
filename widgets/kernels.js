// The Kernels view: where the compile went, each compiled kernel's backend, compile time (with
// its typing, LLVM and cache parts), cache outcome and per-call time, and its generated source,
// syntax highlighted here.

import { callTimeText, chip, empty, fmtSec, h, plural } from "./core.js";
import { highlightPython } from "./pysyntax.js";
import { Roofline } from "./roofline.js";

export class KernelsView {
  constructor(ctx) {
    this.ctx = ctx;
    this.kernels = ctx.data.kernels || [];
    this.source = h("div", { class: "jl-source" });
    this.el = h("div", { class: "jl-kernels" });
    ctx.on("select", (sel) => this.follow(sel));
  }

  group(gid) {
    return this.ctx.data.groups.find((g) => g.id === gid);
  }

  // The kernel's source; with `gid`, the lines generated for that group marked (at O2, its part of the program-wide source).
  show(k, gid = null) {
    this.current = k.key;
    this.el.querySelectorAll("tr[data-key]").forEach((tr) => tr.classList.toggle("jl-current", tr.dataset.key === k.key));
    const spans = gid === null || gid === undefined ? [] : (k.group_lines || {})[String(gid)] || [];
    const marks = spans.map(([a, b]) => h("div", { class: "jl-linemark", "data-lines": `${a}-${b}`,
      style: `top: calc(${a - 1} * var(--jl-code-line) + 8px); height: calc(${b - a + 1} * var(--jl-code-line))` }));
    const pre = h("pre", { class: "jl-code-block" }, marks, h("code", { html: highlightPython(k.source || "") }));
    const jump = (mark) => { pre.scrollTop = Math.max(0, mark.offsetTop - 40); };
    const where = spans.length ? [` · group ${gid}: lines `, ...spans.flatMap(([a, b], i) => [i ? ", " : "",
      h("a", { class: "jl-lines", href: "#", onclick: (e) => { e.preventDefault(); jump(marks[i]); } }, `${a}–${b}`)])] : [];
    this.source.replaceChildren(h("div", { class: "jl-muted jl-kernelhead", "data-group": gid ?? "" },
      `${k.key} · ${k.backend}${k.choice ? ` · ${k.choice}` : ""}${this.runsFor(k, gid)}`, ...where), pre);
    // Scrolled to the group's last range (its calls) once the pane is shown: a hidden tab has no layout to scroll.
    if (marks.length) {
      const seen = new ResizeObserver(() => {
        if (!pre.clientHeight) return;
        jump(marks[marks.length - 1]);
        seen.disconnect();
      });
      seen.observe(pre);
    }
  }

  choose(k) {
    this.show(k);
    const g = this.group(k.group);
    this.ctx.select({ kind: "kernel", id: k.key, uids: g ? g.ops : [], label: `kernel ${k.key.slice(0, 16)}`, source: "kernels" });
  }

  follow(sel) {
    if (!sel || sel.source === "kernels" || !sel.uids || !sel.uids.length) return;
    const gid = sel.kind === "group" ? sel.id : this.ctx.data.ops[String(sel.uids[0])]?.group;
    if (gid === null || gid === undefined || !this.el.isConnected) return;
    // The record the data names for the group: its own, the one it reuses, or O2's program-wide source.
    const key = this.group(gid)?.kernel;
    const k = this.kernels.find((x) => x.key === key);
    if (k) this.show(k, gid);
    else this.none(gid);
  }

  // A group no kernel record names (it runs op by op): said so, rather than leaving the last kernel up.
  none(gid) {
    this.current = null;
    this.el.querySelectorAll("tr.jl-current").forEach((tr) => tr.classList.remove("jl-current"));
    this.source.replaceChildren(h("div", { class: "jl-muted jl-kernelhead", "data-group": gid }, `group ${gid}: no compiled kernel recorded for it`));
  }

  // Whose kernel a group runs: its own, or one compiled for another group of the same structure.
  runsFor(k, gid) {
    if (gid === null || gid === undefined || k.group === gid) return "";
    if ((k.reused_by || []).includes(gid)) return ` · group ${gid} runs the kernel compiled for group ${k.group}`;
    return "";
  }

  // The profile's spread, launches and the groups a shared kernel ran for, when profiled.
  measured(k) {
    const p = ((this.ctx.data.profile || {}).kernels || {})[k.key];
    if (!p || typeof p !== "object") return "";
    const parts = [];
    if (typeof p.min === "number" && typeof p.max === "number") parts.push(`${fmtSec(p.min)}–${fmtSec(p.max)}`);
    if (p.launches) parts.push(plural(p.launches, "launch", "launches"));
    if ((p.groups || []).length > 1) parts.push(`shared by groups ${p.groups.join(", ")}`);
    return parts.join(" · ");
  }

  // Every signature a jitted function compiled, with the reason for each recompile.
  recompiles() {
    const list = this.ctx.data.recompiles || [];
    if (!list.length) return null;
    const rows = list.map((r) => h("tr", { class: r.current ? "jl-current" : "" },
      h("td", { class: "jl-num" }, `#${r.index}`),
      h("td", {}, Object.entries(r.signature || {}).map(([k, v]) => `${k}: ${v}`).join(", ")),
      h("td", {}, r.reason || ""), h("td", { class: "jl-num" }, fmtSec(r.seconds)), h("td", {}, r.current ? "shown" : "")));
    return h("div", { class: "jl-recompiles" }, h("h4", {}, `compilations: ${list.length}`),
      h("table", { class: "jl-table" }, h("thead", {}, h("tr", {}, ["", "signature", "why", "compile", ""].map((t) => h("th", {}, t)))),
        h("tbody", {}, rows)));
  }

  // Whether the passes ran in this compile or their result came from the executable cache.
  executableCache() {
    const c = this.ctx.data.executable_cache;
    if (!c) return null;
    const text = c.hit ? `passes: from the executable cache (${c.path})`
      : `passes: ran${c.stored ? `, result stored in the executable cache (${c.path})` : ` (not cached: ${c.reason || "?"})`}`;
    return h("div", { class: c.hit ? "jl-good jl-exe-cache" : "jl-muted jl-exe-cache" }, text);
  }

  // Where the compile went (data.compile_time): the stages, the kernels' parts and the slowest passes as stacked bars.
  compileTime() {
    const t = this.ctx.data.compile_time;
    if (!t) return null;
    const colors = ["#8cb4e8", "#f2a86f", "#8fd18f", "#e88f8f", "#c3a5e0", "#d8b48c", "#f0a8d8", "#b8b8b8", "#7fd4d9"];
    const label = (name) => name.replace(/_/g, " ").replace("llvm", "LLVM");
    const bar = (title, parts, total) => {
      const entries = parts.filter(([, v]) => v > 0);
      const sum = total || entries.reduce((a, [, v]) => a + v, 0) || 1;
      const segs = entries.map(([n, v], i) => h("div", { class: "jl-stackpart", "data-part": n, title: `${label(n)}: ${fmtSec(v)}`,
        style: `width:${(100 * v) / sum}%;background:${colors[i % colors.length]}` }));
      const legend = entries.map(([n, v], i) => h("span", { class: "jl-stacklegend" },
        h("span", { class: "jl-swatch", style: `background:${colors[i % colors.length]}` }), `${label(n)} ${fmtSec(v)}`));
      return h("tr", {}, h("td", {}, title), h("td", { class: "jl-num" }, fmtSec(sum)),
        h("td", {}, h("div", { class: "jl-stack" }, segs), h("div", { class: "jl-muted" }, legend)));
    };
    const passes = [...t.passes].sort((a, b) => b.seconds - a.seconds);
    const top = passes.slice(0, 6).map((p) => [p.name, p.seconds]);
    const rest = passes.slice(6).reduce((a, p) => a + p.seconds, 0);
    return h("div", { class: "jl-compile-time" },
      h("h4", {}, `compile: ${fmtSec(t.total)}`, h("span", { class: "jl-muted" },
        ` · shape inference ${fmtSec(t.shape_inference)} (in trace and passes) · executable cache ${fmtSec(t.executable_cache)}`)),
      h("table", { class: "jl-table" }, h("tbody", {},
        bar("stages", Object.entries(t.stages), t.total),
        bar("kernels", Object.entries(t.kernel_parts), t.stages.kernels),
        bar(t.passes_cached ? "passes (when stored)" : "passes", rest > 0 ? [...top, ["other passes", rest]] : top))));
  }

  // A kernel's compile seconds; kernels loaded at once from the executable cache have one load's time between
  // them, split evenly: shown as the share it is, not as a measurement.
  compileCell(k) {
    const loaded = (this.ctx.data.compile_time || {}).kernels_loaded;
    if (!loaded) return h("td", { class: "jl-num" }, fmtSec(k.compile_seconds));
    return h("td", { class: "jl-num jl-muted", title: `one load of ${plural(loaded, "kernel")} from the executable cache took ` +
      `${fmtSec(k.compile_seconds * loaded)}; not measured per kernel` }, `1/${loaded} of a load`);
  }

  // A kernel's typing, LLVM and cache seconds (its `timing`), the full breakdown on hover.
  timingCells(k) {
    const t = k.timing;
    if (!t) return [h("td", {}, "–"), h("td", {}, "–"), h("td", {}, "–")];
    const all = Object.entries(t).map(([n, v]) => `${n}: ${fmtSec(v)}`).join("\n");
    const cache = t.kernel_cache + t.numba_cache_read + t.numba_cache_write;
    return [t.typing, t.llvm, cache].map((v) => h("td", { class: "jl-num", title: all }, fmtSec(v)));
  }

  // Hit or miss, and the groups whose kernels run the same compiled code (same loop nest, other sizes).
  cacheText(k) {
    const base = k.cache_hit ? (k.worker ? "hit: compiled by a worker process" : "hit") : `miss${k.miss_reason ? `: ${k.miss_reason}` : ""}`;
    const shared = k.shares_code_with || [];
    return shared.length ? `${base} · same code as group${shared.length > 1 ? "s" : ""} ${shared.join(", ")}` : base;
  }

  mount(parent) {
    parent.append(this.el);
    const call = callTimeText(this.ctx.data);
    if (call) this.el.append(h("div", { class: "jl-calltime" }, call));
    if (this.ctx.data.roofline) new Roofline(this.ctx).mount(this.el);
    const cached = this.executableCache();
    if (cached) this.el.append(cached);
    const breakdown = this.compileTime();
    if (breakdown) this.el.append(breakdown);
    const recompiles = this.recompiles();
    if (recompiles) this.el.append(recompiles);
    if (!this.kernels.length) {
      this.el.append(empty("No kernels recorded: O0 runs each op with its numpy reference implementation (compile at O1 or O2)."));
      return;
    }
    const rows = this.kernels.map((k) => h("tr", { "data-key": k.key, onclick: () => this.choose(k) },
      h("td", {}, k.group !== null && k.group !== undefined ? chip(this.ctx.data.colors[String(k.group)], `group ${k.group}`) : "–"),
      h("td", { class: "jl-key", title: k.key }, k.key.length > 28 ? `${k.key.slice(0, 26)}…` : k.key),
      h("td", {}, k.backend), this.compileCell(k), ...this.timingCells(k),
      h("td", { class: k.cache_hit ? "jl-good" : "jl-warn" }, this.cacheText(k)),
      h("td", { class: "jl-num" }, k.per_call_seconds === null || k.per_call_seconds === undefined ? "–" : fmtSec(k.per_call_seconds)),
      h("td", { class: "jl-muted" }, this.measured(k))));
    this.el.append(h("table", { class: "jl-table" },
      h("thead", {}, h("tr", {}, ["group", "key", "backend", "compile", "typing", "LLVM", "cache s", "cache", "per call", "measured"].map((t) => h("th", {}, t)))),
      h("tbody", {}, rows)), this.source);
    this.show(this.kernels[0]);
    this.follow(this.ctx.selection);
  }
}

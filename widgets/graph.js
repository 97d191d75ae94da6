// The graph: Graphviz's SVG (laid out in Python) with groups that expand on click,
// hover details, the linked selection, and schedule overlays (order, live buffers).

import { chip, empty, fmtSec, h, panZoom, s, tooltip } from "./core.js";

function uidOf(el) {
  return el && el.id && el.id.startsWith("op_") ? Number(el.id.slice(3)) : null;
}

function groupIdOf(el) {
  return el && el.id && el.id.startsWith("grp_") ? Number(el.id.slice(4)) : null;
}

export function opDetails(data, uid, folded) {
  const op = data.ops[String(uid)];
  if (!op) return h("div", {}, `op #${uid}`);
  const attrs = Object.entries(op.attrs || {}).slice(0, 6).map(([k, v]) => `${k} = ${v}`);
  const origin = op.origin || {};
  return h("div", { class: "jl-details" },
    h("b", {}, op.name), ` #${uid}`,
    h("div", {}, `${op.results.map((r, i) => `%${r}: ${op.types[i]}`).join(", ")}`),
    op.operands.length ? h("div", {}, `operands: ${op.operands.map((v) => `%${v}`).join(", ")}`) : null,
    attrs.length ? h("div", { class: "jl-muted" }, attrs.join("; ")) : null,
    folded && folded.length ? h("div", { class: "jl-muted" }, `weights/constants: ${folded.join(", ")}`) : null,
    op.group !== null && op.group !== undefined ? h("div", {}, chip(data.colors[String(op.group)], `group ${op.group}`)) : null,
    h("div", {}, `made by: ${origin.pass || "trace"}${origin.rule ? ` (rule ${origin.rule})` : ""}`),
    op.view ? h("div", {}, "view: a re-view of its operand, no data moves") : null,
    op.rejected ? h("div", { class: "jl-bad" }, `left out of every group: ${op.rejected}`) : null,
    op.loc ? h("div", { class: "jl-muted" }, op.loc) : null);
}

function groupDetails(data, gid) {
  const g = data.groups.find((x) => x.id === gid) || { ops: [], op_names: [] };
  const names = [...new Set(g.op_names.map((n) => n.replace(/^np\./, "")))];
  return h("div", { class: "jl-details" },
    chip(data.colors[String(gid)], `group ${gid}`), ` ${g.ops.length} ops`,
    g.backend ? h("div", {}, `backend: ${g.backend}${g.kind ? ` · ${g.kind}` : ""}`) : null,
    g.key ? h("div", { class: "jl-muted" }, `key: ${g.key.slice(0, 60)}`) : null,
    h("div", {}, names.slice(0, 8).join(", ") + (names.length > 8 ? ", …" : "")),
    h("div", { class: "jl-muted" }, "click to expand"));
}

export class GraphView {
  constructor(ctx, options = {}) {
    this.ctx = ctx;
    this.data = ctx.data;
    this.graph = this.data.graph || { layouts: {}, members: {}, folded: {} };
    this.layouts = { ...(this.graph.layouts || {}) };
    this.groupIds = Object.keys(this.graph.members || {}).map(Number).sort((a, b) => a - b);
    this.expanded = new Set(this.graph.default === "all" ? this.groupIds : []);
    this.options = options;
    this.byId = new Map();
    this.live = null;
    this.canvas = h("div", { class: "jl-canvas" });
    this.status = h("span", { class: "jl-muted" });
    this.el = h("div", { class: "jl-graphview" }, this.toolbar(), this.canvas, this.legend());
    this.tip = tooltip(this.el);
    ctx.on("select", (sel) => this.highlight(sel, true));
    ctx.on("msg", (msg) => {
      if (msg.type === "layout" && msg.svg) { this.layouts[msg.key] = msg.svg; if (msg.key === this.key()) this.render(); }
    });
  }

  toolbar() {
    const button = (label, fn, title) => h("button", { class: "jl-btn", onclick: fn, title }, label);
    return h("div", { class: "jl-toolbar" },
      this.groupIds.length ? button("Expand all", () => this.setExpanded(this.groupIds)) : null,
      this.groupIds.length ? button("Collapse all", () => this.setExpanded([])) : null,
      button("Fit", () => this.pz && this.pz.fit(), "show the whole graph"),
      h("span", { class: "jl-muted" }, "wheel: zoom · drag: pan · click: select"),
      this.status);
  }

  legend() {
    const items = this.data.groups.map((g) => h("a", {
      href: "#", class: "jl-legend-item", "data-group": g.id,
      onclick: (e) => { e.preventDefault(); this.ctx.select({ kind: "group", id: g.id, uids: g.ops, label: `group ${g.id}` }); },
    }, chip(g.color, `group ${g.id}${g.backend ? ` · ${g.backend}` : ""} (${g.ops.length})`)));
    const styles = [["rejected", "not in any group"], ["view", "view (no data moves)"], ["selected", "selected"]];
    return h("div", { class: "jl-legend" }, items,
      styles.map(([cls, label]) => h("span", { class: `jl-chip jl-style-${cls}` }, h("span", { class: "jl-swatch" }), label)),
      this.options.schedule ? h("span", { class: "jl-chip jl-style-live" }, h("span", { class: "jl-swatch" }), "live at this step") : null);
  }

  key() {
    if (!this.groupIds.length || this.expanded.size === this.groupIds.length) return "all";
    if (!this.expanded.size) return "none";
    return [...this.expanded].sort((a, b) => a - b).join(",");
  }

  setExpanded(ids) {
    this.expanded = new Set(ids);
    this.render();
  }

  toggleGroup(gid, open) {
    if (open) this.expanded.add(gid); else this.expanded.delete(gid);
    this.render();
  }

  render() {
    let key = this.key();
    if (!this.layouts[key]) {
      if (this.ctx.isStatic) {
        key = "all";
      } else {
        this.status.textContent = " laying out…";
        this.ctx.request({ type: "layout", key });
        return;
      }
    }
    this.status.textContent = "";
    if (key === this.installed) return;
    this.install(this.layouts[key]);
    this.installed = key;
  }

  install(svgText) {
    if (!svgText) { this.canvas.replaceChildren(empty("No graph recorded.")); return; }
    const t0 = performance.now();
    this.canvas.innerHTML = svgText;
    const svg = this.canvas.querySelector("svg");
    svg.removeAttribute("width");
    svg.removeAttribute("height");
    svg.querySelectorAll("title").forEach((t) => t.remove());
    this.svg = svg;
    this.byId = new Map([...svg.querySelectorAll("g.node, g.cluster")].map((g) => [g.id, g]));
    svg.addEventListener("click", (e) => this.onClick(e));
    svg.addEventListener("mousemove", (e) => this.onHover(e));
    svg.addEventListener("mouseleave", () => this.tip.hide());
    this.pz = panZoom(svg, this.initialView(svg));
    this.highlight(this.ctx.selection, false);
    if (this.options.stepOf) this.showOrder(this.options.stepOf);
    if (this.live) this.setLive(this.live.uids, this.live.current);
    this.el.dataset.layout = this.key();
    this.el.dataset.renderMs = String(Math.round(performance.now() - t0));
  }

  initialView(svg) {
    const vb = svg.viewBox.baseVal;
    const width = this.canvas.clientWidth || 900;
    const height = this.canvas.clientHeight || 560;
    if (Math.min(width / vb.width, height / vb.height) >= 0.45) return null;
    const scale = Math.min(1, width / vb.width);
    return { x: vb.x, y: vb.y, w: width / scale, h: height / scale };
  }

  elementFor(uid) {
    const el = this.byId.get(`op_${uid}`);
    if (el) return el;
    const op = this.data.ops[String(uid)];
    return op && op.group !== null && op.group !== undefined ? this.byId.get(`grp_${op.group}`) : null;
  }

  onClick(evt) {
    const node = evt.target.closest("g.node");
    const cluster = evt.target.closest("g.cluster");
    this.tip.hide();
    if (node && uidOf(node) !== null) {
      const uid = uidOf(node);
      this.ctx.select({ kind: "op", uids: [uid], label: `${this.data.ops[String(uid)]?.name || "op"} #${uid}`, source: "graph" });
    } else if (node && groupIdOf(node) !== null) {
      const gid = groupIdOf(node);
      const g = this.data.groups.find((x) => x.id === gid);
      this.ctx.select({ kind: "group", id: gid, uids: g ? g.ops : [], label: `group ${gid}`, source: "graph" });
      this.toggleGroup(gid, true);
    } else if (cluster && groupIdOf(cluster) !== null) {
      this.toggleGroup(groupIdOf(cluster), false);
    }
  }

  onHover(evt) {
    const node = evt.target.closest("g.node");
    if (!node) { this.tip.hide(); return; }
    if (uidOf(node) !== null) this.tip.show(evt, opDetails(this.data, uidOf(node), this.graph.folded[node.id]));
    else if (groupIdOf(node) !== null) this.tip.show(evt, groupDetails(this.data, groupIdOf(node)));
    else this.tip.show(evt, h("div", {}, node.querySelector("text")?.textContent || node.id));
  }

  highlight(sel, reveal) {
    if (!this.svg) return;
    this.svg.querySelectorAll(".selected").forEach((el) => el.classList.remove("selected"));
    const targets = (sel && sel.uids ? sel.uids : []).map((u) => this.elementFor(u)).filter(Boolean);
    targets.forEach((el) => el.classList.add("selected"));
    if (reveal && targets.length && sel.source !== "graph" && this.svg.isConnected && this.svg.getBBox) {
      const box = targets[0].getBBox();
      if (box.width) this.pz.focus(box);
    }
  }

  // Numbers each op (or a collapsed group: its first and last step) by its place in the order.
  showOrder(stepOf) {
    this.options.stepOf = stepOf;
    if (!this.svg) return;
    this.svg.querySelectorAll(".jl-badge").forEach((b) => b.remove());
    const ranges = new Map();
    for (const [uid, step] of Object.entries(stepOf)) {
      const el = this.elementFor(Number(uid));
      if (!el) continue;
      const r = ranges.get(el) || [step, step];
      ranges.set(el, [Math.min(r[0], step), Math.max(r[1], step)]);
    }
    for (const [el, [lo, hi]] of ranges) {
      const box = el.getBBox();
      const text = lo === hi ? `${lo}` : `${lo}–${hi}`;
      const w = 7 + 6.2 * text.length;
      el.append(s("g", { class: "jl-badge" },
        s("rect", { x: box.x - 6, y: box.y - 7, width: w, height: 13, rx: 6 }),
        s("text", { x: box.x - 6 + w / 2, y: box.y + 2.5, "text-anchor": "middle" }, text)));
    }
  }

  setLive(uids, current) {
    this.live = { uids, current };
    if (!this.svg) return;
    this.svg.querySelectorAll(".live, .current").forEach((el) => el.classList.remove("live", "current"));
    for (const uid of uids) this.elementFor(uid)?.classList.add("live");
    if (current !== null && current !== undefined) this.elementFor(current)?.classList.add("current");
  }

  mount(parent) {
    parent.append(this.el);
    const t0 = performance.now();
    this.render();
    const seconds = this.graph.seconds;
    if (seconds !== undefined) {
      this.status.textContent = ` layout ${fmtSec(seconds)} · drawn in ${fmtSec((performance.now() - t0) / 1000)}`;
    }
  }
}

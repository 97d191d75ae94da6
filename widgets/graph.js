// The graph: laid out in the browser from the drawable graph Python sends, as a hierarchy
// (scopes when the ops carry them, else parts of the program cut where one value flows on,
// then fusion groups, then ops) that opens collapsed and expands in place; bookkeeping ops
// hidden unless asked for; colour overlays with a short legend; search; hover details,
// the linked selection and the schedule overlays (order, live buffers).

import { chip, fmtBytes, fmtSec, h, panZoom, plural, s, scopeOf, tooltip, uidOf } from "./core.js";
import { arrange, toSvg } from "./layout.js";
import { loopLine, loopOf } from "./loops.js";
import { overlayMethods } from "./overlays.js";
import { matches, matchList } from "./search.js";
import { treeMethods } from "./tree.js";

const LINE_PX = 64;               // a rank's height (box and gap) at scale 1
const LABEL_UNITS = 10;           // the drawing's font size (layout.js), in its own units
const MIN_LABEL_PX = 9;           // Fit never shrinks labels below this
const MAX_LABEL_PX = 12;          // nor blows them up past this


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
    loopOf(data, uid) ? h("div", {}, loopLine(loopOf(data, uid))) : null,
    op.rejected ? h("div", { class: "jl-bad" }, `left out of every group: ${op.rejected}`) : null,
    scopeOf(op).length ? h("div", { class: "jl-muted" }, `scope: ${scopeOf(op).join("/")}`) : null,
    op.loc ? h("div", { class: "jl-muted" }, op.loc) : null);
}

function groupDetails(data, gid) {
  const g = data.groups.find((x) => x.id === gid) || { ops: [], op_names: [] };
  const names = [...new Set(g.op_names.map((n) => n.replace(/^np\./, "")))];
  return h("div", { class: "jl-details" },
    chip(data.colors[String(gid)], `group ${gid}`), ` ${plural(g.ops.length, "op")}`,
    g.backend ? h("div", {}, `backend: ${g.backend}${g.kind ? ` · ${g.kind}` : ""}`) : null,
    g.key ? h("div", { class: "jl-muted" }, `key: ${g.key.slice(0, 60)}`) : null,
    h("div", {}, names.slice(0, 8).join(", ") + (names.length > 8 ? ", …" : "")),
    h("div", { class: "jl-muted" }, "click to expand"));
}

export class GraphView {
  constructor(ctx, options = {}) {
    this.ctx = ctx;
    this.data = ctx.data;
    this.graph = this.data.graph || { folded: {} };
    this.options = options;
    this.byId = new Map();
    this.live = null;
    this.showBookkeeping = false;
    this.overlay = options.overlay || "group";
    this.matches = [];
    this.matchAt = -1;
    this.build();
    this.canvas = h("div", { class: "jl-canvas jl-graphcanvas" });
    this.crumbEl = h("div", { class: "jl-crumbs" });
    this.focus = null;
    this.status = h("span", { class: "jl-muted jl-status" });
    this.legendEl = h("div", { class: "jl-legend" });
    this.el = h("div", { class: "jl-graphview" }, this.toolbar(), this.crumbEl, this.canvas, this.legendEl);
    this.tip = tooltip(this.el);
    ctx.on("select", (sel) => this.highlight(sel, true));
  }

  // The deepest level whose drawing still fits the canvas with readable labels, opened from the top.
  openToFit() {
    this.expanded = new Set();
    const rows = Math.max(5, Math.floor((this.canvasHeight || 560) / LINE_PX) - 1);
    // Groups and loops or branches open on a click only: a loop's box says what it is before its body.
    const opens = (c) => c.children && c.kind !== "group" && !c.region;
    let frontier = this.root.children.filter(opens);
    while (frontier.length) {
      const trial = new Set([...this.expanded, ...frontier.map((c) => c.id)]);
      if (this.visibleCount(trial) > 60 || this.depth(trial) > rows) break;
      this.expanded = trial;
      frontier = frontier.flatMap((c) => c.children.filter(opens));
    }
  }

  visibleCount(expanded) {
    let n = 0;
    const walk = (node) => {
      for (const c of node.children) {
        if (!c.children) n += c.book && !this.showBookkeeping ? 0 : 1;
        else if (expanded.has(c.id)) walk(c);
        else n += 1;
      }
    };
    walk(this.root);
    return n;
  }

  // Ranks a drawing needs at most: the length of its longest chain, counting expanded parts' insides.
  depth(expanded) {
    const units = this.units(expanded);
    const edges = this.visibleEdges(expanded);
    const succ = new Map();
    for (const [a, b] of edges) (succ.get(a) || succ.set(a, []).get(a)).push(b);
    const memo = new Map();
    const longest = (id) => {
      if (memo.has(id)) return memo.get(id);
      memo.set(id, 1);
      const v = 1 + Math.max(0, ...(succ.get(id) || []).map(longest));
      memo.set(id, v);
      return v;
    };
    const ids = [];
    const walk = (list) => list.forEach((u) => (u.children ? walk(u.children) : ids.push(u.id)));
    walk(units);
    return Math.max(0, ...ids.map((i) => longest(i)));
  }

  isHidden(leaf) {
    return leaf.book && !this.showBookkeeping;
  }

  // The drawn box standing for a leaf: itself, or its outermost collapsed container.
  repOf(leaf, expanded = this.expanded) {
    const chain = [];
    for (let c = leaf.parent; c && c !== this.root; c = c.parent) chain.push(c);
    for (let k = chain.length - 1; k >= 0; k -= 1) if (!expanded.has(chain[k].id)) return chain[k].id;
    return leaf.id;
  }

  // Leaf edges with hidden bookkeeping ops bypassed, mapped to the drawn boxes.
  visibleEdges(expanded = this.expanded) {
    const preds = new Map();
    for (const [a, b] of this.edges) (preds.get(b) || preds.set(b, []).get(b)).push(a);
    const memo = new Map();
    const sources = (id) => {
      if (memo.has(id)) return memo.get(id);
      memo.set(id, []);
      const out = [];
      for (const p of preds.get(id) || []) {
        if (this.isHidden(this.leaves.get(p))) out.push(...sources(p)); else out.push(p);
      }
      memo.set(id, out);
      return out;
    };
    const seen = new Set();
    const out = [];
    for (const leaf of this.leaves.values()) {
      if (this.isHidden(leaf)) continue;
      const b = this.repOf(leaf, expanded);
      for (const p of sources(leaf.id)) {
        const a = this.repOf(this.leaves.get(p), expanded);
        const key = `${a}\n${b}`;
        if (a !== b && !seen.has(key)) { seen.add(key); out.push([a, b]); }
      }
    }
    return out;
  }

  // The tree of units to draw: boxes and expanded containers.
  units(expanded = this.expanded) {
    const make = (node) => {
      const out = [];
      for (const c of node.children) {
        if (!c.children) {
          if (this.isHidden(c)) continue;
          const classes = [c.kind, ...c.classes, c.book ? "bookkeeping" : ""];
          const fill = this.fillOf([c]);
          if (fill) classes.push("filled");
          out.push({ id: c.id, label: c.label, shape: c.kind === "op" ? "box" : "ellipse", classes: classes.join(" "), fill });
          continue;
        }
        const visible = this.leavesOf(c).filter((l) => !this.isHidden(l));
        if (!visible.length) continue;
        const fill = c.kind === "group" || this.overlay !== "group" ? this.fillOf(visible, c) : null;
        if (expanded.has(c.id)) {
          out.push({ id: c.id, label: c.label.split("\n")[0], classes: `${c.kind}`, fill, children: make(c) });
        } else {
          const cls = c.kind === "group" ? "groupnode" : `${c.kind}node`;
          out.push({ id: c.id, label: c.label, shape: "box3d", classes: fill ? `${cls} filled` : cls, fill });
        }
      }
      return out;
    };
    return make(this.root);
  }

  toolbar() {
    const button = (label, fn, title) => h("button", { class: "jl-btn", onclick: fn, title }, label);
    const book = [...this.leaves.values()].filter((l) => l.book).length;
    this.search = h("input", { type: "search", class: "jl-search", placeholder: "search op, %value, node, group, line",
      title: "an op's name, %value, #uid, ONNX node name, group N, scope or file.py:line; Enter: next match",
      onkeydown: (e) => {
        if (e.key === "Enter") { e.preventDefault(); this.find(this.search.value, e.shiftKey ? -1 : 1); }
        if (e.key === "Escape") this.matchEl.hidden = true;
      },
      oninput: () => this.find(this.search.value, 0),
      onfocus: () => this.listMatches(),
      onblur: () => { this.matchEl.hidden = true; } });
    this.matchEl = h("div", { class: "jl-matchlist", hidden: true });
    const overlays = [["group", "group"], ["backend", "backend"], ["dtype", "dtype"], ["bytes", "bytes written"]];
    if (this.options.overlay === "change") overlays.unshift(["change", "what the pass did"]);
    if (this.groupTimes().size || Object.values(this.data.ops).some((o) => typeof o.seconds === "number")) overlays.push(["time", "measured time"]);
    if (this.data.roofline) overlays.push(["bound", "% of bound"]);
    const select = h("select", { class: "jl-overlay", title: "colour nodes by", onchange: (e) => { this.overlay = e.target.value; this.recolor(); } },
      overlays.map(([v, label]) => h("option", { value: v, selected: v === this.overlay }, `colour: ${label}`)));
    return h("div", { class: "jl-toolbar" },
      this.containers.size ? button("Expand all", () => this.setExpanded([...this.containers.keys()])) : null,
      this.containers.size ? button("Collapse all", () => this.setExpanded([])) : null,
      button("Fit", () => this.fit(), "show the whole graph"),
      book ? h("label", { class: "jl-filter", title: "mem.alloc, mem.free and view ops" },
        h("input", { type: "checkbox", class: "jl-bookkeeping", onchange: (e) => { this.showBookkeeping = e.target.checked; this.render(true); } }),
        `bookkeeping (${book})`) : null,
      select, h("span", { class: "jl-searchbox" }, this.search, this.matchEl),
      h("span", { class: "jl-muted" }, "wheel: zoom · drag: pan · click: expand or select"),
      this.status);
  }

  setExpanded(ids) {
    this.expanded = new Set(ids);
    this.render(false);
    this.fit();
  }

  // Opens or closes one container, keeping it where it was on screen.
  toggle(id, open) {
    const before = this.boxOf(id);
    if (open) this.expanded.add(id); else this.expanded.delete(id);
    // a branch or while loop opens onto its regions' ops (then and else; condition and body), not onto two closed boxes
    if (open) for (const c of this.containers.get(id).children) if (c.kind === "region") this.expanded.add(c.id);
    this.focus = open ? id : (this.containers.get(id).parent || this.root).id;
    this.render(true, id, before);
  }

  boxOf(id) {
    return this.at ? this.at.boxes.get(id) : null;
  }

  // Draws the current state; `keep` keeps the view, and `anchor` puts that box's top centre where `was` had it.
  render(keep = true, anchor = null, was = null) {
    const t0 = performance.now();
    const view = keep && this.pz ? this.pz.get() : null;
    this.prepareOverlay();
    const units = this.units();
    const edges = this.visibleEdges();
    this.at = arrange(units, edges);
    this.install(toSvg(units, edges, this.at));
    this.legend();
    this.crumbs();
    if (view) {
      if (anchor && was && this.at.boxes.get(anchor)) {
        const now = this.at.boxes.get(anchor);
        view.x += now[0] + now[2] / 2 - (was[0] + was[2] / 2);
        view.y += now[1] - was[1];
      }
      this.pz.set(view);
    }
    this.el.dataset.layout = [...this.expanded].sort().join(",") || "none";
    this.el.dataset.nodes = String(this.svg.querySelectorAll("g.node").length);
    this.el.dataset.renderMs = String(Math.round(performance.now() - t0));
  }

  install(svgText) {
    this.canvas.innerHTML = svgText;
    const svg = this.canvas.querySelector("svg");
    this.svg = svg;
    this.byId = new Map([...svg.querySelectorAll("g.node, g.cluster")].map((g) => [g.id, g]));
    svg.addEventListener("click", (e) => this.onClick(e));
    svg.addEventListener("mousemove", (e) => this.onHover(e));
    svg.addEventListener("mouseleave", () => this.tip.hide());
    this.mini = this.minimap();
    this.pz = panZoom(svg, null, (vb) => this.moveMini(vb));
    this.highlight(this.ctx.selection, false);
    this.markMatches();
    if (this.options.stepOf) this.showOrder(this.options.stepOf);
    if (this.live) this.setLive(this.live.uids, this.live.current);
  }

  // The path down to what was opened or found last; each step leads back to that level.
  crumbs() {
    const chain = [];
    const start = this.focus && (this.containers.get(this.focus) || this.leaves.get(this.focus));
    for (let c = start; c && c !== this.root; c = c.parent) chain.unshift(c);
    const link = (label, fn, id) => h("a", { href: "#", class: "jl-crumb", "data-id": id, onclick: (e) => { e.preventDefault(); fn(); } }, label);
    const short = (c) => { const l = c.kind === "scope" ? c.name : c.label.split("\n")[0]; return l.length > 32 ? `${l.slice(0, 31)}…` : l; };
    this.crumbEl.replaceChildren(link("top", () => { this.focus = null; this.openToFit(); this.render(false); this.fit(); }, "root"),
      ...chain.flatMap((c) => [" › ", link(short(c), () => this.back(c), c.id)]));
  }

  // Back to one container: everything inside it collapses, and the view centres on it.
  back(c) {
    if (!c.children) { this.centerOn(c.id); return; }
    const inside = (id) => { for (let x = this.containers.get(id); x; x = x.parent) if (x.parent === c) return true; return false; };
    for (const id of [...this.expanded]) if (inside(id)) this.expanded.delete(id);
    this.focus = c.id;
    this.render(true);
    this.centerOn(c.id);
  }

  // An overview of the whole drawing with the viewport marked, when the drawing is larger than the view.
  minimap() {
    this.canvas.querySelector(".jl-minimap")?.remove();
    const r = this.canvas.getBoundingClientRect();
    const w = this.at.width + 8;
    const hh = this.at.height + 8;
    if (!r.width || (w <= r.width * 1.5 && hh <= r.height * 1.5)) return null;
    const boxes = [...this.at.boxes.values()].map(([x, y, bw, bh]) => s("rect", { x, y, width: bw, height: bh }));
    const view = s("rect", { class: "jl-mini-view" });
    const mini = s("svg", { viewBox: `-4 -4 ${w} ${hh}`, preserveAspectRatio: "xMidYMid meet" }, s("g", { class: "jl-mini-boxes" }, boxes), view);
    const box = h("div", { class: "jl-minimap", title: "overview: click to go there" });
    box.append(mini);
    mini.addEventListener("click", (evt) => {
      const pt = mini.createSVGPoint();
      pt.x = evt.clientX;
      pt.y = evt.clientY;
      const p = pt.matrixTransform(mini.getScreenCTM().inverse());
      const cur = this.pz.get();
      this.pz.set({ ...cur, x: p.x - cur.w / 2, y: p.y - cur.h / 2 });
    });
    this.canvas.append(box);
    return view;
  }

  moveMini(vb) {
    if (!this.mini) return;
    const r = this.svg.getBoundingClientRect();
    const scale = Math.max(vb.w / (r.width || 1), vb.h / (r.height || 1));
    const w = (r.width || vb.w) * scale;
    const hh = (r.height || vb.h) * scale;
    this.mini.setAttribute("x", vb.x - (w - vb.w) / 2);
    this.mini.setAttribute("y", vb.y - (hh - vb.h) / 2);
    this.mini.setAttribute("width", w);
    this.mini.setAttribute("height", hh);
  }

  // The whole drawing when its labels stay readable (9 px or more), never blown up past 12 px (a few boxes
  // would fill the canvas, and what opens in place would dwarf it); else the drawing at 9 px, from its top
  // and around what was opened last, the rest reached by dragging or the overview.
  fit() {
    if (!this.pz) return;
    const r = this.svg.getBoundingClientRect();
    const [w, hh] = [this.at.width + 8, this.at.height + 8];
    const whole = Math.min(r.width / w, r.height / hh) * LABEL_UNITS;
    if (r.width && whole > MAX_LABEL_PX) {
      const k = MAX_LABEL_PX / LABEL_UNITS;
      this.pz.set({ x: -4 + (w - r.width / k) / 2, y: -4 + (hh - r.height / k) / 2, w: r.width / k, h: r.height / k });
      return;
    }
    if (!r.width || whole >= MIN_LABEL_PX) { this.pz.fit(); return; }
    const k = MIN_LABEL_PX / LABEL_UNITS;
    const [vw, vh] = [r.width / k, r.height / k];
    const box = (this.focus && this.boxOf(this.focus)) || [-4, -4, w, 0];
    const clamp = (v, lo, hi) => Math.max(lo, Math.min(v, Math.max(lo, hi)));
    const x = vw >= w ? -4 + (w - vw) / 2 : clamp(box[0] + box[2] / 2 - vw / 2, -4, w - 4 - vw);
    const y = clamp(box[1] - 20, -4, hh - 4 - vh);
    this.pz.set({ x, y, w: vw, h: vh });
  }

  elementFor(uid) {
    const leaf = this.leaves.get(`op_${uid}`);
    if (leaf && !this.isHidden(leaf)) return this.byId.get(this.repOf(leaf));
    const op = this.data.ops[String(uid)];
    if (op && op.group !== null && op.group !== undefined) {
      const group = this.containers.get(`grp_${op.group}`);
      if (group) return this.byId.get(this.repOf(group.children[0]));
    }
    return null;
  }

  onClick(evt) {
    const node = evt.target.closest("g.node");
    const cluster = evt.target.closest("g.cluster");
    this.tip.hide();
    if (node && uidOf(node.id) !== null) {
      const uid = uidOf(node.id);
      this.focus = node.id;
      this.crumbs();
      this.ctx.select({ kind: "op", uids: [uid], label: `${this.data.ops[String(uid)]?.name || "op"} #${uid}`, source: "graph" });
    } else if (node && this.containers.has(node.id)) {
      const c = this.containers.get(node.id);
      if (c.kind === "group") {
        const gid = Number(c.id.slice(4));
        const g = this.data.groups.find((x) => x.id === gid);
        this.ctx.select({ kind: "group", id: gid, uids: g ? g.ops : [], label: `group ${gid}`, source: "graph" });
      }
      this.toggle(node.id, true);
    } else if (cluster && this.containers.has(cluster.id) && evt.target.closest("text, rect") && evt.target.parentNode === cluster) {
      this.toggle(cluster.id, false);
    }
  }

  onHover(evt) {
    const node = evt.target.closest("g.node");
    const cluster = node ? null : evt.target.closest("g.cluster");
    if (cluster && this.containers.has(cluster.id)) {
      const c = this.containers.get(cluster.id);
      this.tip.show(evt, h("div", { class: "jl-details" }, ...c.label.split("\n").map((l) => h("div", {}, l)), this.scopeFigures(c),
        h("div", { class: "jl-muted" }, "click the frame to collapse")));
      return;
    }
    if (!node) { this.tip.hide(); return; }
    const c = this.containers.get(node.id);
    if (uidOf(node.id) !== null) this.tip.show(evt, opDetails(this.data, uidOf(node.id), (this.graph.folded || {})[node.id]));
    else if (c && c.kind === "group") this.tip.show(evt, groupDetails(this.data, Number(c.id.slice(4))));
    else if (c) this.tip.show(evt, h("div", { class: "jl-details" }, ...c.label.split("\n").map((l) => h("div", {}, l)), this.scopeFigures(c), h("div", { class: "jl-muted" }, "click to expand")));
    else this.tip.show(evt, h("div", {}, node.querySelector("text")?.textContent || node.id));
  }

  // What the data says about a scope (bytes, bytes live at the peak, measured time), when it says it.
  // A stage gathered in the browser has no entry of its own: its blocks' figures summed.
  scopeFigures(c) {
    const scopes = this.data.scopes || {};
    const each = c.stage ? c.children.map((x) => scopes[x.path]) : [c.kind === "scope" ? scopes[c.path] : null];
    if (!each.length || !each.every(Boolean)) return null;
    const sum = (key) => (each.every((x) => typeof x[key] === "number") ? each.reduce((a, x) => a + x[key], 0) : null);
    const sc = { op_count: sum("op_count"), bytes: sum("bytes"), peak_bytes: sum("peak_bytes"), seconds: sum("seconds") };
    const parts = [typeof sc.op_count === "number" ? plural(sc.op_count, "op") : "? ops"];
    if (typeof sc.bytes === "number") parts.push(`writes ${fmtBytes(sc.bytes)}`);
    if (typeof sc.peak_bytes === "number") parts.push(`${fmtBytes(sc.peak_bytes)} live at the peak`);
    if (typeof sc.seconds === "number") parts.push(`${fmtSec(sc.seconds)} per call`);
    return h("div", {}, parts.join(" · "));
  }

  highlight(sel, reveal) {
    if (!this.svg) return;
    this.svg.querySelectorAll(".selected").forEach((el) => el.classList.remove("selected"));
    const targets = (sel && sel.uids ? sel.uids : []).map((u) => this.elementFor(u)).filter(Boolean);
    targets.forEach((el) => el.classList.add("selected"));
    if (reveal && targets.length && sel.source !== "graph" && this.svg.isConnected) this.centerOn(targets[0].id);
  }

  centerOn(id) {
    const box = this.boxOf(id);
    if (!box || !this.pz) return;
    const r = this.svg.getBoundingClientRect();
    const cur = this.pz.get();
    const scale = Math.max(1, Math.min(r.width / cur.w, r.height / cur.h));
    const w = (r.width || 900) / scale;
    const hh = (r.height || 560) / scale;
    this.pz.set({ x: box[0] + box[2] / 2 - w / 2, y: box[1] + box[3] / 2 - hh / 2, w, h: hh });
  }

  // Marks every match and lists them (exact first, then those that only contain the query); typing
  // moves nothing. Enter goes to the first match, then the next; Shift+Enter the previous.
  find(query, step) {
    const q = query.trim().toLowerCase();
    if (step === 0 || q !== this.lastQuery) {
      this.found = matches(this.leaves.values(), q, this.showBookkeeping);
      this.matches = [...this.found.exact, ...this.found.partial];
      this.matchAt = -1;
      this.lastQuery = q;
      this.markMatches();
    }
    if (step === 0 || !this.matches.length) {
      const { exact, partial } = this.found;
      this.status.textContent = !q ? "" : !this.matches.length ? " no match"
        : ` ${exact.length} exact${partial.length ? `, ${partial.length} also contain it` : ""} · Enter: go to the first`;
      this.listMatches(q);
      return;
    }
    this.goTo((this.matchAt + (step || 1) + this.matches.length) % this.matches.length);
  }

  // Goes to match `k`: reveals it, says which it is, and selects it so every view shows it (its
  // group's fusion decisions, the pass and rule that made it, its kernel, its buffers, its repro).
  goTo(k) {
    this.matchAt = k;
    const leaf = this.matches[k];
    this.reveal(leaf);
    const exact = k < this.found.exact.length;
    this.status.textContent = ` match ${k + 1} of ${this.matches.length}${exact ? "" : " (contains it; not an exact match)"}`;
    this.listMatches(this.lastQuery);
    const uid = uidOf(leaf.id);
    if (uid !== null) this.ctx.select({ kind: "op", uids: [uid], label: `${leaf.op.name} #${uid}`, source: "graph" });
  }

  // The list shows while the search box has the focus; its current row scrolled to within the list only
  // (scrollIntoView would scroll the page too, and lay out the whole drawing to do it).
  // Built only then: a search run by a script or a jump needs no list.
  listMatches(q = this.lastQuery) {
    const shown = Boolean(q && this.matches.length) && document.activeElement === this.search;
    this.matchEl.replaceChildren(...(shown ? matchList(this.found, q, this.matchAt, (k) => this.goTo(k)) : []));
    this.matchEl.hidden = !shown;
    const current = shown ? this.matchEl.querySelector(".jl-match-current") : null;
    if (current) this.matchEl.scrollTop = Math.max(0, current.offsetTop - this.matchEl.clientHeight / 2);
  }

  // Expands whatever hides a leaf (and shows it if it is bookkeeping), then centres on it.
  reveal(leaf) {
    this.focus = leaf.id;
    if (leaf.book && !this.showBookkeeping) {
      this.showBookkeeping = true;
      const box = this.el.querySelector(".jl-bookkeeping");
      if (box) box.checked = true;
    }
    for (let c = leaf.parent; c && c !== this.root; c = c.parent) this.expanded.add(c.id);
    this.render(true);
    this.svg.querySelectorAll(".current-match").forEach((el) => el.classList.remove("current-match"));
    this.byId.get(leaf.id)?.classList.add("current-match");
    this.centerOn(leaf.id);
  }

  markMatches() {
    if (!this.svg) return;
    this.svg.querySelectorAll(".match").forEach((el) => el.classList.remove("match"));
    for (const leaf of this.matches) {
      if (this.isHidden(leaf)) continue;
      this.byId.get(this.repOf(leaf))?.classList.add("match");
    }
    this.el.dataset.matches = String(this.matches.length);
  }

  // Numbers each op (or a collapsed part: its first and last step) by its place in the order.
  showOrder(stepOf) {
    this.options.stepOf = stepOf;
    if (!this.svg) return;
    this.svg.querySelectorAll(".jl-badge").forEach((b) => b.remove());
    const ranges = new Map();
    for (const [uid, step] of Object.entries(stepOf)) {
      const el = this.elementFor(Number(uid));
      if (!el || !el.classList.contains("node")) continue;
      const r = ranges.get(el) || [step, step];
      ranges.set(el, [Math.min(r[0], step), Math.max(r[1], step)]);
    }
    for (const [el, [lo, hi]] of ranges) {
      const box = this.boxOf(el.id);
      if (!box) continue;
      const text = lo === hi ? `${lo}` : `${lo}–${hi}`;
      const w = 7 + 6.2 * text.length;
      el.append(s("g", { class: "jl-badge" },
        s("rect", { x: box[0] - 6, y: box[1] - 7, width: w, height: 13, rx: 6 }),
        s("text", { x: box[0] - 6 + w / 2, y: box[1] + 2.5, "text-anchor": "middle" }, text)));
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
    this.canvasHeight = this.canvas.clientHeight || 560;
    if (!this.leaves.size) { this.canvas.replaceChildren(h("div", { class: "jl-empty" }, "No graph recorded.")); return; }
    const t0 = performance.now();
    this.openToFit();
    this.render(false);
    this.fit();
    this.status.textContent = ` drawn in ${fmtSec((performance.now() - t0) / 1000)}`;
  }
}

Object.assign(GraphView.prototype, treeMethods, overlayMethods);

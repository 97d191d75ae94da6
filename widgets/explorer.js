// The explorer: one tab per view (or one view alone), all linked through the shared
// selection. Loaded by anywidget in a notebook, and inlined by the static HTML export.

import { CompareView } from "./compare.js";
import { fmtSec, h, makeContext, plural, recolor, staticModel } from "./core.js";
import { FusionView } from "./fusion.js";
import { GraphView } from "./graph.js";
import { KernelsView } from "./kernels.js";
import { MemoryView } from "./memory.js";
import { PassesView } from "./passes.js";
import { ReproAction } from "./repro.js";
import { ScheduleView } from "./schedule.js";
import { SessionView } from "./session.js";

const VIEWS = {
  graph: ["Graph", (ctx) => new GraphView(ctx), (d) => d.graph ? d.graph.nodes : 0],
  passes: ["Passes", (ctx) => new PassesView(ctx), (d) => (d.passes || []).length],
  fusion: ["Fusion", (ctx) => new FusionView(ctx), (d) => d.fusion ? d.fusion.decisions.filter((x) => !x.fused).length + d.fusion.rejected.length : 0],
  schedule: ["Schedule", (ctx) => new ScheduleView(ctx), (d) => d.schedule ? d.schedule.order.length : 0],
  memory: ["Memory", (ctx) => new MemoryView(ctx), (d) => (d.memory ? 1 : 0)],
  kernels: ["Kernels", (ctx) => new KernelsView(ctx), (d) => (d.kernels || []).length],
  compare: ["Compare", (ctx) => new CompareView(ctx), (d) => (d.compare ? d.compare.labels.length : 0)],
  session: ["Session", (ctx) => new SessionView(ctx, (data, el) => render({ model: staticModel({ data, view: "all", selection: {} }), el })),
    (d) => (d.session ? d.session.compiles.length : 0)],
};

function header(ctx) {
  const d = ctx.data;
  const selected = h("span", { class: "jl-selection" });
  const clear = h("button", { class: "jl-btn", onclick: () => ctx.select({}) }, "clear");
  const show = (sel) => {
    selected.replaceChildren(sel && sel.label ? `selected: ${sel.label}` : "nothing selected");
    clear.disabled = !(sel && sel.label);
  };
  ctx.on("select", show);
  show(ctx.selection);
  // Ops as every view counts them: the final graph's computing ops (scopes[""].op_count), not every pass's snapshot.
  const ops = (d.scopes || {})[""] ? d.scopes[""].op_count : Object.keys(d.ops || {}).length;
  const facts = [d.level ? `${d.level} on ${d.target}` : "program (not compiled)", plural(ops, "op"),
    plural((d.groups || []).length, "group"), d.seconds && d.seconds.passes !== undefined ? `passes ${fmtSec(d.seconds.passes)}` : null];
  const repro = new ReproAction(ctx);
  return h("div", { class: "jl-header" }, h("b", { class: "jl-title" }, d.title || "jitlab"),
    h("span", { class: "jl-muted" }, facts.filter(Boolean).join(" · ")), h("span", { class: "jl-spacer" }), selected, repro.button, clear,
    (d.warnings || []).length ? h("div", { class: "jl-warn" }, d.warnings.join("; ")) : null, repro.panel);
}

function render({ model, el }) {
  const root = h("div", { class: "jl-explorer" });
  el.append(root);
  const ctx = makeContext(model, root);
  recolor(ctx.data);
  const only = model.get("view");
  const names = only && only !== "all" ? [only] : Object.keys(VIEWS).filter((k) => (k !== "compare" || ctx.data.compare) && k !== "session");
  const panes = {};
  const tabs = {};
  const body = h("div", { class: "jl-body" });
  const open = (name) => {
    for (const [k, pane] of Object.entries(panes)) {
      pane.hidden = k !== name;
      if (tabs[k]) tabs[k].classList.toggle("jl-active", k === name);
    }
    if (!panes[name].dataset.mounted) {
      panes[name].dataset.mounted = "1";
      VIEWS[name][1](ctx).mount(panes[name]);
    }
    root.dataset.view = name;
  };
  for (const name of names) {
    panes[name] = h("div", { class: `jl-pane jl-pane-${name}`, "data-view": name, hidden: true });
    body.append(panes[name]);
    if (names.length > 1) {
      const count = VIEWS[name][2](ctx.data);
      tabs[name] = h("button", { class: `jl-tab${count ? "" : " jl-tab-empty"}`, "data-tab": name, onclick: () => open(name) },
        VIEWS[name][0], count ? h("span", { class: "jl-count" }, count) : null);
    }
  }
  if (!ctx.data.session) root.append(header(ctx));
  if (names.length > 1) root.append(h("div", { class: "jl-tabs", role: "tablist" }, Object.values(tabs)));
  root.append(body);
  open(names[0]);
  return () => root.remove();
}

const explorerWidget = { render };
export default explorerWidget;

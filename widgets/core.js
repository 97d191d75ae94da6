// Shared helpers of the explorer views: DOM building, number formats, the selection
// that links every view, pan and zoom for SVG, and a stand-in model for static HTML.

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "html") el.innerHTML = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

const SVG_NS = "http://www.w3.org/2000/svg";

export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function fmtBytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  let v = n;
  while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i += 1; }
  return `${i === 0 ? v : v.toFixed(v < 10 ? 2 : 1)} ${units[i]}`;
}

export function fmtSec(x) {
  if (x === null || x === undefined) return "–";
  if (x < 1e-3) return `${(x * 1e6).toFixed(0)} µs`;
  if (x < 1) return `${(x * 1e3).toFixed(x < 0.01 ? 2 : 1)} ms`;
  return `${x.toFixed(2)} s`;
}

export function empty(text) {
  return h("div", { class: "jl-empty" }, text);
}

export function chip(color, label) {
  return h("span", { class: "jl-chip" }, h("span", { class: "jl-swatch", style: `background:${color}` }), label);
}

export function opName(data, uid) {
  const op = data.ops[String(uid)];
  return op ? `${op.name.replace(/^np\./, "")} #${uid}` : `op #${uid}`;
}

// The op uid a drawn box's id (`op_12`) stands for, or null.
export function uidOf(id) {
  return id && id.startsWith("op_") ? Number(id.slice(3)) : null;
}

// An op's scope path as a list of names.
export function scopeOf(op) {
  const sc = op && op.scope;
  return sc ? (Array.isArray(sc) ? sc : String(sc).split("/")).filter(Boolean) : [];
}

// Bytes of a printed tensor type (`f32[B,4]`) with these symbol values, or null.
const TYPE = /^(\w+)\[(.*)\]$/;
const ITEM = { f64: 8, i64: 8, u64: 8, c64: 8, c128: 16, f32: 4, i32: 4, u32: 4, f16: 2, bf16: 2, i16: 2, u16: 2, i8: 1, u8: 1, bool: 1 };

export function typeBytes(text, bindings) {
  const m = TYPE.exec(String(text || "").trim());
  if (!m || !(m[1] in ITEM)) return null;
  let n = ITEM[m[1]];
  for (const d of m[2].split(",").map((x) => x.trim()).filter(Boolean)) {
    const v = /^\d+$/.test(d) ? Number(d) : (bindings || {})[d];
    if (v === undefined) return null;
    n *= v;
  }
  return n;
}

// The ONNX node name or source line an op came from, as its `loc` says.
export function where(op) {
  const loc = op ? `${op.onnx || ""} ${op.loc || ""}` : "";
  const node = /node '([^']+)'/.exec(loc) || /node (#\d+)/.exec(op && op.onnx ? op.onnx : "");
  if (node) return node[1];
  const line = /([\w.-]+\.py):(\d+)/.exec(loc);
  return line ? `${line[1]}:${line[2]}` : "";
}

// A buffer by its value and the op that made it: `%r45 · conv2d (n44)`.
export function bufferLabel(data, b) {
  const op = b.producer !== null && b.producer !== undefined ? data.ops[String(b.producer)] : null;
  if (!op) return `%${b.name} · ${b.kind}`;
  let kind = op.name.replace(/^\w+\./, "");
  let place = where(op);
  if (place && /^backward of /.test(op.loc || "")) place = `backward of ${place}`;     // a gradient: the line it differentiates
  const g = op.name === "jit.group" ? (data.groups || []).find((x) => x.id === op.group) : null;
  if (g) {      // a group's result: name the group's main op and where it came from
    const members = g.ops.map((u) => data.ops[String(u)]).filter(Boolean);
    // Its main op: a contraction if it holds one (a conv with its folded norm is a conv, whichever pass made it),
    // else the first op the program itself wrote.
    const main = members.find((m) => /conv|matmul|dot|einsum/.test(m.name))
      || members.find((m) => (!m.origin || m.origin.pass === "trace") && !m.view) || members[members.length - 1];
    kind = `group ${g.id}: ${main ? main.name.replace(/^\w+\./, "") : "fused"}`;
    place = place || (main ? where(main) : "");
  }
  // Where in the model it was made: the scope path of its op, without the group level named already.
  const scope = String(b.path || "").split("/").filter((p) => p && !/^group \d+$/.test(p)).join("/");
  return `%${b.name} · ${scope ? `${scope} · ` : ""}${kind}${place ? ` (${place})` : ""}`;
}

// More groups than the palette has colours: hues a golden angle apart, so no two groups share one
// and neighbours (consecutive ids) differ most. Every view reads the same `colors`.
export function recolor(data) {
  const ids = Object.keys(data.colors || {}).map(Number).sort((a, b) => a - b);
  if (ids.length <= 12) return;
  ids.forEach((g, k) => { data.colors[String(g)] = `hsl(${((k * 137.508) % 360).toFixed(1)}, 60%, ${k % 2 ? 80 : 72}%)`; });
  for (const g of data.groups || []) g.color = data.colors[String(g.id)];
}

export function groupColor(data, gid) {
  return gid === null || gid === undefined ? null : data.colors[String(gid)] || null;
}

// A button-like link to an op that selects it in every view.
export function opLink(ctx, uid) {
  const op = ctx.data.ops[String(uid)];
  const color = op ? groupColor(ctx.data, op.group) : null;
  return h("a", { class: "jl-oplink", href: "#", "data-uid": uid,
                  style: color ? `border-left: 4px solid ${color}` : null,
                  onclick: (e) => { e.preventDefault(); ctx.select({ kind: "op", uids: [uid], label: opName(ctx.data, uid) }); } },
           opName(ctx.data, uid));
}

// The state every view shares: the data, the selection and the schedule step.
export function makeContext(model, root) {
  const listeners = { select: [], step: [], msg: [] };
  const ctx = {
    model, root,
    data: model.get("data"),
    isStatic: !!model.isStatic || !!model.get("data").static,
    step: 0,
    selection: model.get("selection") || {},
    on(kind, fn) { listeners[kind].push(fn); },
    select(sel) {
      model.set("selection", sel || {});
      model.save_changes();
    },
    setStep(step, source) {
      ctx.step = step;
      for (const fn of listeners.step) fn(step, source);
    },
    request(msg) { model.send(msg); },
  };
  model.on("change:selection", () => {
    ctx.selection = model.get("selection") || {};
    for (const fn of listeners.select) fn(ctx.selection);
  });
  model.on("msg:custom", (msg) => { for (const fn of listeners.msg) fn(msg); });
  return ctx;
}

// What the static HTML page gives the views instead of a widget model.
export function staticModel(state) {
  const listeners = {};
  return {
    isStatic: true,
    get: (key) => state[key],
    set(key, value) {
      state[key] = value;
      for (const fn of listeners[`change:${key}`] || []) fn();
    },
    save_changes() {},
    on(event, fn) { (listeners[event] = listeners[event] || []).push(fn); },
    off() {},
    send() {},
  };
}

// Wheel to zoom around the pointer, drag to pan, and a fit() to go back.
export function panZoom(svg, initial, onChange) {
  // A copy: viewBox.baseVal is live, and apply() rewrites it (fit() went back to where it already was).
  const base = svg.viewBox.baseVal;
  const whole = { x: base.x, y: base.y, w: base.width, h: base.height };
  const home = initial || { ...whole };
  let vb = { ...home };
  const apply = () => {
    svg.setAttribute("viewBox", `${vb.x} ${vb.y} ${vb.w} ${vb.h}`);
    if (onChange) onChange({ ...vb });
  };
  const toSvg = (evt) => {
    const r = svg.getBoundingClientRect();
    const scale = Math.max(vb.w / r.width, vb.h / r.height);
    const ox = (r.width * scale - vb.w) / 2;
    const oy = (r.height * scale - vb.h) / 2;
    return { x: vb.x - ox + (evt.clientX - r.left) * scale, y: vb.y - oy + (evt.clientY - r.top) * scale };
  };
  svg.addEventListener("wheel", (evt) => {
    evt.preventDefault();
    const p = toSvg(evt);
    const k = Math.exp(Math.sign(evt.deltaY) * 0.15);
    vb = { x: p.x - (p.x - vb.x) * k, y: p.y - (p.y - vb.y) * k, w: vb.w * k, h: vb.h * k };
    apply();
  }, { passive: false });
  let drag = null;
  svg.addEventListener("pointerdown", (evt) => {
    if (evt.button !== 0) return;
    drag = { start: toSvg(evt), vb: { ...vb }, moved: false, id: evt.pointerId };
  });
  svg.addEventListener("pointermove", (evt) => {
    if (!drag) return;
    const p = toSvg(evt);
    const dx = p.x - drag.start.x;
    const dy = p.y - drag.start.y;
    if (!drag.moved && Math.hypot(dx, dy) < 3 * (vb.w / svg.getBoundingClientRect().width || 1)) return;
    if (!drag.moved) svg.setPointerCapture(drag.id);
    drag.moved = true;
    vb = { ...vb, x: vb.x - dx, y: vb.y - dy };
    apply();
  });
  const end = () => {
    if (drag && drag.moved) svg.dataset.dragged = "1";
    drag = null;
  };
  svg.addEventListener("pointerup", end);
  svg.addEventListener("pointercancel", end);
  svg.addEventListener("click", (evt) => {
    if (svg.dataset.dragged) { evt.stopPropagation(); delete svg.dataset.dragged; }
  }, true);
  apply();
  return {
    fit() { vb = { ...whole }; apply(); },
    get: () => ({ ...vb }),
    set(view) { vb = { ...view }; apply(); },
    toSvg,
    home() { vb = { ...home }; apply(); },
    focus(box) {
      const w = Math.max(box.width * 3, home.w * 0.3);
      const hh = w * (home.h / home.w);
      vb = { x: box.x + box.width / 2 - w / 2, y: box.y + box.height / 2 - hh / 2, w, h: hh };
      apply();
    },
  };
}

export function tooltip(root) {
  const tip = h("div", { class: "jl-tip", role: "tooltip" });
  root.append(tip);
  return {
    show(evt, content) {
      tip.replaceChildren(content);
      tip.style.display = "block";
      const r = root.getBoundingClientRect();
      const x = Math.min(evt.clientX - r.left + 14, r.width - tip.offsetWidth - 4);
      tip.style.left = `${Math.max(0, x)}px`;
      tip.style.top = `${evt.clientY - r.top + 14}px`;
    },
    hide() { tip.style.display = "none"; },
  };
}

// The whole call's measured time, its steps' sum and the rest, each named (data.call_time); "" unprofiled.
export function callTimeText(data, short = false) {
  const t = data.call_time;
  if (!t) return "";
  if (short) {
    const rest = typeof t.gap_seconds === "number" ? ` = steps ${fmtSec(t.steps_seconds)} ${t.gap_seconds >= 0 ? "+" : "−"} host ${fmtSec(Math.abs(t.gap_seconds))}` : "";
    return `call ${fmtSec(t.call_seconds)}${rest}`;
  }
  const parts = [`call ${fmtSec(t.call_seconds)} (measured whole, median)`];
  if (typeof t.steps_seconds === "number") {
    parts.push(`${plural(t.steps, "step")} ${fmtSec(t.steps_seconds)} (kernels and ops, timed one by one)`);
    parts.push(t.gap_seconds >= 0 ? `host work between steps ${fmtSec(t.gap_seconds)}`
      : `timing each step cost ${fmtSec(-t.gap_seconds)} more than the whole call`);
  }
  return parts.join(" · ");
}

// "1 group", "3 groups"; `many` where adding an s is wrong ("launches").
export function plural(n, word, many = `${word}s`) {
  return `${n} ${n === 1 ? word : many}`;
}

// The graph view's layout in the browser, so that any mix of expanded and collapsed parts
// can be drawn without asking Python: the layered layout of jitlab/explore/layered.py
// (ranks by longest path, barycentre sweeps, centres pulled towards their neighbours),
// applied to each expanded part inside its own box first, then to its parent as one item.

const GLYPH_W = 6.2;
const TEXT_LINE_H = 12;
const BOX_PAD = 8;
const RANK_GAP_X = 14;
const RANK_GAP_Y = 28;
const CPAD = 8;
const CLABEL = 14;
const ORDER_SWEEPS = 4;
const BEND_WIDTH = 8;
const ARROW_LEN = 6;

function boxSize(label, shape) {
  const lines = label.split("\n");
  let w = Math.max(...lines.map((l) => l.length)) * GLYPH_W + 2 * BOX_PAD;
  let hh = lines.length * TEXT_LINE_H + BOX_PAD;
  if (shape === "ellipse") { w *= 1.2; hh += 6; }
  return [Math.max(w, 36), hh];
}

function topoOrder(ids, succ) {
  const indeg = new Map(ids.map((i) => [i, 0]));
  for (const i of ids) for (const s of succ.get(i)) indeg.set(s, indeg.get(s) + 1);
  const ready = ids.filter((i) => !indeg.get(i));
  const out = [];
  const seen = new Set();
  let rest = 0;
  while (out.length < ids.length) {
    if (!ready.length) {       // a cycle: break it at the first item not placed yet
      while (seen.has(ids[rest])) rest += 1;
      ready.push(ids[rest]);
    }
    const i = ready.shift();
    if (seen.has(i)) continue;
    seen.add(i);
    out.push(i);
    for (const s of succ.get(i)) {
      indeg.set(s, indeg.get(s) - 1);
      if (indeg.get(s) === 0) ready.push(s);
    }
  }
  return out;
}

function adjacency(ids, edges) {
  const preds = new Map(ids.map((i) => [i, []]));
  const succs = new Map(ids.map((i) => [i, []]));
  for (const [a, b] of edges) { succs.get(a).push(b); preds.get(b).push(a); }
  return [preds, succs];
}

const meanOf = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;

function fitLayer(layer, want, width, cx) {
  const placed = [];
  layer.forEach((i, k) => {
    let x = want[k];
    if (k) x = Math.max(x, placed[k - 1] + (width.get(layer[k - 1]) + width.get(i)) / 2 + RANK_GAP_X);
    placed.push(x);
  });
  const shift = meanOf(placed.map((p, k) => p - want[k]));
  layer.forEach((i, k) => cx.set(i, placed[k] - shift));
}

// Boxes (id -> [w, h]) laid out in ranks; an edge down several ranks bends through a point on each rank between.
// `pin` puts some items on the first rank (-1) or the last (1): a part's ports for edges from and to outside it.
function place(sizes, edges, pin = new Map()) {
  const ids = [...sizes.keys()];
  if (!ids.length) return { corners: new Map(), bends: new Map(), width: 0, height: 0 };
  const [, succ0] = adjacency(ids, edges);
  const order = topoOrder(ids, succ0);
  const at = new Map(order.map((i, k) => [i, k]));
  const forward = edges.filter(([a, b]) => at.get(a) < at.get(b));
  const [preds0, succs0] = adjacency(ids, forward);
  const rank = new Map(ids.map((i) => [i, 0]));
  for (const i of order) for (const s of succs0.get(i)) rank.set(s, Math.max(rank.get(s), rank.get(i) + 1));
  for (const i of ids) {        // sources sit just above their first user
    if (!preds0.get(i).length && succs0.get(i).length) rank.set(i, Math.min(...succs0.get(i).map((s) => rank.get(s))) - 1);
  }
  const free = ids.filter((i) => !pin.has(i));
  const lo = Math.min(...free.map((i) => rank.get(i)));
  const first = [...pin.values()].includes(-1) ? 1 : 0;
  for (const i of free) rank.set(i, rank.get(i) - lo + first);
  const last = Math.max(0, ...free.map((i) => rank.get(i))) + 1;
  for (const [i, side] of pin) rank.set(i, side < 0 ? 0 : last);
  const size = new Map(sizes);
  const via = new Map();
  const steps = [];
  for (const [a, b] of forward) {
    const span = rank.get(b) - rank.get(a);
    if (span <= 1) { if (span === 1) steps.push([a, b]); continue; }
    const points = [];
    for (let r = rank.get(a) + 1; r < rank.get(b); r += 1) {
      const p = `\0${a}>${b}#${r}`;
      points.push(p);
      size.set(p, [BEND_WIDTH, 0]);
      rank.set(p, r);
    }
    via.set(`${a}\n${b}`, points);
    [a, ...points].forEach((p, k) => steps.push([p, k < points.length ? points[k] : b]));
  }
  const all = [...size.keys()];
  const layers = Array.from({ length: Math.max(...rank.values()) + 1 }, () => []);
  for (const i of [...order, ...[...via.values()].flat()]) layers[rank.get(i)].push(i);
  const [preds, succs] = adjacency(all, steps);
  const index = new Map();
  layers.forEach((layer) => layer.forEach((i, k) => index.set(i, k)));
  for (let sweep = 0; sweep < ORDER_SWEEPS; sweep += 1) {
    const down = sweep % 2 === 0;
    const nbrs = down ? preds : succs;
    const seq = down ? layers.slice(1) : layers.slice(0, -1).reverse();
    for (const layer of seq) {
      const key = new Map(layer.map((i) => [i, nbrs.get(i).length ? meanOf(nbrs.get(i).map((j) => index.get(j))) : index.get(i)]));
      layer.sort((a, b) => key.get(a) - key.get(b));
      layer.forEach((i, k) => index.set(i, k));
    }
  }
  const width = new Map(all.map((i) => [i, size.get(i)[0]]));
  const cx = new Map();
  for (const layer of layers) fitLayer(layer, layer.map(() => 0), width, cx);
  for (let sweep = 0; sweep < 2 * ORDER_SWEEPS; sweep += 1) {
    for (const layer of sweep % 2 === 0 ? layers : [...layers].reverse()) {
      const want = layer.map((i) => {
        const n = [...preds.get(i), ...succs.get(i)];
        return n.length ? meanOf(n.map((j) => cx.get(j))) : cx.get(i);
      });
      fitLayer(layer, want, width, cx);
    }
  }
  const left = Math.min(...all.map((i) => cx.get(i) - size.get(i)[0] / 2));
  const corners = new Map();
  let y = 0;
  for (const layer of layers) {
    const height = Math.max(0, ...layer.map((i) => size.get(i)[1]));
    for (const i of layer) corners.set(i, [cx.get(i) - size.get(i)[0] / 2 - left, y + (height - size.get(i)[1]) / 2]);
    y += height + RANK_GAP_Y;
  }
  const bends = new Map([...via].map(([e, ps]) => [e, ps.map((p) => [corners.get(p)[0] + BEND_WIDTH / 2, corners.get(p)[1]])]));
  const w = Math.max(...all.map((i) => corners.get(i)[0] + size.get(i)[0]));
  return { corners, bends, width: w, height: Math.max(y - RANK_GAP_Y, 0) };
}

// Lays out a tree of units: {id, label, shape, classes, fill} boxes and {id, label, children, fill} expanded parts.
// `edges` join box ids. An edge into or out of a part goes through a port on the part's first or last rank, so
// that inside the part it is routed around the boxes like any other long edge. Returns absolute boxes by id
// (parts too), each edge's bend points, and the size.
export function arrange(units, edges) {
  const shift = (points, dx, dy) => points.map(([x, y]) => [x + dx, y + dy]);
  const lay = (list) => {
    const top = new Map();       // leaf id -> the unit of `list` holding it
    const inner = new Map();
    const sizes = new Map();
    for (const u of list) {
      if (u.children) {
        const sub = lay(u.children);
        inner.set(u.id, sub);
        sizes.set(u.id, [Math.max(sub.width + 2 * CPAD, u.label.length * GLYPH_W + 2 * CPAD), sub.height + 2 * CPAD + CLABEL]);
        for (const id of sub.members) top.set(id, u.id);
      } else {
        sizes.set(u.id, boxSize(u.label, u.shape));
        top.set(u.id, u.id);
      }
    }
    const pairs = new Map();
    const ins = new Set();
    const outs = new Set();
    for (const [a, b] of edges) {
      const ua = top.get(a);
      const ub = top.get(b);
      if (ua !== undefined && ub !== undefined) { if (ua !== ub) pairs.set(`${ua}\n${ub}`, [ua, ub]); }
      else if (ub !== undefined) ins.add(ub);
      else if (ua !== undefined) outs.add(ua);
    }
    const pin = new Map();
    const links = [...pairs.values()];
    for (const u of ins) { sizes.set(`\0in\n${u}`, [BEND_WIDTH, 0]); pin.set(`\0in\n${u}`, -1); links.push([`\0in\n${u}`, u]); }
    for (const u of outs) { sizes.set(`\0out\n${u}`, [BEND_WIDTH, 0]); pin.set(`\0out\n${u}`, 1); links.push([u, `\0out\n${u}`]); }
    const placed = place(sizes, links, pin);
    const port = (id) => [placed.corners.get(id)[0] + BEND_WIDTH / 2, placed.corners.get(id)[1]];
    const local = new Map();
    const localBends = new Map();
    const subOffset = new Map();
    for (const u of list) {
      const [x, y] = placed.corners.get(u.id);
      const [w, hh] = sizes.get(u.id);
      local.set(u.id, [x, y, w, hh]);
      const sub = inner.get(u.id);
      if (!sub) continue;
      const dx = x + CPAD;
      const dy = y + CPAD + CLABEL;
      subOffset.set(u.id, [dx, dy]);
      for (const [id, [bx, by, bw, bh]] of sub.local) local.set(id, [bx + dx, by + dy, bw, bh]);
      for (const [e, ps] of sub.localBends) localBends.set(e, shift(ps, dx, dy));
    }
    // The way from a unit's port down into a leaf, and from a leaf out to its unit's port, through inner parts.
    const into = (leaf) => {
      const u = top.get(leaf);
      const sub = inner.get(u);
      return sub && sub.into.has(leaf) ? shift(sub.into.get(leaf), ...subOffset.get(u)) : [];
    };
    const outOf = (leaf) => {
      const u = top.get(leaf);
      const sub = inner.get(u);
      return sub && sub.outOf.has(leaf) ? shift(sub.outOf.get(leaf), ...subOffset.get(u)) : [];
    };
    const intoChain = new Map();
    const outChain = new Map();
    for (const [a, b] of edges) {
      const ua = top.get(a);
      const ub = top.get(b);
      if (ua !== undefined && ub !== undefined && ua !== ub) {
        localBends.set(`${a}\n${b}`, [...outOf(a), ...(placed.bends.get(`${ua}\n${ub}`) || []), ...into(b)]);
      } else if (ua === undefined && ub !== undefined && !intoChain.has(b)) {
        intoChain.set(b, [port(`\0in\n${ub}`), ...(placed.bends.get(`\0in\n${ub}\n${ub}`) || []), ...into(b)]);
      } else if (ub === undefined && ua !== undefined && !outChain.has(a)) {
        outChain.set(a, [...outOf(a), ...(placed.bends.get(`${ua}\n\0out\n${ua}`) || []), port(`\0out\n${ua}`)]);
      }
    }
    return { local, localBends, into: intoChain, outOf: outChain, members: [...top.keys()], width: placed.width, height: placed.height };
  };
  const out = lay(units);
  return { boxes: out.local, bends: out.localBends, width: out.width, height: out.height };
}

const fmtNum = (v) => (Math.round(v * 100) / 100).toString();
const escapeXml = (t) => String(t).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

function boxOutline(u, [x, y, w, hh]) {
  const fill = u.fill ? ` style="fill:${u.fill}"` : "";
  if (u.shape === "ellipse") return `<ellipse${fill} cx="${fmtNum(x + w / 2)}" cy="${fmtNum(y + hh / 2)}" rx="${fmtNum(w / 2)}" ry="${fmtNum(hh / 2)}"/>`;
  if (u.shape === "box3d") {
    return `<path${fill} d="M${fmtNum(x)},${fmtNum(y + 3)}h${fmtNum(w - 3)}v${fmtNum(hh - 3)}h${fmtNum(3 - w)}z"/>` +
      `<path style="fill:none" d="M${fmtNum(x)},${fmtNum(y + 3)}l3,-3h${fmtNum(w - 3)}v${fmtNum(hh - 3)}l-3,3M${fmtNum(x + w - 3)},${fmtNum(y + 3)}l3,-3"/>`;
  }
  const r = 4;
  return `<path${fill} d="M${fmtNum(x + r)},${fmtNum(y)}h${fmtNum(w - 2 * r)}q${r},0 ${r},${r}v${fmtNum(hh - 2 * r)}q0,${r} -${r},${r}` +
    `h${fmtNum(2 * r - w)}q-${r},0 -${r},-${r}v${fmtNum(2 * r - hh)}q0,-${r} ${r},-${r}z"/>`;
}

function boxText(label, [x, y, w, hh]) {
  const lines = label.split("\n");
  const top = y + hh / 2 - (lines.length * TEXT_LINE_H) / 2;
  return lines.map((l, k) => `<text text-anchor="middle" x="${fmtNum(x + w / 2)}" y="${fmtNum(top + (k + 0.75) * TEXT_LINE_H)}">${escapeXml(l)}</text>`).join("");
}

function edgePath(src, dst, bends) {
  const tip = [dst[0] + dst[2] / 2, dst[1] - ARROW_LEN];
  const pts = [[src[0] + src[2] / 2, src[1] + src[3]], ...bends, tip];
  let d = `M${fmtNum(pts[0][0])},${fmtNum(pts[0][1])}`;
  for (let k = 1; k < pts.length; k += 1) {
    const [x0, y0] = pts[k - 1];
    const [x1, y1] = pts[k];
    const bend = Math.max(Math.abs(y1 - y0) / 2, 12);
    d += ` C${fmtNum(x0)},${fmtNum(y0 + bend)} ${fmtNum(x1)},${fmtNum(y1 - bend)} ${fmtNum(x1)},${fmtNum(y1)}`;
  }
  const [x, y] = tip;
  return `<path d="${d}"/><polygon points="${fmtNum(x - 2.5)},${fmtNum(y)} ${fmtNum(x)},${fmtNum(y + ARROW_LEN)} ${fmtNum(x + 2.5)},${fmtNum(y)}"/>`;
}

// SVG text for an arranged tree: parts as clusters (outermost first), edges, then boxes on top.
export function toSvg(units, edges, at) {
  const parts = [];
  const nodes = [];
  const walk = (list, depth) => {
    for (const u of list) {
      const box = at.boxes.get(u.id);
      if (u.children) {
        const [x, y, w, hh] = box;
        const fill = u.fill ? ` style="fill:${u.fill};stroke:${u.fill}"` : "";
        parts.push(`<g id="${escapeXml(u.id)}" class="cluster ${escapeXml(u.classes || "")}" data-depth="${depth}"><rect${fill} x="${fmtNum(x)}" y="${fmtNum(y)}" width="${fmtNum(w)}" height="${fmtNum(hh)}" rx="6"/>` +
          `<text x="${fmtNum(x + 6)}" y="${fmtNum(y + CPAD + 6)}">${escapeXml(u.label)}</text></g>`);
        walk(u.children, depth + 1);
      } else {
        nodes.push(`<g id="${escapeXml(u.id)}" class="node ${escapeXml(u.classes || "")}">${boxOutline(u, box)}${boxText(u.label, box)}</g>`);
      }
    }
  };
  walk(units, 0);
  const lines = edges.map(([a, b]) => `<g id="${escapeXml(`e_${a}__${b}`)}" class="edge">${edgePath(at.boxes.get(a), at.boxes.get(b), at.bends.get(`${a}\n${b}`) || [])}</g>`);
  const w = at.width + 8;
  const hh = at.height + 8;
  return `<svg xmlns="http://www.w3.org/2000/svg" viewBox="-4 -4 ${fmtNum(w)} ${fmtNum(hh)}" data-layout="browser" font-family="Helvetica,sans-serif" font-size="10">` +
    `<g class="graph">${parts.join("")}${lines.join("")}${nodes.join("")}</g></svg>`;
}

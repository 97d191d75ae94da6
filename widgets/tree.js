// The Graph view's hierarchy, mixed into GraphView: leaves (drawable ops, inputs, outputs) under
// scopes (the call stack the ops carry), stages gathering a function's repeated calls, parts cut where
// one value flows on (loose ops only: a scope is never cut), then fusion groups; and each box's label.

import { plural, scopeOf, uidOf, where } from "./core.js";
import { heaviestKinds } from "./labels.js";

const SCOPE_CHILDREN = 16;        // boxes a scope opens onto before its loose ops are gathered into parts

export const treeMethods = {
  // Leaves (drawable ops, inputs, outputs) and the containers above them.
  build() {
    const view = this.graph.view || { nodes: [], edges: [] };
    this.leaves = new Map();
    view.nodes.forEach(([id, label, kind, group, classes, region], order) => {
      const op = this.data.ops[String(uidOf(id))];
      const book = kind === "op" && !!op && (op.bookkeeping ?? (op.name.startsWith("mem.") || !!op.view));
      this.leaves.set(id, { id, label, kind, group, classes: classes || [], order, op, book, parent: null, region: region || null });
    });
    this.edges = view.edges.filter(([a, b]) => this.leaves.has(a) && this.leaves.has(b));
    this.containers = new Map();
    const root = { id: "root", kind: "root", children: [], parent: null };
    this.root = root;
    const container = (id, kind, label, parent) => {
      if (!this.containers.has(id)) {
        const c = { id, kind, label, children: [], parent, order: Infinity };
        this.containers.set(id, c);
        parent.children.push(c);
      }
      return this.containers.get(id);
    };
    const scopeNode = (path) => {
      let node = root;
      path.forEach((name, k) => {
        node = container(`sc_${path.slice(0, k + 1).join("/")}`, "scope", name, node);
        Object.assign(node, { name, path: path.slice(0, k + 1).join("/") });
      });
      return node;
    };
    // A control-flow op's box (and each of its regions') sits where the op does: in its enclosing region, else its scope.
    const regions = view.regions || {};
    const regionNode = (boxId) => {
      if (this.containers.has(boxId)) return this.containers.get(boxId);
      const r = regions[boxId];
      const parent = r.parent ? regionNode(r.parent) : scopeNode(scopeOf(this.data.ops[String(r.uid)]));
      return Object.assign(container(boxId, r.kind, r.label, parent), { region: r });
    };
    const groupScopes = new Map();
    for (const leaf of this.leaves.values()) {
      if (leaf.region || leaf.group === null || leaf.group === undefined) continue;
      const path = scopeOf(leaf.op);
      const prev = groupScopes.get(leaf.group);
      if (!prev) { groupScopes.set(leaf.group, path); continue; }
      let k = 0;
      while (k < prev.length && k < path.length && prev[k] === path[k]) k += 1;
      groupScopes.set(leaf.group, prev.slice(0, k));
    }
    for (const leaf of this.leaves.values()) {
      let parent;
      if (leaf.region && regions[leaf.region]) {
        parent = regionNode(leaf.region);
      } else if (leaf.group !== null && leaf.group !== undefined) {
        parent = container(`grp_${leaf.group}`, "group", `group ${leaf.group}`, scopeNode(groupScopes.get(leaf.group)));
      } else {
        parent = leaf.kind === "op" ? scopeNode(scopeOf(leaf.op)) : root;
      }
      leaf.parent = parent;
      parent.children.push(leaf);
    }
    const first = (node) => {
      if (!node.children) return node.order;
      node.order = Math.min(Infinity, ...node.children.map(first));
      return node.order;
    };
    first(root);
    this.groupIds = [...this.containers.values()].filter((c) => c.kind === "group").map((c) => Number(c.id.slice(4))).sort((a, b) => a - b);
    this.groupLabels();
    for (const c of this.containers.values()) {
      if (c.kind === "scope") c.label = this.scopeLabel(c);
      else if (c.region) c.label = this.regionLabel(c);
    }
    this.parts = 0;
    // Seven parts stacked, with the inputs above and the results below, fit a 620 px canvas at scale 1 (10 px labels).
    this.maxChildren = 7;
    this.split(root);
    for (const c of this.containers.values()) c.children.sort((a, b) => a.order - b.order);
    root.children.sort((a, b) => a.order - b.order);
    this.expanded = new Set();
  },

  groupLabels() {
    for (const c of this.containers.values()) {
      if (c.kind !== "group") continue;
      const names = c.children.filter((l) => !l.book).map((l) => l.label.split("\n")[0]);
      const uniq = [...new Set(names)];
      c.label = `${c.label}\n${uniq.slice(0, 3).join(", ")}${uniq.length > 3 ? ", …" : ""}`;
    }
  },

  leavesOf(node, out = []) {
    if (!node.children) out.push(node);
    else for (const c of node.children) this.leavesOf(c, out);
    return out;
  },

  // Splits a container with too many children: numbered sibling scopes (res2_0, res2_1…) gathered
  // under their stem first, then the smallest neighbours merged into parts until few enough remain.
  split(node) {
    if (!node.children || node.kind === "group" || node.bundle) return;
    const ends = node === this.root ? node.children.filter((c) => c.kind === "input" || c.kind === "output") : [];
    const keep = ["input", "output"].flatMap((kind) => this.bundle(node, ends.filter((c) => c.kind === kind), kind));
    let kids = node.children.filter((c) => !ends.includes(c)).sort((a, b) => a.order - b.order);
    const shown = (list) => list.reduce((a, c) => a + (c.children || !c.book ? 1 : 0), 0);
    // The root keeps few boxes; a scope opened in place may hold more (Fit keeps them readable), so the
    // ops a function wrote stay its own children rather than parts cut by line.
    const limit = node === this.root ? this.maxChildren : node.stage ? 4 * SCOPE_CHILDREN : SCOPE_CHILDREN;
    if (!node.stage && shown(kids) > this.maxChildren) kids = this.stages(node, kids);
    if (shown(kids) > limit) kids = this.merge(node, kids, limit);
    node.children = [...keep, ...kids];
    for (const c of node.children) if (c.children) this.split(c);
  },

  // Runs of sibling scopes named stem_0, stem_1… (or stem, stem_1… for repeated calls) under one scope named stem.
  stages(node, all) {
    const kids = all.filter((c) => c.children || !c.book);
    const stem = (c) => (c.kind === "scope" ? (/^(.+?)_\d+$/.exec(c.name) || [null, c.name])[1] : null);
    const out = [];
    for (let k = 0; k < kids.length;) {
      let e = k + 1;
      while (stem(kids[k]) !== null && e < kids.length && stem(kids[e]) === stem(kids[k])) e += 1;
      const run = kids.slice(k, e);
      if (run.length >= 2 && !kids.some((c) => c.kind === "scope" && c.name === stem(run[0]) && !run.includes(c))) {
        const path = node.path ? `${node.path}/${stem(run[0])}` : node === this.root ? stem(run[0]) : `${node.id}/${stem(run[0])}`;     // unique under a part too
        const stage = { id: `st_${path}`, kind: "scope", stage: true, name: stem(run[0]), path, children: run, parent: node, order: run[0].order };
        for (const c of run) c.parent = stage;
        stage.label = this.scopeLabel(stage);
        this.containers.set(stage.id, stage);
        out.push(stage);
      } else out.push(...run);
      k = e;
    }
    return [...out, ...all.filter((c) => !c.children && c.book)].sort((a, b) => a.order - b.order);
  },

  // Merges the neighbours holding the fewest ops (where more values flow between them first) until `limit`
  // remain; a scope is never merged into a part (the tree follows the call stack), so more may remain.
  // Bookkeeping ops (hidden by default) go into the part whose span holds them, else stay where they were.
  merge(node, all, limit) {
    const kids = all.filter((c) => c.children || !c.book);
    const index = new Map();
    kids.forEach((c, k) => { for (const l of this.leavesOf(c)) index.set(l.id, k); });
    const lastUse = kids.map((_, k) => k);
    for (const [a, b] of this.edges) {
      const ka = index.get(a);
      const kb = index.get(b);
      if (ka !== undefined && kb !== undefined && kb > lastUse[ka]) lastUse[ka] = kb;
    }
    const crossing = new Array(kids.length + 1).fill(0);       // sources still used past each cut
    lastUse.forEach((last, k) => { for (let b = k + 1; b <= last; b += 1) crossing[b] += 1; });
    const size = (c) => Math.max(1, this.leavesOf(c).filter((l) => l.op && !l.book).length);
    const runs = kids.map((c, k) => ({ members: [c], ops: size(c), start: k }));
    const scoped = (run) => run.members.some((c) => c.kind === "scope" || c.region);
    while (runs.length > limit) {
      let best = -1;
      const score = (k) => [runs[k].ops + runs[k + 1].ops, -crossing[runs[k + 1].start]];
      for (let k = 0; k + 1 < runs.length; k += 1) {
        if (scoped(runs[k]) || scoped(runs[k + 1])) continue;
        const [a, b] = score(k);
        const [c, d] = best < 0 ? [Infinity, 0] : score(best);
        if (a < c || (a === c && b < d)) best = k;
      }
      if (best < 0) break;
      const [x, y] = [runs[best], runs[best + 1]];
      runs.splice(best, 2, { members: [...x.members, ...y.members], ops: x.ops + y.ops, start: x.start });
    }
    const loose = [];
    for (const leaf of all.filter((c) => !c.children && c.book)) {
      const r = runs.findLast((x) => x.members[0].order <= leaf.order);
      if (r && r.members.length > 1 && leaf.order < r.members[r.members.length - 1].order) r.members.push(leaf); else loose.push(leaf);
    }
    return [...loose, ...runs.map((r) => {
      r.members.sort((a, b) => a.order - b.order);
      if (r.members.length === 1) return r.members[0];
      this.parts += 1;
      const part = { id: `part_${this.parts}`, kind: "part", children: r.members, parent: node, order: r.members[0].order };
      for (const c of r.members) c.parent = part;
      part.label = this.partLabel(part);
      this.containers.set(part.id, part);
      return part;
    })].sort((a, b) => a.order - b.order);
  },

  // Many inputs (weights passed as arguments) or results: one part holding them, not a row of hundreds.
  bundle(parent, members, kind) {
    if (members.length <= this.maxChildren) return members;
    const part = { id: `${kind}s`, kind: "part", bundle: true, children: members, parent, order: Math.min(...members.map((c) => c.order)) };
    for (const c of members) c.parent = part;
    const names = members.slice(0, 3).map((c) => c.label.split("\n")[0]).join(", ");
    part.label = `${members.length} ${kind === "input" ? "inputs" : "results"}\n${names}, …`;
    this.containers.set(part.id, part);
    return [part];
  },

  // A scope's name (a stage's: with its first and last member), then its size and the kinds of its ops.
  scopeLabel(c) {
    const ops = this.leavesOf(c).filter((l) => l.op && !l.book);
    const groups = new Set(ops.map((l) => l.group).filter((g) => g !== null && g !== undefined)).size;
    const head = c.stage ? `${c.name} (${c.children[0].name} … ${c.children[c.children.length - 1].name})` : c.name;
    return `${head} · ${plural(ops.length, "op")}${groups ? `, ${plural(groups, "group")}` : ""}\n${heaviestKinds(this.data, ops.map((l) => l.op))}`;
  },

  // A loop's or branch's box: its header (trip count or predicate) and the ops its regions hold, each drawn once.
  regionLabel(c) {
    const ops = this.leavesOf(c).filter((l) => l.op && !l.book && !l.classes.includes("region"));
    const per = c.region.kind === "loop" ? " per iteration" : "";
    const head = c.region.kind === "region" ? c.region.label : `${c.region.label} · ${plural(ops.length, "op")}${per}`;
    return `${head}\n${c.region.kind === "region" ? heaviestKinds(this.data, ops.map((l) => l.op)) : c.region.kind === "loop" ? "click to open its body" : "click to open its branches"}`;
  },

  partLabel(part) {
    const ops = this.leavesOf(part).filter((l) => l.op && !l.book);
    const named = part.children.map((c) => (c.kind === "scope" ? c.name : c.kind === "group" ? c.label.split("\n")[0] : null));
    const onnx = ops.filter((l) => l.op.onnx || /node '/.test(l.op.loc || "")).map((l) => where(l.op));
    // Imported: the span of ONNX node names. Traced: the functions the ops were written in, and their lines.
    // Scopes: the names of its first and last members.
    let span = named.some((n, k) => n && part.children[k].kind === "scope") && named[0] && named[named.length - 1]
      ? `${named[0]} … ${named[named.length - 1]}` : "";
    if (!span && onnx.length) span = onnx[0] === onnx[onnx.length - 1] ? onnx[0] : `${onnx[0]} … ${onnx[onnx.length - 1]}`;
    if (!span) {
      const fns = [...new Set(ops.map((l) => (/\sin\s+(\S+)\s*$/.exec(l.op.loc || "") || [])[1]).filter(Boolean))];
      const lines = ops.map((l) => Number((/:(\d+)\b/.exec(l.op.loc || "") || [])[1])).filter((n) => n > 0);
      const [lo, hi] = [Math.min(...lines), Math.max(...lines)];
      const range = lines.length ? (lo === hi ? ` · line ${lo}` : ` · lines ${lo}–${hi}`) : "";
      span = fns.length ? `${fns.slice(0, 3).join(", ")}${fns.length > 3 ? ", …" : ""}${range}` : "";
    }
    const groups = new Set(ops.map((l) => l.group).filter((g) => g !== null && g !== undefined)).size;
    const head = `${span || `part ${part.id.slice(5)}`} · ${plural(ops.length, "op")}${groups ? `, ${plural(groups, "group")}` : ""}`;
    return `${head}\n${heaviestKinds(this.data, ops.map((l) => l.op))}`;
  }
};

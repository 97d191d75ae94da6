// The Graph view's search: each leaf's terms (op kind, %values, #uid, ONNX node name or source line,
// group, scope), the matches with exact ones first and then those that only contain the query, and
// the list of matches to step through (as Model Explorer has).

import { h, scopeOf, where } from "./core.js";

const LISTED = 60;       // rows per section of the list; the count says how many more

// Search terms of one leaf, lower case, kept on the leaf: every keystroke searches every leaf.
export function terms(leaf) {
  if (!leaf.terms) leaf.terms = termsOf(leaf);
  return leaf.terms;
}

function termsOf(leaf) {
  const op = leaf.op;
  if (!op) return [leaf.id.replace(/^(in|out)_/, ""), leaf.label.split("\n")[0]].map((t) => t.toLowerCase());
  const out = [op.name, op.name.replace(/^\w+\./, ""), `#${op.uid}`, ...op.results.map((r) => `%${r}`)];
  const w = where(op);
  if (w) out.push(w);
  if (op.group !== null && op.group !== undefined) out.push(`group ${op.group}`, `g${op.group}`);
  if (op.loc) out.push(op.loc);
  if (op.onnx) out.push(op.onnx);
  if (op.path) out.push(op.path);
  out.push(...scopeOf(op));
  for (const v of Object.values(op.attrs || {})) if (typeof v === "string" && v.startsWith("\"")) out.push(v.slice(1, -1));
  return out.map((t) => String(t).toLowerCase());
}

// Leaves whose terms equal the query, then (from two characters on) those that only contain it, each
// in graph order. Hidden bookkeeping counts only when nothing else matches: jumping to it would turn
// bookkeeping on and double what is drawn.
export function matches(leaves, q, showBookkeeping) {
  if (!q) return { exact: [], partial: [] };
  const all = [...leaves];
  const shown = (list) => (showBookkeeping ? list : list.filter((l) => !l.book));
  const byOrder = (list) => list.sort((a, b) => a.order - b.order);
  const [exactAll, partialAll] = [[], []];
  for (const l of all) {
    const ts = terms(l);
    if (ts.includes(q)) exactAll.push(l);
    else if (q.length >= 2 && ts.some((t) => t.includes(q))) partialAll.push(l);
  }
  let [exact, partial] = [shown(exactAll), shown(partialAll)];
  if (!exact.length && !partial.length) [exact, partial] = [exactAll, partialAll];
  return { exact: byOrder(exact), partial: byOrder(partial) };
}

// One row of the list: the op, its value and where it came from.
function rowText(leaf) {
  const op = leaf.op;
  if (!op) return leaf.label.split("\n")[0];
  const place = [op.results.length ? `%${op.results[0]}` : "", where(op) || scopeOf(op).join("/")].filter(Boolean).join(" · ");
  return `${op.name.replace(/^\w+\./, "")} #${op.uid}${place ? ` · ${place}` : ""}`;
}

// The list of matches under the search box: exact first, then "also contains"; a click goes to that match.
export function matchList(found, query, current, go) {
  const { exact, partial } = found;
  const item = (leaf, k) => h("li", { class: k === current ? "jl-match-current" : "", "data-index": k, "data-id": leaf.id,
    onmousedown: (e) => { e.preventDefault(); go(k); } }, rowText(leaf));
  const section = (title, list, offset, cls) => list.length ? [h("div", { class: `jl-matchhead ${cls}` }, title),
    h("ol", { class: cls }, list.slice(0, LISTED).map((l, k) => item(l, offset + k))),
    ...(list.length > LISTED ? [h("div", { class: "jl-muted" }, `… ${list.length - LISTED} more (Enter steps through all)`)] : [])] : [];
  return [...section(`exact: ${exact.length}`, exact, 0, "jl-exact"),
    ...section(`also contains “${query}”: ${partial.length}`, partial, exact.length, "jl-partial")];
}

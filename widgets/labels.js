// What a box's second line names: its heaviest kinds of op, by measured time when the program was
// profiled (a group's time goes to its main op: its contraction, else the op writing the most),
// else by bytes written; so a stage reads "conv2d ×10, add ×3, relu ×9", whichever pass made the ops.

import { typeBytes } from "./core.js";

const CONTRACTION = /conv|matmul|dot|einsum|gemm/;
const weights = new WeakMap();      // data -> Map(uid -> weight), computed once per page

function written(data, op) {
  const bind = (data.memory || {}).bindings || {};
  return op.types.map((t) => typeBytes(t, bind) || 0).reduce((a, b) => a + b, 0);
}

function mainOp(data, members) {
  const contraction = members.find((op) => CONTRACTION.test(op.name));
  if (contraction) return contraction;
  return members.reduce((best, op) => (written(data, op) > written(data, best) ? op : best), members[0]);
}

function opWeights(data) {
  if (weights.has(data)) return weights.get(data);
  const out = new Map();
  const timed = (data.groups || []).some((g) => typeof g.seconds === "number");
  if (timed) {
    for (const op of Object.values(data.ops)) if (typeof op.seconds === "number" && op.group === null) out.set(op.uid, op.seconds);
    for (const g of data.groups) {
      const members = g.ops.map((u) => data.ops[String(u)]).filter((op) => op && !op.bookkeeping && !/^np\.(weight|constant)$/.test(op.name));
      if (members.length && typeof g.seconds === "number") out.set(mainOp(data, members).uid, g.seconds);
    }
  } else {
    for (const op of Object.values(data.ops)) out.set(op.uid, written(data, op));
  }
  const result = { timed, of: (uid) => out.get(uid) || 0 };
  weights.set(data, result);
  return result;
}

// "conv2d ×10, add ×3, relu ×9, …": the `n` kinds of op weighing most among `ops` (op entries).
export function heaviestKinds(data, ops, n = 3) {
  const w = opWeights(data);
  const kinds = new Map();
  for (const op of ops) {
    const name = op.name.replace(/^\w+\./, "");
    const k = kinds.get(name) || { name, count: 0, weight: 0 };
    k.count += 1;
    k.weight += w.of(op.uid);
    kinds.set(name, k);
  }
  const order = [...kinds.values()].sort((a, b) => b.weight - a.weight
    || CONTRACTION.test(b.name) - CONTRACTION.test(a.name) || b.count - a.count);
  return order.slice(0, n).map((k) => (k.count > 1 ? `${k.name} ×${k.count}` : k.name)).join(", ") + (order.length > n ? ", …" : "");
}

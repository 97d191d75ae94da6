// The repro action: for the selected group, a script that replays it alone (its IR text and inputs of
// its shapes), to copy; live in a notebook, a button that writes the group and inputs to an .npz file.

import { h } from "./core.js";

function selectedGroup(ctx, sel) {
  if (!sel) return null;
  if (sel.kind === "group" && sel.id !== undefined) return Number(sel.id);
  const op = sel.uids && sel.uids.length ? ctx.data.ops[String(sel.uids[0])] : null;
  return op && op.group !== null && op.group !== undefined ? op.group : null;
}

const pyShape = (shape) => `(${shape.join(", ")}${shape.length === 1 ? "," : ""})`;

function inputLine(x) {
  const shape = pyShape(x.shape);
  if (x.dtype === "bool") return `rng.random(${shape}) < 0.5`;
  if (/^u?int/.test(x.dtype)) return `rng.integers(0, 4, ${shape}).astype(np.${x.dtype})`;
  return `rng.standard_normal(${shape}).astype(np.${x.dtype})`;
}

function pyString(text) {
  return text.includes("'''") || text.includes("\\") ? JSON.stringify(text) : `'''\\\n${text}'''`;
}

// A script that runs group `gid` alone on seeded random inputs of its shapes (or, offered beside them, the
// real values that flowed into it, written by the live widget) and checks the result against O0.
export function reproScript(data, gid, r) {
  const level = data.level && data.level !== "O0" ? data.level : "O1";
  return [`# jitlab repro: group ${gid} of ${data.title || "the program"} (${data.level || ""} ${data.target || ""})`.replace(/\s+\)/, ")"),
    "import numpy as np", "import jitlab as jl", "",
    `program = jl.parse(${pyString(r.ir)})`,
    "rng = np.random.default_rng(0)",
    `inputs = [${r.inputs.map(inputLine).join(",\n          ")}]`,
    "# or the real values that flowed into the group (write them from the live widget:",
    `# explorer.repro("group${gid}.npz", inputs_of_the_program, group=${gid})):`,
    `# program, inputs = jl.explore.load_repro("group${gid}.npz")`,
    `got = jl.compile(program, level="${level}")(*inputs)`,
    "want = jl.compile(program, level=\"O0\")(*inputs)      # the reference: each op's numpy implementation",
    "for k, (g, w) in enumerate(zip(got, want)):      # float32 rounding, relative to the result's size",
    "    scale = float(np.abs(w).max(initial=1.0))",
    "    np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * scale, err_msg=f\"result {k} differs from O0\")",
    `print(f"group ${gid}: ${level} matches O0 on {len(got)} results")`, ""].join("\n");
}

export class ReproAction {
  constructor(ctx) {
    this.ctx = ctx;
    this.gid = null;
    this.button = h("button", { class: "jl-btn jl-repro-btn", title: "a script that replays the selected group alone", onclick: () => this.toggle() }, "repro");
    this.panel = h("div", { class: "jl-repro", hidden: true });
    ctx.on("select", (sel) => this.follow(sel));
    ctx.on("msg", (msg) => {
      if (msg.type === "repro" && msg.group === this.gid) this.status.textContent = msg.error ? msg.error : `wrote ${msg.path}`;
    });
    this.follow(ctx.selection);
  }

  follow(sel) {
    this.gid = selectedGroup(this.ctx, sel);
    this.button.disabled = this.gid === null;
    if (!this.panel.hidden) this.show();
  }

  toggle() {
    this.panel.hidden = !this.panel.hidden;
    if (!this.panel.hidden) this.show();
  }

  show() {
    const gid = this.gid;
    if (gid === null) { this.panel.replaceChildren(h("div", { class: "jl-muted" }, "Select a group or an op in one.")); return; }
    const r = (this.ctx.data.repros || {})[String(gid)];
    this.status = h("span", { class: "jl-muted jl-repro-status" });
    const write = this.ctx.isStatic ? null : h("button", { class: "jl-btn", onclick: () => {
      this.status.textContent = "writing…";
      this.ctx.request({ type: "repro", group: gid });
    } }, "write .npz with inputs");
    if (!r) {
      this.panel.replaceChildren(h("div", {}, h("b", {}, `repro of group ${gid}`), " ", write, " ", this.status),
        h("div", { class: "jl-muted" }, `Group ${gid}'s IR is too large for this page (or reads weights): in Python, ` +
          `widget.repro("group${gid}.npz", inputs, group=${gid}) writes it with the group's real inputs.`));
      return;
    }
    const script = reproScript(this.ctx.data, gid, r);
    const text = h("textarea", { class: "jl-repro-text", readonly: true, rows: Math.min(24, script.split("\n").length + 1), spellcheck: "false" });
    text.value = script;
    const copy = h("button", { class: "jl-btn", onclick: async () => {
      try { await navigator.clipboard.writeText(script); } catch { text.select(); document.execCommand("copy"); }
      this.status.textContent = "copied";
    } }, "copy");
    // A symbolic type gets the shape it has at the compiled bindings.
    const shapes = r.inputs.map((x) => `%${x.name}: ${x.type}${/\[.*[A-Za-z_].*\]/.test(x.type) ? ` = [${x.shape}]` : ""}`).join(", ");
    this.panel.replaceChildren(
      h("div", {}, h("b", {}, `repro of group ${gid}`), ` · ${r.inputs.length} inputs: ${shapes} `, copy, " ", write, " ", this.status),
      text);
  }
}

// Python syntax highlighting for generated kernel source, in the browser (the page carries the source
// once, as text): spans with Pygments' short token classes, styled by explorer.css. Line for line:
// the output has the source's newlines, so line marks can be placed by line number.

const KEYWORDS = new Set(["and", "as", "assert", "break", "class", "continue", "def", "del", "elif", "else", "except",
  "finally", "for", "from", "global", "if", "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise",
  "return", "try", "while", "with", "yield", "None", "True", "False"]);
const OPERATOR_WORDS = new Set(["and", "in", "is", "not", "or"]);
const BUILTINS = new Set(["abs", "all", "any", "bool", "float", "int", "len", "max", "min", "print", "range", "round",
  "sum", "tuple", "list", "dict", "set", "zip", "enumerate", "isinstance", "prange"]);
const TOKEN = /("""[\s\S]*?"""|'''[\s\S]*?'''|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')|(#[^\n]*)|(@[\w.]+)|(\b\d[\w.]*\b(?:[eE][+-]?\d+)?)|([A-Za-z_]\w*)/g;

const escapeHtml = (t) => t.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

function span(cls, text) {
  // A token over several lines (a docstring) is closed and reopened at each newline, so every line stands alone.
  return text.split("\n").map((part) => (part ? `<span class="${cls}">${escapeHtml(part)}</span>` : "")).join("\n");
}

export function highlightPython(source) {
  let out = "";
  let last = 0;
  let afterDef = false;
  for (const m of source.matchAll(TOKEN)) {
    out += escapeHtml(source.slice(last, m.index));
    last = m.index + m[0].length;
    const [text, str, comment, decorator, number, word] = m;
    if (str) out += span(str.startsWith('"""') || str.startsWith("'''") ? "sd" : "s2", text);
    else if (comment) out += span("c1", text);
    else if (decorator) out += span("nd", text);
    else if (number) out += span(/[.eE]/.test(number) && !/^0x/i.test(number) ? "mf" : "mi", text);
    else if (word && afterDef) out += span("nf", text);
    else if (word && KEYWORDS.has(word)) out += span(OPERATOR_WORDS.has(word) ? "ow" : "k", text);
    else if (word && BUILTINS.has(word)) out += span("nb", text);
    else out += escapeHtml(text);
    afterDef = word === "def" || word === "class";
  }
  return out + escapeHtml(source.slice(last));
}

/* A tiny Python highlighter: one tokenizing regex, every token HTML-escaped.
   Good enough for REPL cells; it never fails, it only colours less when unsure. */
"use strict";

const PY_KEYWORDS = new Set(("False None True and as assert async await break class continue def del elif else " +
  "except finally for from global if import in is lambda nonlocal not or pass raise return try while with yield " +
  "match case").split(" "));
const PY_BUILTINS = new Set(("abs all any bool bytes callable chr dict dir divmod enumerate filter float format " +
  "frozenset getattr hasattr hash hex id input int isinstance issubclass iter len list map max min next object " +
  "oct open ord pow print range repr reversed round set setattr slice sorted str sum super tuple type vars zip " +
  "Exception ValueError TypeError KeyError IndexError RuntimeError self").split(" "));
// the functions an RLM's REPL provides: worth seeing at a glance
const RLM_NAMES = new Set(("llm_query llm_query_batched rlm_query rlm_query_batched SUBMIT FINAL FINAL_VAR " +
  "SHOW_VARS context answer").split(" "));

const PY_TOKEN = new RegExp([
  "(?<comment>#[^\\n]*)",
  "(?<string>[rRbBuUfF]{0,2}(?:\"\"\"[\\s\\S]*?(?:\"\"\"|$(?![\\s\\S]))|'''[\\s\\S]*?(?:'''|$(?![\\s\\S]))" +
    "|\"(?:[^\"\\\\\\n]|\\\\.)*\"?|'(?:[^'\\\\\\n]|\\\\.)*'?))",
  "(?<number>\\b(?:0[xXoObB][\\da-fA-F_]+|\\d[\\d_]*(?:\\.[\\d_]*)?(?:[eE][+-]?\\d+)?j?)|\\.\\d+(?:[eE][+-]?\\d+)?)",
  "(?<decorator>@[A-Za-z_][\\w.]*)",
  "(?<name>[A-Za-z_]\\w*)",
].join("|"), "g");

function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;"})[c]);
}

function nameClass(word, previous, rest) {
  if (PY_KEYWORDS.has(word)) return "kw";
  if (previous === "def") return "fn";
  if (previous === "class") return "cls";
  if (RLM_NAMES.has(word)) return "rlm";
  if (PY_BUILTINS.has(word)) return "bi";
  if (/^\s*\(/.test(rest)) return "call";
  return null;
}

/* Python source -> HTML with <span class="tok-..."> around tokens. */
function highlightPython(code) {
  const out = [];
  let last = 0;
  let previousWord = "";
  PY_TOKEN.lastIndex = 0;
  for (let m = PY_TOKEN.exec(code); m !== null; m = PY_TOKEN.exec(code)) {
    if (m[0] === "") { PY_TOKEN.lastIndex++; continue; }
    out.push(escapeHtml(code.slice(last, m.index)));
    const groups = m.groups;
    let cls = null;
    if (groups.comment) cls = "com";
    else if (groups.string) cls = "str";
    else if (groups.number) cls = "num";
    else if (groups.decorator) cls = "dec";
    else if (groups.name) {
      cls = nameClass(m[0], previousWord, code.slice(PY_TOKEN.lastIndex, PY_TOKEN.lastIndex + 8));
      previousWord = m[0];
    }
    const text = escapeHtml(m[0]);
    out.push(cls ? `<span class="tok-${cls}">${text}</span>` : text);
    last = PY_TOKEN.lastIndex;
  }
  out.push(escapeHtml(code.slice(last)));
  return out.join("");
}

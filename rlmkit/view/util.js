/* DOM and formatting helpers shared by the runs list and the run page.
   Text always goes in through textContent; only highlightPython's escaped output is set as HTML. */
"use strict";

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key === "html") node.innerHTML = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

const fmt = {
  int: (n) => (n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US")),
  cost: (c) => (c === null || c === undefined ? "–" : c === 0 ? "$0" : c < 0.01 ? `$${c.toFixed(5)}` : `$${c.toFixed(3)}`),
  secs: (s) => (s === null || s === undefined ? "–" : s < 1 ? `${Math.round(s * 1000)} ms` : s < 120 ? `${s.toFixed(2)} s` : `${(s / 60).toFixed(1)} min`),
  score: (s) => (s === null || s === undefined ? "–" : Number.isInteger(s) ? String(s) : s.toFixed(3)),
  size: (n) => (n >= 1e6 ? `${(n / 1e6).toFixed(1)}M` : n >= 1e3 ? `${(n / 1e3).toFixed(1)}k` : String(n)),
  date: (t) => (t ? new Date(t * 1000).toISOString().replace("T", " ").slice(0, 19) : "–"),
};

const STATUS_LABEL = {
  ok: "ok", error: "error", budget_exceeded: "budget exceeded",
  max_iterations: "max iterations", running: "incomplete",
};

function statusBadge(status) {
  return el("span", {class: `badge status-${status}`, text: STATUS_LABEL[status] || status});
}

function chip(label, value, cls) {
  if (value === null || value === undefined || value === "") return null;
  return el("span", {class: `chip ${cls || ""}`}, el("b", {text: label}), " ", String(value));
}

/* A text that may be long: shows its head, with a "show more" button for the rest. */
const TEXT_LIMIT_CHARS = 1200;
const TEXT_LIMIT_LINES = 18;

function textBox(text, cls) {
  text = text === null || text === undefined ? "" : String(text);
  if (text === "") return el("pre", {class: `text empty ${cls || ""}`, text: "(empty)"});
  const pre = el("pre", {class: `text ${cls || ""}`});
  const lines = text.split("\n");
  let head = text.length > TEXT_LIMIT_CHARS ? text.slice(0, TEXT_LIMIT_CHARS) : text;
  if (lines.length > TEXT_LIMIT_LINES) head = head.split("\n").slice(0, TEXT_LIMIT_LINES).join("\n");
  if (head.length === text.length) {
    pre.textContent = text;
    return pre;
  }
  pre.textContent = head;
  const hidden = text.length - head.length;
  const button = el("button", {class: "more", type: "button", text: `show more (${fmt.int(hidden)} more characters)`});
  let open = false;
  button.addEventListener("click", () => {
    open = !open;
    pre.textContent = open ? text : head;
    button.textContent = open ? "show less" : `show more (${fmt.int(hidden)} more characters)`;
  });
  return el("div", {class: "textbox"}, pre, button);
}

function codeBox(code) {
  return el("pre", {class: "code", html: highlightPython(code || "")});
}

/* <details> whose body is built on first open: a big tree costs nothing until looked at. */
function lazyDetails(summary, buildBody, cls, open) {
  const details = el("details", {class: cls || ""}, el("summary", {}, summary));
  let built = false;
  const build = () => {
    if (built) return;
    built = true;
    details.append(el("div", {class: "details-body"}, buildBody()));
  };
  details.addEventListener("toggle", () => details.open && build());
  if (open) { details.open = true; build(); }
  return details;
}

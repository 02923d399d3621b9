/* Entry point: read the embedded data, say what could not be read, route by location.hash. */
"use strict";

function readData() {
  const node = document.getElementById("rlmkit-data");
  try {
    const data = JSON.parse(node.textContent);
    return {runs: data.runs || [], sessions: data.sessions || [], problems: data.problems || []};
  } catch (err) {
    return {runs: [], sessions: [],
      problems: [{file: "(embedded data)", message: `could not be parsed: ${err.message}`}]};
  }
}

function renderProblems(data) {
  const box = document.getElementById("problems");
  if (!data.problems.length) return;
  const fileName = (path) => path.split(/[\\/]/).pop();
  box.append(el("div", {class: "problems", role: "status"},
    el("button", {class: "dismiss", type: "button", title: "hide", text: "×", onclick: () => box.replaceChildren()}),
    el("b", {text: "Some input could not be read. Showing what could."}),
    el("ul", {}, data.problems.map((p) => el("li", {}, el("span", {class: "mono", title: p.file, text: fileName(p.file)}),
      `: ${p.message}`, p.runs ? ` (${p.runs} run(s) read)` : "")))));
}

function route(data) {
  const app = document.getElementById("app");
  const crumbs = document.getElementById("crumbs");
  crumbs.replaceChildren(el("a", {href: "#", text: "all runs"}));
  const match = /^#run=(.+)$/.exec(location.hash);
  const session = /^#session=(.+)$/.exec(location.hash);
  if (match) renderRunPage(app, crumbs, data, decodeURIComponent(match[1]).split("/"));
  else if (session) renderSessionPage(app, crumbs, data, decodeURIComponent(session[1]));
  else renderRunList(app, data);
}

(function main() {
  const data = readData();
  renderProblems(data);
  window.addEventListener("hashchange", () => route(data));
  route(data);
})();

/* The runs list: one row per run, or per session (its calls open from it, in call order),
   filterable by text and status, sortable by any column. */
"use strict";

const RUN_COLUMNS = [
  // key in summary, header, formatter, numeric?
  ["status", "status", (s) => { const b = statusBadge(s.status); if (s.error) b.title = s.error; return b; }, false],
  ["task", "task", (s) => el("span", {class: "task", title: s.signature, text: s.task}), false],
  ["protocol", "protocol", (s) => s.protocol, false],
  ["model", "model", (s) => s.model || "–", false],
  ["score", "score", (s) => fmt.score(s.score), true],
  ["cost", "cost", (s) => fmt.cost(s.cost), true],
  ["tokens", "tokens", (s) => fmt.int(s.tokens), true],
  ["turns", "turns", (s) => fmt.int(s.turns), true],
  ["subcalls", "sub-calls", (s) => fmt.int(s.subcalls), true],
  ["depth", "depth", (s) => fmt.int(s.depth), true],
  ["duration_s", "time", (s) => fmt.secs(s.duration_s), true],
  ["file", "file", (s) => el("span", {class: "file", text: s.file}), false],
];

const listState = {filter: "", status: "all", children: false, sortKey: "created", sortDir: 1};

function runMatches(summary) {
  if (summary.child_of && !listState.children) return false;
  if (listState.status === "failed" && !summary.failed) return false;
  if (listState.status === "incomplete" && !summary.incomplete) return false;
  if (!["all", "failed", "incomplete"].includes(listState.status) && summary.status !== listState.status) return false;
  if (!listState.filter) return true;
  const haystack = [summary.task, summary.signature, summary.status, summary.protocol, summary.model,
    summary.file, summary.run_id, summary.session, summary.error].join(" ").toLowerCase();
  return listState.filter.toLowerCase().split(/\s+/).every((word) => haystack.includes(word));
}

function compareRuns(a, b) {
  const x = a.summary[listState.sortKey];
  const y = b.summary[listState.sortKey];
  // missing values (no score, say) always sort last
  if (x === null || x === undefined) return y === null || y === undefined ? 0 : 1;
  if (y === null || y === undefined) return -1;
  return (x < y ? -1 : x > y ? 1 : 0) * listState.sortDir;
}

/* What the list shows: each run not in a session ("#run=<i>"), and each session ("#session=<id>"). */
function listEntries(data) {
  const inSession = new Set(data.sessions.flatMap((session) => session.calls));
  const runs = data.runs.map((run, index) => ({summary: run.summary, route: `run=${index}`}))
    .filter((entry, index) => !inSession.has(index));
  const sessions = data.sessions.map((session) => ({summary: session.summary, session: session.id,
    route: `session=${encodeURIComponent(session.id)}`}));
  return [...runs, ...sessions];
}

function renderRunList(app, data) {
  const entries = listEntries(data);
  const counts = {};
  for (const entry of entries) counts[entry.summary.status] = (counts[entry.summary.status] || 0) + 1;
  const failed = entries.filter((entry) => entry.summary.failed).length;

  const filterInput = el("input", {id: "run-filter", type: "search", placeholder: "filter: task, model, status, error…",
    value: listState.filter});
  const statusSelect = el("select", {id: "status-filter"},
    el("option", {value: "all", text: `all statuses (${entries.length})`}),
    el("option", {value: "failed", text: `failed (${failed})`}),
    Object.keys(counts).sort().map((s) => el("option", {value: s, text: `${STATUS_LABEL[s] || s} (${counts[s]})`})));
  statusSelect.value = listState.status;
  const children = data.runs.filter((run) => run.summary.child_of).length;
  const childToggle = el("input", {id: "show-children", type: "checkbox", checked: listState.children});
  const shown = el("span", {class: "shown"});
  const head = el("tr", {});
  const body = el("tbody", {});
  const table = el("table", {class: "runs", id: "runs-table"}, el("thead", {}, head), body);

  const fill = () => {
    head.replaceChildren(...RUN_COLUMNS.map(([key, label, , numeric]) => {
      const arrow = listState.sortKey === key ? (listState.sortDir > 0 ? " ▲" : " ▼") : "";
      return el("th", {class: numeric ? "num sortable" : "sortable", "data-key": key, text: label + arrow,
        onclick: () => {
          listState.sortDir = listState.sortKey === key ? -listState.sortDir : numeric ? -1 : 1;
          listState.sortKey = key;
          fill();
        }});
    }));
    const rows = entries.filter((entry) => runMatches(entry.summary));
    rows.sort(compareRuns);
    body.replaceChildren(...rows.map((entry) => el("tr", {
      class: `run-row ${entry.session ? "session-row" : ""} ${entry.summary.failed ? "failed" : ""} ${entry.summary.incomplete ? "incomplete" : ""}`,
      "data-run-id": entry.session ? null : entry.summary.run_id, "data-session-id": entry.session, tabindex: "0",
      onclick: () => { location.hash = entry.route; },
      onkeydown: (e) => { if (e.key === "Enter") location.hash = entry.route; },
    }, RUN_COLUMNS.map(([, , format, numeric]) => el("td", {class: numeric ? "num" : ""}, format(entry.summary))))));
    shown.textContent = `${rows.length} of ${entries.length} shown`;
  };
  filterInput.addEventListener("input", () => { listState.filter = filterInput.value.trim(); fill(); });
  statusSelect.addEventListener("change", () => { listState.status = statusSelect.value; fill(); });
  childToggle.addEventListener("change", () => { listState.children = childToggle.checked; fill(); });
  fill();

  const totals = data.runs.reduce((t, run) => ({cost: t.cost + (run.summary.cost || 0),
    tokens: t.tokens + (run.summary.tokens || 0)}), {cost: 0, tokens: 0});
  app.replaceChildren(
    el("section", {class: "card list-head"},
      el("div", {class: "controls"}, filterInput, statusSelect,
        children ? el("label", {class: "toggle", title: "child RLM runs also open from their parent's sub-calls"},
          childToggle, ` child runs (${children})`) : null,
        shown),
      el("div", {class: "totals-line"},
        chip("runs", fmt.int(data.runs.length)),
        data.sessions.length ? chip("sessions", fmt.int(data.sessions.length)) : null,
        chip("failed", fmt.int(failed), failed ? "bad" : ""),
        chip("tokens", fmt.int(totals.tokens)), chip("cost", fmt.cost(totals.cost)))),
    data.runs.length ? table : el("p", {class: "none", text: "No runs could be read from the given files."}));
}

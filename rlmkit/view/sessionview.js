/* One session ("#session=<id>"): its totals, an overview of its calls, then every call in call
   order, each rendered as a run is (runview.js), with what the session says of it: whether its
   REPL was rebuilt before it (and why) and which variables that rebuild lost. */
"use strict";

function findSession(data, id) {
  return data.sessions.find((session) => session.id === id) || null;
}

/* The call's own inputs, shortest first: the question, not the context it shares with the others. */
function callAsked(traj) {
  const inputs = [...(traj.meta.inputs || [])].sort((a, b) => a.size - b.size);
  return inputs.length ? `${inputs[0].name}: ${inputs[0].preview}` : "";
}

function callAnswer(traj) {
  return traj.outputs ? Object.values(traj.outputs).map((v) => (typeof v === "string" ? v : JSON.stringify(v))).join(" · ") : "";
}

function rebuildChips(info) {
  const lost = Object.keys(info.lost || {});
  return [
    info.restored ? chip("REPL rebuilt", info.restored, "rebuilt") : null,
    lost.length ? chip("lost", lost.join(", "), "bad") : null,
  ];
}

function sessionHeader(session, data) {
  const s = session.summary;
  const stat = (label, value) => el("div", {class: "stat"}, el("div", {class: "v", text: value}), el("div", {class: "k", text: label}));
  const overview = el("table", {class: "runs session-calls"},
    el("thead", {}, el("tr", {}, ["call", "status", "asked", "answer", "turns", "tokens", "cost", "time"]
      .map((h, i) => el("th", {class: i >= 4 ? "num" : "", text: h})))),
    el("tbody", {}, session.calls.map((index) => {
      const run = data.runs[index];
      const traj = run.trajectory;
      const info = traj.meta.session || {};
      return el("tr", {class: "call-row", tabindex: "0", "data-call": info.call,
        // a button-like row, not a link: the hash is the page's route
        onclick: () => document.getElementById(`session-call-${index}`).scrollIntoView()},
        el("td", {class: "mono", text: String(info.call)}), el("td", {}, statusBadge(traj.status), rebuildChips(info)),
        el("td", {}, el("span", {class: "task", text: callAsked(traj)})),
        el("td", {}, el("span", {class: "task", text: callAnswer(traj)})),
        el("td", {class: "num", text: fmt.int(run.summary.turns)}), el("td", {class: "num", text: fmt.int(run.summary.tokens)}),
        el("td", {class: "num", text: fmt.cost(run.summary.cost)}), el("td", {class: "num", text: fmt.secs(run.summary.duration_s)}));
    })));
  return el("section", {class: "card run-head session-head"},
    el("div", {class: "run-title"}, statusBadge(s.status), el("h2", {text: `session ${session.id}`})),
    el("div", {class: "chips"}, chip("calls", s.session_calls), chip("signature", s.signature), chip("model", s.model),
      chip("protocol", s.protocol), chip("started", fmt.date(s.created))),
    el("div", {class: "stats"}, stat("score", fmt.score(s.score)), stat("turns", fmt.int(s.turns)),
      stat("LM calls", fmt.int(s.calls)), stat("tokens", fmt.int(s.tokens)), stat("cost", fmt.cost(s.cost)),
      stat("time in calls", fmt.secs(s.duration_s))),
    overview);
}

function sessionCallView(run, index) {
  const traj = run.trajectory;
  const info = traj.meta.session || {};
  return el("section", {class: "session-call", id: `session-call-${index}`, "data-call": info.call,
    "data-run-id": traj.meta.run_id},
    el("div", {class: "call-head"}, el("h2", {text: `call ${info.call}`}), statusBadge(traj.status), rebuildChips(info),
      el("span", {class: "dim", text: callAsked(traj)}),
      el("a", {class: "open-call", href: `#run=${index}`, text: "open as page →"})),
    runBody(traj, [String(index)], true));
}

function renderSessionPage(app, crumbs, data, id) {
  const session = findSession(data, id);
  if (!session) {
    app.replaceChildren(el("p", {class: "none", text: `No session "${id}".`}), el("a", {href: "#", text: "all runs"}));
    return;
  }
  crumbs.append(el("a", {href: `#session=${encodeURIComponent(id)}`, text: `session ${id.slice(0, 8)}`}));
  app.replaceChildren(sessionHeader(session, data), ...session.calls.map((index) => sessionCallView(data.runs[index], index)));
  window.scrollTo(0, 0);
}

/* One run: header and totals, failure banner, inputs, timeline, then every turn with its
   code blocks and sub-call tree. A child RLM (SubCall.child) renders with the same code,
   inline inside its sub-call or as its own page (route "#run=<i>/<subcall id>/..."). */
"use strict";

const FAILED = new Set(["error", "budget_exceeded", "max_iterations"]);
const TIMELINE_MAX_ROWS = 160;

function* allSubcalls(traj) {
  for (const turn of traj.turns) for (const block of turn.blocks) for (const call of block.subcalls) {
    yield call;
    if (call.child) yield* allSubcalls(call.child);
  }
}

function failureBanner(traj) {
  if (FAILED.has(traj.status)) {
    return el("div", {class: "failure", role: "alert"},
      el("div", {class: "failure-title"}, statusBadge(traj.status),
        el("b", {text: traj.error_type || (traj.status === "error" ? "run failed" : STATUS_LABEL[traj.status])})),
      traj.error ? textBox(traj.error, "error") : null);
  }
  if (traj.status === "running") {
    return el("div", {class: "failure incomplete", role: "alert"},
      el("div", {class: "failure-title"}, statusBadge("running"),
        el("b", {text: "no end record: the run was still going or was killed; showing the turns that were logged"})));
  }
  return null;
}

function runHeader(traj) {
  const m = traj.meta;
  const u = traj.usage;
  const subcalls = [...allSubcalls(traj)].length;
  const duration = traj.duration_s || traj.turns.reduce((t, turn) => t + turn.duration_s, 0);
  const stat = (label, value, cls) => el("div", {class: `stat ${cls || ""}`}, el("div", {class: "v", text: value}),
    el("div", {class: "k", text: label}));
  const outputs = traj.outputs ? JSON.stringify(traj.outputs, null, 2) : null;
  return el("section", {class: `card run-head status-line-${traj.status}`},
    el("div", {class: "run-title"}, statusBadge(traj.status), el("h2", {text: m.signature}),
      el("span", {class: "run-id", text: m.run_id})),
    el("div", {class: "chips"}, chip("protocol", m.protocol), chip("model", m.model), chip("sub model", m.sub_model),
      chip("sandbox", m.sandbox), chip("depth", m.depth), chip("started", fmt.date(m.created)),
      Object.entries(m.task || {}).map(([k, v]) => chip(k, typeof v === "object" ? JSON.stringify(v) : v, "task-chip")),
      Object.entries(m.limits || {}).filter(([, v]) => v !== null).map(([k, v]) => chip(k, v, "limit"))),
    el("div", {class: "stats"},
      stat("score", fmt.score(traj.score)), stat("turns", fmt.int(traj.turns.length)),
      stat("sub-calls", fmt.int(subcalls)), stat("LM calls", fmt.int(u.calls)),
      stat("prompt tokens", fmt.int(u.prompt_tokens)), stat("completion tokens", fmt.int(u.completion_tokens)),
      stat("cost", fmt.cost(u.cost)), stat("cached calls", fmt.int(u.cached_calls)), stat("wall time", fmt.secs(duration))),
    failureBanner(traj),
    m.instructions ? lazyDetails("instructions", () => textBox(m.instructions), "plain") : null,
    m.inputs && m.inputs.length ? inputsTable(m.inputs) : null,
    outputs ? el("div", {class: "outputs"}, el("h3", {text: "outputs"}), textBox(outputs, "json")) : null);
}

function inputsTable(inputs) {
  // contexts are VariableInfo: type, size, hash and preview only; the body is never logged
  return el("div", {class: "inputs"}, el("h3", {text: "inputs"}),
    el("table", {class: "vars"},
      el("thead", {}, el("tr", {}, ["name", "type", "size", "sha256", "preview"].map((h) => el("th", {text: h})))),
      el("tbody", {}, inputs.map((v) => el("tr", {},
        el("td", {class: "mono", text: v.name}), el("td", {text: v.type}), el("td", {class: "num", text: fmt.size(v.size)}),
        el("td", {class: "mono dim", title: v.sha256, text: v.sha256.slice(0, 10)}),
        el("td", {}, el("pre", {class: "text preview", text: v.preview})))))));
}

function timeline(traj, route) {
  const rows = [];
  for (const turn of traj.turns) {
    rows.push({label: `turn ${turn.index}`, start: turn.started_s, dur: turn.duration_s, lm: turn.lm_duration_s,
      cls: turn.final ? "turn final" : "turn", href: null});
    for (const block of turn.blocks) for (const call of block.subcalls) {
      rows.push({label: `↳ ${call.name}${call.batch !== null && call.batch !== undefined ? `[${call.batch}]` : ""}`,
        start: call.started_s, dur: call.duration_s, cls: call.error ? "sub bad" : call.child ? "sub child" : "sub",
        href: call.child ? `#run=${[...route, call.id].join("/")}` : null});
    }
  }
  const end = Math.max(traj.duration_s || 0, ...rows.map((r) => r.start + r.dur), 0);
  if (!rows.length || end <= 0) return el("p", {class: "dim", text: "no timing recorded"});
  const pct = (s) => `${Math.min(100, (100 * s) / end).toFixed(3)}%`;
  const bars = rows.slice(0, TIMELINE_MAX_ROWS).map((r) => {
    const bar = el("div", {class: `bar ${r.cls}`, style: `left:${pct(r.start)};width:${pct(r.dur)}`,
      title: `${r.label.replace("↳ ", "")}: starts ${fmt.secs(r.start)}, takes ${fmt.secs(r.dur)}`});
    if (r.lm) bar.append(el("div", {class: "lm", style: `width:${((100 * r.lm) / Math.max(r.dur, 1e-9)).toFixed(2)}%`}));
    const label = r.href ? el("a", {href: r.href, text: r.label}) : r.label;
    return el("div", {class: "tl-row"}, el("div", {class: "tl-label"}, label),
      el("div", {class: "tl-track"}, bar), el("div", {class: "tl-dur", text: fmt.secs(r.dur)}));
  });
  const more = rows.length > TIMELINE_MAX_ROWS ? el("p", {class: "dim", text: `+${rows.length - TIMELINE_MAX_ROWS} more rows`}) : null;
  return el("div", {class: "timeline"},
    el("div", {class: "tl-row tl-axis"}, el("div", {class: "tl-label"}),
      el("div", {class: "tl-track"}, el("span", {text: "0"}), el("span", {text: fmt.secs(end / 2)}), el("span", {text: fmt.secs(end)})),
      el("div", {class: "tl-dur"})),
    bars, more,
    el("div", {class: "legend"}, el("span", {class: "key lm-key"}), "model time ", el("span", {class: "key turn-key"}),
      "code time ", el("span", {class: "key sub-key"}), "sub-call ", el("span", {class: "key child-key"}), "child RLM ",
      el("span", {class: "key bad-key"}), "failed"));
}

/* The model's text with its code fences replaced by pointers to the executed blocks below. */
function replyProse(turn) {
  if (!turn.blocks.length) return turn.reply;
  let k = 0;
  return turn.reply.replace(/```[A-Za-z0-9_-]*[^\S\n]*\n[\s\S]*?```/g, () => `[code block ${++k} ↓]`).trim();
}

function subcallView(call, route) {
  const tokens = call.usage.prompt_tokens + call.usage.completion_tokens;
  const childRoute = [...route, call.id];
  const summary = [
    el("span", {class: `kind kind-${call.kind}`, text: call.kind}),
    el("b", {class: "mono", text: call.name + (call.batch !== null && call.batch !== undefined ? `[${call.batch}]` : "")}),
    call.model ? el("span", {class: "dim", text: call.model}) : null,
    el("span", {class: "meta", text: `${fmt.int(tokens)} tok · ${fmt.cost(call.usage.cost)} · ${fmt.secs(call.duration_s)}`}),
    call.child ? el("span", {class: "child-tag"}, "child RLM · ", statusBadge(call.child.status),
      ` ${call.child.turns.length} turn(s)`) : null,
    call.error ? el("span", {class: "badge status-error", text: "error"}) : null,
  ];
  return lazyDetails(summary, () => [
    el("div", {class: "io"},
      el("div", {}, el("h4", {text: "prompt"}), textBox(call.prompt)),
      el("div", {}, el("h4", {text: "reply"}), textBox(call.reply))),
    call.error ? el("div", {}, el("h4", {text: "error"}), textBox(call.error, "error")) : null,
    call.child ? el("div", {class: "child-run", "data-run-id": call.child.meta.run_id},
      el("div", {class: "child-head"}, el("h4", {text: `child RLM (depth ${call.child.meta.depth})`}),
        el("a", {class: "open-child", href: `#run=${childRoute.join("/")}`, text: "open as page →"})),
      runBody(call.child, childRoute, true)) : null,
  ], `subcall ${call.error ? "has-error" : ""} ${call.child ? "has-child" : ""}`);
}

function blockView(block, k, route) {
  const flags = [block.timed_out ? "timed out" : null, block.restarted ? "sandbox restarted" : null].filter(Boolean);
  return el("div", {class: `block ${block.error || block.timed_out ? "has-error" : ""}`},
    el("div", {class: "block-head"}, el("b", {text: `code block ${k + 1}`}), el("span", {class: "dim", text: fmt.secs(block.duration_s)}),
      flags.map((f) => el("span", {class: "badge status-error", text: f}))),
    codeBox(block.code),
    block.stdout ? el("div", {}, el("h4", {text: "output"}), textBox(block.stdout, "stdout")) : null,
    block.stderr ? el("div", {}, el("h4", {text: "stderr"}), textBox(block.stderr, "stderr")) : null,
    block.error ? el("div", {}, el("h4", {text: "error"}), textBox(block.error, "error")) : null,
    !block.stdout && !block.stderr && !block.error ? el("p", {class: "dim", text: "(no output)"}) : null,
    block.subcalls.length ? el("div", {class: "subcalls"}, el("h4", {text: `sub-calls (${block.subcalls.length})`}),
      block.subcalls.map((call) => subcallView(call, route))) : null);
}

function turnView(turn, traj, route) {
  const tokens = turn.usage.prompt_tokens + turn.usage.completion_tokens;
  const isLast = turn === traj.turns[traj.turns.length - 1];
  const failedHere = isLast && FAILED.has(traj.status);
  return el("section", {class: `card turn ${turn.final ? "final" : ""} ${failedHere ? "failed" : ""}`, id: `turn-${turn.index}`},
    el("div", {class: "turn-head"}, el("h3", {text: `Turn ${turn.index}`}),
      turn.final ? el("span", {class: "badge status-ok", text: "final"}) : null,
      failedHere ? statusBadge(traj.status) : null,
      el("span", {class: "meta", text: [turn.model, `${fmt.int(tokens)} tok`, fmt.cost(turn.usage.cost),
        `${fmt.secs(turn.duration_s)} (model ${fmt.secs(turn.lm_duration_s)})`].filter(Boolean).join(" · ")})),
    lazyDetails(`prompt: ${turn.new_messages.length} new message(s)${turn.keep ? `, ${turn.keep} kept from before` : ""}`,
      () => turn.new_messages.map((msg) => el("div", {class: `msg role-${msg.role}`},
        el("div", {class: "role", text: msg.role}), textBox(msg.content))), "plain prompt"),
    el("h4", {text: "model"}), textBox(replyProse(turn), "reply"),
    turn.blocks.map((block, k) => blockView(block, k, route)),
    turn.feedback ? lazyDetails("fed back to the model", () => textBox(turn.feedback), "plain") : null);
}

function runBody(traj, route, nested) {
  return el("div", {class: nested ? "run-body nested" : "run-body"},
    runHeader(traj),
    el("section", {class: "card"}, el("h3", {text: "timeline"}), timeline(traj, route)),
    traj.turns.length ? traj.turns.map((turn) => turnView(turn, traj, route))
      : el("p", {class: "dim", text: "no turns were logged"}));
}

/* "#run=3/ab12/cd34" -> the root run 3, then the child of sub-call ab12, then of cd34. */
function resolveRoute(data, route) {
  const root = data.runs[Number(route[0])];
  if (!root) return null;
  const chain = [{traj: root.trajectory, label: root.summary.task}];
  for (const id of route.slice(1)) {
    const call = [...allSubcalls(chain[chain.length - 1].traj)].find((c) => c.id === id && c.child);
    if (!call) return null;
    chain.push({traj: call.child, label: `${call.name} (depth ${call.child.meta.depth})`});
  }
  return chain;
}

function renderRunPage(app, crumbs, data, route) {
  const chain = resolveRoute(data, route);
  if (!chain) {
    app.replaceChildren(el("p", {class: "none", text: `No run at "${route.join("/")}".`}), el("a", {href: "#", text: "all runs"}));
    return;
  }
  const session = data.runs[Number(route[0])].summary.session;  // a session's call: back to its session
  if (session) crumbs.append(el("a", {href: `#session=${encodeURIComponent(session)}`, text: `session ${session.slice(0, 8)}`}));
  crumbs.append(...chain.map((step, i) => el("a", {href: `#run=${route.slice(0, i + 1).join("/")}`, text: step.label})));
  app.replaceChildren(runBody(chain[chain.length - 1].traj, route, false));
  window.scrollTo(0, 0);
}

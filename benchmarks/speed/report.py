"""results.json -> markdown tables: benchmarks/results/README_TABLE.md (all of it) and the docs'
Benchmarks page (``tables``, through render_docs.py).

Every figure is shown with its ratio to the best peer on the same work (``x0.5`` = half the
best peer's time or bytes; lower is better everywhere)."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import provenance

PEERS = ("dspy.RLM", "rlms")


HOW = (
    "How: each framework runs in its own process (peers in their own venv) against one scripted "
    "server that\n"
    "writes the same Python in each framework's convention. (1) is a 5-turn run (inspect, 1 "
    "sub-call, a batch of 8,\n"
    "aggregate, finish): a turn's time is its wall time minus the time the server was busy (from a "
    "request's first line\n"
    "arriving to its reply's last byte written), so it is the framework's own work, HTTP client "
    "included. (2) and (5) time the fan-out turn at the server, from the root "
    "reply that\n"
    "starts it to the next root request; in (2) that is the second turn (the first only looks at the "
    "context,\n"
    "so a REPL still starting after the first request is not counted as fan-out). Memory is sampled "
    "every 20 ms over the driver's process tree and includes the caller's own copy of\n"
    "the context. rlmkit reaches the scripted server through its direct OpenAI-compatible transport "
    "(HTTP/1.1 on asyncio streams). Every framework starts from cached bytecode, as `pip install` "
    "leaves a package "
    "(rlmkit's checkout is byte-compiled first).\nWhy the peers grow with the context (pinned "
    "versions): dspy.RLM 3.4.1 JSON-encodes\n"
    "and re-sends every input to its interpreter on each turn (`LocalInterpreter.execute(code, "
    "variables)`); rlms 0.1.3\n"
    "logs each code block's REPL locals, the context included (`REPLResult.to_dict`)."
)


def _s(s: float | None) -> str:
    return "-" if s is None else f"{s:.2f} s"


def _vs_ideal(row: dict[str, Any]) -> Any:
    return "no timing" if row.get("wall_s") is None else (row["wall_s"], f" = {row['ratio']:.2f}x ideal")


def _ms(s: float | None) -> str:
    return "-" if s is None else f"{s * 1000:.1f} ms"


def _mb(b: float | None) -> str:
    return "-" if b is None else f"{b / 1e6:.0f} MB"


def _kb(b: float | None) -> str:
    return "-" if b is None else (f"{b / 1e3:.1f} kB" if b < 1e6 else f"{b / 1e6:.1f} MB")


def _cell(values: dict[str, Any], name: str, fmt) -> str:
    """``name``'s value, with its ratio to the best (lowest) peer value when there is one.

    A value may be ``(number, remark)``: the ratio is on the number, the remark follows it."""
    value, remark = values.get(name), ""
    if isinstance(value, str):  # an error or a note
        return value
    if isinstance(value, tuple):
        value, remark = value
    numbers = {p: v[0] if isinstance(v, tuple) else v for p, v in values.items()}
    peers = [v for p, v in numbers.items() if p in PEERS and isinstance(v, (int, float))]
    text = fmt(value) + remark
    if value is not None and peers and min(peers) > 0:
        text += f" (x{value / min(peers):.2f})"
    return text


def _table(title: str, rows: list[tuple[str, dict[str, Any]]], names: list[str], fmt) -> list[str]:
    lines = [f"**{title}**", "", "| | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for label, values in rows:
        lines.append(f"| {label} | " + " | ".join(_cell(values, n, fmt) for n in names) + " |")
    return lines + [""]


def _short_error(entry: dict[str, Any]) -> str:
    return "failed: " + entry["error"].splitlines()[0][:80].replace("|", "/")


def _per_size(
    results: dict[str, Any], names: list[str], key: str | Callable[[dict[str, Any]], Any]
) -> list[tuple[str, dict[str, Any]]]:
    sizes = sorted({int(s) for n in names for s in results["turns"].get(n, {}) if s.isdigit()})
    rows = []
    for size in sizes:
        values: dict[str, Any] = {}
        for n in names:
            entry = results["turns"].get(n, {}).get(str(size))
            if entry is None:
                values[n] = "not run"
            elif "error" in entry:
                values[n] = _short_error(entry)
            else:
                values[n] = key(entry) if callable(key) else entry.get(key)
        rows.append((f"{size:.0e} chars".replace("e+0", "e"), values))
    for n in names:  # a driver that never started
        start = results["turns"].get(n, {}).get("start")
        if start and rows:
            rows[0][1][n] = _short_error(start)
    return rows


def first_turn_s(entry: dict[str, Any]) -> float | None:
    """The first turn's framework time, median over runs (``first_turn_median_s``; computed from
    the runs for results written before it was recorded)."""
    if "first_turn_median_s" in entry:
        return entry["first_turn_median_s"]
    firsts = [run["turn_overheads_s"][0] for run in entry.get("runs", []) if run.get("turn_overheads_s")]
    return statistics.median(firsts) if firsts else None


def total_s(entry: dict[str, Any]) -> float | None:
    """A run's whole framework time, start-up plus every turn, median over runs (``total_median_s``;
    computed from the runs for results written before it was recorded)."""
    if "total_median_s" in entry:
        return entry["total_median_s"]
    totals = [
        run["startup_s"] + sum(run["turn_overheads_s"]) for run in entry.get("runs", []) if "startup_s" in run
    ]
    return statistics.median(totals) if totals else None


def render(results: dict[str, Any]) -> str:
    meta = results["meta"]
    header = (
        f"{provenance.stamp(meta)} Versions: {meta['versions']}. "
        "Scripted OpenAI-compatible server on 127.0.0.1; ratios are to the best peer (lower is better). "
        "dspy.RLM runs on its `LocalInterpreter`: its default Deno/Pyodide sandbox cannot start offline."
    )
    out = [header, "", HOW, "", tables(results)]
    out += ["**Targets for rlmkit**", ""] + [f"- {line}" for line in results.get("verdicts", [])] + [""]
    return "\n".join(out)


def tables(results: dict[str, Any]) -> str:
    """Every table of one run, without its header or verdicts."""
    names = [n for n in results["frameworks"]]
    out: list[str] = []
    out += _table(
        "(1) Framework time per turn, median (server time excluded)",
        _per_size(results, names, "turn_overhead_median_s"),
        names,
        _ms,
    )
    out += _table(
        "(1) First turn's framework time, median (it also waits for a REPL that is not ready yet)",
        _per_size(results, names, first_turn_s),
        names,
        _ms,
    )
    out += _table(
        "(1) Total framework time per 5-turn run, median (start-up + every turn, server time excluded)",
        _per_size(results, names, total_s),
        names,
        _ms,
    )
    out += _table(
        "(1) Start-up: call to first model request, median",
        _per_size(results, names, "startup_median_s"),
        names,
        _ms,
    )
    first = results.get("first_run", {})
    rows = [
        ("import", {n: results["imports"].get(n) for n in names}),
        ("first run's start-up", {n: first.get(n, {}).get("startup_median_s") for n in names}),
        ("first run, 5 turns", {n: first.get(n, {}).get("wall_median_s") for n in names}),
        (
            "import + first run",
            {
                n: (results["imports"].get(n) or 0) + (first.get(n, {}).get("wall_median_s") or 0)
                for n in names
            },
        ),
    ]
    cold = results.get("cold", {})
    if any(cold.get(n) for n in names):
        samples = max(len(cold.get(n) or []) for n in names)
        rows.append(
            (
                f"import + first run, median of {samples} fresh processes",
                {n: statistics.median(cold[n]) if cold.get(n) else None for n in names},
            )
        )
        rows.append(
            (
                "(fastest - slowest of those)",
                {n: f"{min(cold[n]):.2f} - {max(cold[n]):.2f} s" if cold.get(n) else None for n in names},
            )
        )
    out += _table(
        "Cold start in a fresh process: import, then the first run (1e3 chars)",
        rows,
        names,
        lambda v: "-" if v is None else f"{v:.2f} s",
    )
    out += _table(
        "(3) Peak memory, driver + its child processes (RSS + children's USS)",
        _per_size(results, names, "rss_peak"),
        names,
        _mb,
    )
    delta_rows = []
    for label, values in _per_size(results, names, "rss_peak"):
        size = float(label.split()[0])
        deltas = {}
        for n in names:
            entry = results["turns"].get(n, {}).get(str(int(size)))
            deltas[n] = (
                values[n] if isinstance(values[n], str) else (entry["rss_peak"] - entry["rss_base"]) / size
            )
        delta_rows.append((label, deltas))
    out += _table(
        "(3) Memory added by the run, in multiples of the context size",
        delta_rows,
        names,
        lambda v: "-" if v is None else f"{v:.2f}x",
    )
    out += _table("(4) Trajectory log per run", _per_size(results, names, "log_bytes"), names, _kb)

    scaling = results.get("subcalls", {})
    counts = sorted({int(k) for n in names for k in scaling.get(n, {}).get("by_n", {})})
    rows = []
    for count in counts:
        values = {}
        for n in names:
            row = scaling.get(n, {}).get("by_n", {}).get(str(count))
            values[n] = (
                "not run" if row is None else (_short_error(row) if "error" in row else _vs_ideal(row))
            )
        rows.append((f"N={count}", values))
    if rows:
        conc = ", ".join(f"{n} {scaling[n]['concurrency']}" for n in names if n in scaling)
        out += _table(
            f"(2) Sub-call fan-out at 200 ms per call: wall time = its ratio to the framework's ideal "
            f"ceil(N/concurrency) x 200 ms (concurrency: {conc}); (x) compares wall times",
            rows,
            names,
            _s,
        )

    depth = results.get("depth2", {})
    if depth:
        values = {
            n: _short_error(depth[n])
            if "error" in depth.get(n, {"error": "not run"})
            else _vs_ideal(depth[n])
            for n in names
        }
        out += _table(
            "(5) Depth 2: 16 child RLMs at once (each: 1 request + 1 sub-call, 200 ms each); ideal 0.40 s",
            [("16 children", values)],
            names,
            _s,
        )
        out += [f"- {n}: {results['depth2_how'][n]}" for n in names if n in results.get("depth2_how", {})] + [
            ""
        ]

    clients = results.get("clients", {})
    if "ms_per_call" in clients:
        ms = clients["ms_per_call"]
        best = min(ms[k] for k in ("openai client", "dspy.LM", "litellm.completion") if k in ms)
        title = (
            f"**(7) LM client cost per call** ({clients['calls']} calls x {clients['rounds']} rounds, "
            f"median round; server {clients['server_ms_per_call']:.2f} ms/call)"
        )
        out += [title, "", "| client | ms/call | vs best peer client |", "|---|---:|---:|"]
        out += [f"| {k} | {v:.2f} | x{v / best:.2f} |" for k, v in ms.items()] + [""]
    elif clients:
        out += [f"**(7) LM client cost**: {clients.get('error', 'not run')}", ""]

    kinds = results.get("lm_kinds")
    if kinds:
        out += [
            f"**(7) rlmkit per turn by kind of model** (wall time of a {kinds['turns']}-turn run / its "
            f"turns, median of {kinds['runs']} runs; scripted server; "
            "`benchmarks/speed/dspy_lm_overhead.py`)",
            "",
            "| model given to rlmkit.RLM | ms/turn, median | ms/turn, fastest |",
            "|---|---:|---:|",
        ]
        for name, row in kinds["ms"].items():
            if "error" in row:
                out.append(f"| {name} | {row['error']} | - |")
            else:
                out.append(f"| {name} | {row['median_ms_per_turn']:.2f} | {row['min_ms_per_turn']:.2f} |")
        out.append("")

    local = results.get("embedded")
    if local and "rows" in local:
        out += [
            f"**(6) Embedded model** ({local['prompts']} prompts x {local.get('rounds', 1)} rounds each "
            f"way, max_tokens={local['max_tokens']}, the "
            f"machine's running llama.cpp server, load average {_load(local)}; "
            "`python benchmarks/speed/local_throughput.py`)",
            "",
            "| path | decode tok/s | wall tok/s |",
            "|---|---:|---:|",
        ]
        for r in local["rows"]:
            decode = "-" if r["decode_tok_s"] is None else f"{r['decode_tok_s']:.1f}"
            out.append(f"| {r['path']} | {decode} | {r['wall_tok_s']:.1f} |")
        out.append("")
    elif local:
        out += [f"**(6) Embedded model**: {local.get('error')}", ""]
    else:
        command = "python benchmarks/speed/run.py --local"
        out += [f"**(6) Embedded model**: not measured in this run (`{command}`).", ""]
    return "\n".join(out)


def _load(local: dict) -> str:
    load = local.get("load_average") or {}
    return f"{load.get('start', '?')} -> {load.get('end', '?')}"

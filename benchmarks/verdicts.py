"""rlmkit's targets (issue 8), checked against a results dict: one plain sentence per target."""

from __future__ import annotations

from typing import Any


def _mark(ok: bool) -> str:
    return "MET" if ok else "MISSED"


def _sizes(turns: dict[str, Any]) -> list[int]:
    return sorted(int(s) for s, e in turns.items() if s.isdigit() and "error" not in e)


def verdicts(results: dict[str, Any]) -> list[str]:
    turns = results.get("turns", {}).get("rlmkit", {})
    sizes = _sizes(turns)
    lines: list[str] = []
    if sizes:
        per_turn = {s: turns[str(s)]["turn_overhead_median_s"] for s in sizes}
        worst = max(per_turn.values())
        flat = per_turn[sizes[-1]] / per_turn[sizes[0]]
        lines.append(f"{_mark(worst < 0.005)}: per-turn time under 5 ms (worst median {worst * 1000:.1f} ms).")
        lines.append(f"{_mark(flat <= 2)}: per-turn time flat in context size ({sizes[-1]:.0e} / {sizes[0]:.0e} = "
                     f"{flat:.2f}x, target <= 2x).")
        startup = {s: turns[str(s)]["startup_median_s"] for s in sizes}
        slow = [f"{s:.0e}: {v * 1000:.0f} ms" for s, v in startup.items() if v >= 0.2]
        lines.append(f"{_mark(not slow)}: start-up under 0.2 s" + (f" (not at {', '.join(slow)})." if slow else "."))
        big = [s for s in sizes if s >= 10**7]
        if big:
            added = {s: turns[str(s)]["rss_peak"] - turns[str(s)]["rss_base"] for s in big}
            ratios = {s: added[s] / s for s in big}
            line = (f"{_mark(all(r <= 2.5 for r in ratios.values()))}: memory added by a run <= 2.5x the context, "
                    "the caller's own copy included (" + ", ".join(f"{s:.0e}: {r:.2f}x" for s, r in ratios.items()) + ")")
            if len(big) >= 2:
                lo, hi = big[0], big[-1]
                slope = (added[hi] - added[lo]) / (hi - lo)
                line += (f"; {slope:.2f} bytes per extra character, plus about {(added[lo] - slope * lo) / 1e6:.0f} MB "
                         "fixed per run (the sandbox worker's interpreter)")
            lines.append(line + ".")
        logs = [turns[str(s)]["log_bytes"] for s in sizes]
        lines.append(f"{_mark(max(logs) <= 1.1 * min(logs))}: log size independent of the context "
                     f"({min(logs) / 1e3:.1f}-{max(logs) / 1e3:.1f} kB per run).")
        if not all(turns[str(s)]["answers_ok"] for s in sizes):
            lines.append("MISSED: some rlmkit runs did not return the scripted answer.")
    scaling = results.get("subcalls", {}).get("rlmkit")
    if scaling:
        conc = scaling["concurrency"]
        within = {int(n): r["ratio"] for n, r in scaling["by_n"].items() if int(n) <= conc and r.get("ratio")}
        if within:
            worst_n = max(within, key=within.get)
            lines.append(f"{_mark(within[worst_n] <= 1.15)}: sub-calls within 15% of ideal up to concurrency {conc} "
                         f"(worst N={worst_n}: {within[worst_n]:.2f}x ideal).")
    lines += _diagnostic(results)
    depth = results.get("depth2", {}).get("rlmkit")
    if depth and depth.get("ratio"):
        lines.append(f"(no numeric target) depth 2, 16 children: {depth['wall_s']:.2f} s = {depth['ratio']:.2f}x ideal.")
    clients = results.get("clients", {}).get("ms_per_call")
    if clients:
        best = min(clients[k] for k in ("openai client", "dspy.LM") if k in clients)
        mine = clients.get("rlmkit.LM.acomplete")
        if mine:
            lines.append(f"(context) rlmkit.LM.acomplete costs {mine:.2f} ms/call, {mine / best:.1f}x the best peer "
                         f"client ({best:.2f} ms); a 5-turn run makes 14 calls.")
    local = results.get("embedded", {}).get("rows")
    if local and len(local) >= 2:
        mine = next((r for r in local if r["path"].startswith("rlmkit")), local[0])
        raw = next((r for r in local if "in-process" in r["path"]), local[-1])
        ratio = mine["wall_tok_s"] / raw["wall_tok_s"]
        lines.append(f"{_mark(ratio >= 0.95)}: embedded model through rlmkit at {ratio:.2f}x the raw runtime's "
                     f"tokens/s ({raw['path']}; target >= 0.95).")
    return lines


def _diagnostic(results: dict[str, Any]) -> list[str]:
    """What the rlmkit+httpx column (litellm swapped for one httpx client) says about the misses."""
    turns = results.get("turns", {}).get("rlmkit+httpx", {})
    sizes = _sizes(turns)
    if not sizes:
        return []
    worst = max(turns[str(s)]["turn_overhead_median_s"] for s in sizes)
    line = f"(diagnostic) with litellm replaced by one shared httpx client, rlmkit's worst median turn is {worst * 1000:.1f} ms"
    scaling = results.get("subcalls", {}).get("rlmkit+httpx")
    if scaling:
        within = [r["ratio"] for n, r in scaling["by_n"].items() if int(n) <= scaling["concurrency"] and r.get("ratio")]
        if within:
            line += f" and its worst fan-out up to concurrency {scaling['concurrency']} is {max(within):.2f}x ideal"
    return [line + "."]

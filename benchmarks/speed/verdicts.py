"""rlmkit's performance targets, checked against a results dict: one plain sentence per target."""

from __future__ import annotations

import statistics
from typing import Any

PEERS = ("dspy.RLM", "rlms")


def _mark(ok: bool) -> str:
    return "MET" if ok else "MISSED"


def _sizes(turns: dict[str, Any]) -> list[int]:
    return sorted(int(s) for s, e in turns.items() if s.isdigit() and "error" not in e)


def cold_start_medians(results: dict[str, Any]) -> dict[str, float]:
    """Import + first run per framework: the median of the fresh-process samples when the run took
    them (``results["cold"]``), else the one warm-up driver's figure (results from older runs)."""
    out = {}
    for n in ("rlmkit", *PEERS):
        samples = results.get("cold", {}).get(n)
        if samples:
            out[n] = statistics.median(samples)
        elif n in results.get("imports", {}):
            out[n] = (results["imports"].get(n) or 0) + (
                results.get("first_run", {}).get(n, {}).get("wall_median_s") or 0
            )
    return out


def _first_and_total(turns: dict[str, Any], peers: dict[str, Any], sizes: list[int]) -> list[str]:
    """What a user waits for beyond the per-turn median: the first turn (it waits for the sandbox)
    at or below both peers', and a whole run's framework time at or below half the best peer's."""

    def peer_values(key: str, size: int) -> list[float] | None:
        entries = [t.get(str(size)) for t in peers.values()]
        if not all(e and "error" not in e and e.get(key) is not None for e in entries):
            return None
        return [e[key] for e in entries]

    first_missed, total_missed = [], []
    for s in sizes:
        first, total = turns[str(s)].get("first_turn_median_s"), turns[str(s)].get("total_median_s")
        theirs_first, theirs_total = peer_values("first_turn_median_s", s), peer_values("total_median_s", s)
        if first is None or theirs_first is None or first > min(theirs_first):
            first_missed.append(f"{s:.0e}")
        if total is None or theirs_total is None or total > min(theirs_total) / 2:
            total_missed.append(f"{s:.0e}")

    def figures(key: str) -> str:
        return ", ".join(f"{s:.0e} {turns[str(s)].get(key, 0) * 1000:.1f} ms" for s in sizes)

    return [
        f"{_mark(not first_missed)}: first turn's framework time at or below both peers' at every size"
        + (f" (not at {', '.join(first_missed)})" if first_missed else "")
        + f". rlmkit: {figures('first_turn_median_s')}.",
        f"{_mark(not total_missed)}: framework time per 5-turn run at or below half the best peer's at "
        "every size"
        + (f" (not at {', '.join(total_missed)})" if total_missed else "")
        + f". rlmkit: {figures('total_median_s')}.",
    ]


def verdicts(results: dict[str, Any]) -> list[str]:
    turns = results.get("turns", {}).get("rlmkit", {})
    sizes = _sizes(turns)
    lines: list[str] = []
    if sizes:
        per_turn = {s: turns[str(s)]["turn_overhead_median_s"] for s in sizes}
        worst = max(per_turn.values())
        flat = per_turn[sizes[-1]] / per_turn[sizes[0]]
        peers = {p: results.get("turns", {}).get(p, {}) for p in PEERS}
        beaten = [
            s
            for s in sizes
            if all(
                str(s) in t and "error" not in t[str(s)] and per_turn[s] < t[str(s)]["turn_overhead_median_s"]
                for t in peers.values()
            )
        ]
        lines.append(
            f"{_mark(worst < 0.005 and len(beaten) == len(sizes))}: per-turn time under 5 ms and below both "
            f"peers at every size (worst median {worst * 1000:.1f} ms; below both at "
            f"{', '.join(f'{s:.0e}' for s in beaten) or 'no size'})."
        )
        lines.append(f"(context) per-turn time {sizes[-1]:.0e} / {sizes[0]:.0e} = {flat:.2f}x.")
        startup = {s: turns[str(s)]["startup_median_s"] for s in sizes}
        slower = [
            f"{s:.0e}"
            for s in sizes
            if not all(
                str(s) in t and "error" not in t[str(s)] and startup[s] < t[str(s)]["startup_median_s"]
                for t in peers.values()
            )
        ]
        lines.append(
            f"{_mark(not slower)}: start-up (call to first model request) below both peers at every size"
            + (f" (not at {', '.join(slower)})." if slower else ".")
            + " rlmkit: "
            + ", ".join(f"{s:.0e} {v * 1000:.0f} ms" for s, v in startup.items())
            + "."
        )
        lines += _first_and_total(turns, peers, sizes)
        big = [s for s in sizes if s >= 10**7]
        if big:
            added = {s: turns[str(s)]["rss_peak"] - turns[str(s)]["rss_base"] for s in big}
            ratios = {s: added[s] / s for s in big}
            line = (
                f"{_mark(all(r <= 2.5 for r in ratios.values()))}: memory added by a run "
                "<= 2.5x the context, the caller's own copy included ("
                + ", ".join(f"{s:.0e}: {r:.2f}x" for s, r in ratios.items())
                + ")"
            )
            if len(big) >= 2:
                lo, hi = big[0], big[-1]
                slope = (added[hi] - added[lo]) / (hi - lo)
                line += (
                    f"; {slope:.2f} bytes per extra character, "
                    f"plus about {(added[lo] - slope * lo) / 1e6:.0f} MB "
                    "fixed per run (the sandbox worker's interpreter)"
                )
            lines.append(line + ".")
        logs = [turns[str(s)]["log_bytes"] for s in sizes]
        lines.append(
            f"{_mark(max(logs) <= 1.1 * min(logs))}: log size independent of the context "
            f"({min(logs) / 1e3:.1f}-{max(logs) / 1e3:.1f} kB per run)."
        )
        if not all(turns[str(s)]["answers_ok"] for s in sizes):
            lines.append("MISSED: some rlmkit runs did not return the scripted answer.")
    cold = cold_start_medians(results)
    if "rlmkit" in cold and len(cold) > 1:
        ok = all(cold["rlmkit"] < v for n, v in cold.items() if n != "rlmkit")
        samples = len(results.get("cold", {}).get("rlmkit") or [None])
        lines.append(
            f"{_mark(ok)}: cold start (import + first run, median of {samples} fresh processes) "
            "below both peers (" + ", ".join(f"{n} {v:.2f} s" for n, v in cold.items()) + ")."
        )
    scaling = results.get("subcalls", {}).get("rlmkit")
    if scaling:
        ratios = {
            int(n): r["ratio"] for n, r in scaling["by_n"].items() if 16 <= int(n) <= 256 and r.get("ratio")
        }
        if ratios:
            worst_n = max(ratios, key=ratios.get)
            lines.append(
                f"{_mark(ratios[worst_n] <= 1.10)}: fan-out within 1.10x ideal for N = 16 to 256 "
                f"(worst N={worst_n}: {ratios[worst_n]:.2f}x ideal)."
            )
    depth = results.get("depth2", {}).get("rlmkit")
    if depth and depth.get("ratio"):
        lines.append(
            f"{_mark(depth['ratio'] <= 1.25)}: depth 2, 16 children within 1.25x ideal "
            f"({depth['wall_s']:.2f} s = {depth['ratio']:.2f}x ideal)."
        )
    clients = results.get("clients", {}).get("ms_per_call")
    if clients and "openai client" in clients and "rlmkit.LM.acomplete" in clients:
        mine, sdk = clients["rlmkit.LM.acomplete"], clients["openai client"]
        lines.append(
            f"{_mark(mine <= sdk)}: client cost per call at or below the openai SDK's "
            f"(rlmkit.LM.acomplete {mine:.2f} ms, openai client {sdk:.2f} ms)."
        )
    local = results.get("embedded", {}).get("rows")
    if local and len(local) >= 2:
        mine = next((r for r in local if r["path"].startswith("rlmkit")), local[0])
        raw = next((r for r in local if "in-process" in r["path"]), local[-1])
        ratio = mine["wall_tok_s"] / raw["wall_tok_s"]
        lines.append(
            f"{_mark(ratio >= 0.97)}: embedded model through rlmkit at {ratio:.2f}x the raw runtime's "
            f"tokens/s ({raw['path']}; target >= 0.97)."
        )
    return lines

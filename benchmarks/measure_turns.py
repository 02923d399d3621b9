"""(1) per-turn overhead and start-up vs context size, (3) peak RSS, (4) trajectory log size.

One fixed 5-turn run (inspect, one sub-call, one batch of 8, aggregate, finish) per context size,
against an instant server. A turn's overhead is its wall time (from its root request reaching the
server to the next one, or to the end of the run) minus the time the server was busy with any
request (root or sub-call) in that window: what is left is the framework's own work, its HTTP
client included. Start-up is from the call to the first root request.
"""

from __future__ import annotations

import itertools
import statistics
from typing import Any

from harness import Driver, Hit, RecordingServer, busy_union

from scripts import make_responder

EXPECTED_ANSWER = "8 ok"


def analyse_run(run: dict[str, Any], hits: list[Hit]) -> dict[str, Any]:
    mine = [h for h in hits if run["start"] <= h.start <= run["end"]]
    roots = [h for h in mine if h.kind == "root"]
    if not roots:
        return {"error": "no root request reached the server"}
    edges = [h.start for h in roots] + [run["end"]]
    turns = [(b - a) - busy_union(mine, a, b) for a, b in itertools.pairwise(edges)]
    return {
        "startup_s": roots[0].start - run["start"],
        "turn_overheads_s": turns,
        "root_calls": len(roots),
        "sub_calls": sum(1 for h in mine if h.kind == "sub"),
        "wall_s": run["end"] - run["start"],
        "server_busy_s": busy_union(mine, run["start"], run["end"]),
        "answer_ok": run["answer"].strip() == EXPECTED_ANSWER,
        "answer": run["answer"],
    }


def measure(
    driver: Driver,
    server: RecordingServer,
    sizes: list[int],
    repeats: int,
    timeout_for: dict[int, float],
    repeats_for: dict[int, int] | None = None,
) -> dict[str, Any]:
    """Per size: medians over all turns of all repeats, peak RSS over the process tree, log bytes."""
    server.configure(make_responder(driver.convention, "turns"))
    out: dict[str, Any] = {}
    for size in sizes:
        server.take_hits()
        try:
            job = {"url": server.url, "size": size, "repeats": (repeats_for or {}).get(size, repeats)}
            result = driver.run(job, timeout=timeout_for.get(size, 180))
        except TimeoutError as exc:
            out[str(size)] = {"error": str(exc)}
            break  # the driver was killed; larger sizes would only take longer
        hits = server.take_hits()
        if "error" in result:
            out[str(size)] = {
                "error": result["error"],
                "rss_peak": result["rss_peak"],
                "rss_base": result["rss_base"],
            }
            continue
        runs = [analyse_run(run, hits) for run in result["runs"]]
        good = [r for r in runs if "error" not in r]
        turns = [t for r in good for t in r["turn_overheads_s"]]
        out[str(size)] = {
            "turn_overhead_median_s": statistics.median(turns) if turns else None,
            "turn_overhead_max_s": max(turns) if turns else None,
            "startup_median_s": statistics.median(r["startup_s"] for r in good) if good else None,
            "wall_median_s": statistics.median(r["wall_s"] for r in good) if good else None,
            "root_calls": [r["root_calls"] for r in good],
            "sub_calls": [r["sub_calls"] for r in good],
            "answers_ok": all(r["answer_ok"] for r in good) and len(good) == len(runs),
            "answers": sorted({r["answer"] for r in good}),
            "log_bytes": statistics.median(run["log_bytes"] for run in result["runs"]),
            "rss_base": result["rss_base"],
            "rss_peak": result["rss_peak"],
            "runs": runs,
        }
    return out

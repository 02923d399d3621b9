"""(1) per-turn overhead, first turn, total and start-up vs context size, (3) peak RSS, (4) log size.

One fixed 5-turn run (inspect, one sub-call, one batch of 8, aggregate, finish) per context size,
against an instant server. A turn's overhead is its wall time (from its root request reaching the
server to the next one, or to the end of the run) minus the time the server was busy with any
request (root or sub-call) in that window: what is left is the framework's own work, its HTTP
client included. Start-up is from the call to the first root request. The first turn is shown
apart (it also waits for the sandbox, if the framework's is not ready), and so is the total: start-up
plus every turn, the framework's whole share of the run.
"""

from __future__ import annotations

import itertools
import statistics
from typing import Any

from harness import Driver, Hit, RecordingServer, busy_union
from scripted_run import make_responder

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


def first_run(driver: Driver, server: RecordingServer) -> dict[str, Any]:
    """A driver's first 5-turn run (1e3 chars): lazy imports and first connections happen here."""
    try:
        return summarize([run_job(driver, server, 1_000, 1, {})])
    except TimeoutError as exc:
        return {"error": str(exc)}


def interleaved(
    drivers: dict[str, Driver],
    server: RecordingServer,
    sizes: list[int],
    repeats: int,
    timeout_for: dict[int, float],
    repeats_for: dict[int, int] | None = None,
) -> dict[str, dict[str, Any]]:
    """Several frameworks, size by size, one run at a time in rotation (rlmkit, dspy.RLM, rlms;
    then dspy.RLM, rlms, rlmkit; ...). This 2-core VM has slow minutes: run one framework after
    the other and a slow minute lands on whichever ran then, and the ratios between frameworks,
    which the targets are, measure the machine. In rotation it lands on all of them alike."""
    out: dict[str, dict[str, Any]] = {name: {} for name in drivers}
    names, killed = list(drivers), set()
    for size in sizes:
        jobs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
        for rep in range((repeats_for or {}).get(size, repeats)):
            for name in names[rep % len(names) :] + names[: rep % len(names)]:
                if name in killed:
                    continue  # larger sizes would only take longer
                try:
                    jobs[name].append(run_job(drivers[name], server, size, 1, timeout_for))
                except TimeoutError as exc:
                    out[name][str(size)] = {"error": str(exc)}
                    killed.add(name)
        for name, done in jobs.items():
            if done and str(size) not in out[name]:
                out[name][str(size)] = summarize(done)
    return out


def run_job(
    driver: Driver, server: RecordingServer, size: int, repeats: int, timeout_for: dict[int, float]
) -> dict[str, Any]:
    """One job of ``repeats`` runs at ``size``: its result, with each run analysed against the
    server's log. Raises TimeoutError when the driver was killed."""
    server.configure(make_responder(driver.convention, "turns"))
    server.take_hits()
    result = driver.run(
        {"url": server.url, "size": size, "repeats": repeats}, timeout=timeout_for.get(size, 180)
    )
    hits = server.take_hits()
    if "error" not in result:
        result["analysed"] = [analyse_run(run, hits) for run in result["runs"]]
    return result


def summarize(jobs: list[dict[str, Any]]) -> dict[str, Any]:
    """One size's figures over one or more jobs: medians over all turns of all runs; memory from
    the job that added the most (its base and peak)."""
    failed = [job for job in jobs if "error" in job]
    if failed:
        return {k: failed[0][k] for k in ("error", "rss_peak", "rss_base")}
    runs = [run for job in jobs for run in job["analysed"]]
    good = [r for r in runs if "error" not in r]
    turns = [t for r in good for t in r["turn_overheads_s"]]
    memory = max(jobs, key=lambda job: job["rss_peak"] - job["rss_base"])
    firsts = [r["turn_overheads_s"][0] for r in good if r["turn_overheads_s"]]
    totals = [r["startup_s"] + sum(r["turn_overheads_s"]) for r in good]
    return {
        "turn_overhead_median_s": statistics.median(turns) if turns else None,
        # what the per-turn median hides: the first turn also waits for the sandbox to be ready
        "first_turn_median_s": statistics.median(firsts) if firsts else None,
        # a run's whole framework time: start-up plus every turn (its wall time minus server time)
        "total_median_s": statistics.median(totals) if totals else None,
        "turn_overhead_max_s": max(turns) if turns else None,
        "startup_median_s": statistics.median(r["startup_s"] for r in good) if good else None,
        "wall_median_s": statistics.median(r["wall_s"] for r in good) if good else None,
        "root_calls": [r["root_calls"] for r in good],
        "sub_calls": [r["sub_calls"] for r in good],
        "answers_ok": all(r["answer_ok"] for r in good) and len(good) == len(runs),
        "answers": sorted({r["answer"] for r in good}),
        "log_bytes": statistics.median(run["log_bytes"] for job in jobs for run in job["runs"]),
        "rss_base": memory["rss_base"],
        "rss_peak": memory["rss_peak"],
        "runs": runs,
    }

"""(2) sub-call scaling and (5) depth 2: how close a fan-out gets to ideal concurrency.

Both time one root turn, server side: from the moment the root's reply (the fan-out code) is
built to the moment the root's next request arrives. Root requests are instant; sub-calls and
child-RLM requests each wait ``latency`` seconds. Ideal: ceil(N / concurrency) x latency for N
sub-calls; 2 x latency for children that each make one request and one sub-call, all at once.
"""

from __future__ import annotations

import math
from typing import Any

from harness import Driver, RecordingServer
from scripted_run import make_responder

# What each framework lets N sub-calls run at once, as configured in the drivers.
SUBCALL_CONCURRENCY = {
    "rlmkit": 16,  # RLM(max_concurrency=16) and LM(max_concurrency=16)
    "dspy.RLM": 8,  # llm_query_batched: ThreadPoolExecutor(max_workers=8), fixed in dspy 3.4.1
    "rlms": 16,  # LMHandler(batch_max_concurrent=16), its default
}


def fanout_turn_s(hits: list, first_kind: str = "root", turn: int = 1) -> float | None:
    """Seconds from root reply ``turn - 1`` to root request ``turn`` (the fan-out turn)."""
    roots = [h for h in hits if h.kind == first_kind]
    if len(roots) < turn + 1:
        return None
    return roots[turn].start - roots[turn - 1].end


def subcall_scaling(
    driver: Driver, server: RecordingServer, counts: list[int], latency: float, best_of_up_to: int = 64
) -> dict[str, Any]:
    """Best of two runs for N <= ``best_of_up_to`` (noise only ever adds to a wall time), one above."""
    concurrency = SUBCALL_CONCURRENCY[driver.name]
    rows = {}
    for n in counts:
        server.configure(make_responder(driver.convention, "subcalls", n), {"sub": latency, "child": latency})
        walls = []
        for _ in range(2 if n <= best_of_up_to else 1):
            try:
                result = driver.run(
                    {"url": server.url, "size": 10_000, "repeats": 1}, timeout=60 + n * latency
                )
            except TimeoutError as exc:
                rows[str(n)] = {"error": str(exc)}
                return {"concurrency": concurrency, "latency_s": latency, "by_n": rows}
            hits = server.take_hits()
            walls.append(fanout_turn_s(hits, turn=2))  # turn 1 only inspects (see scripts.subcall_steps)
        ideal = math.ceil(n / concurrency) * latency
        wall = min((w for w in walls if w is not None), default=None)
        rows[str(n)] = {
            "wall_s": wall,
            "ideal_s": ideal,
            "ratio": wall / ideal if wall else None,
            "walls_s": walls,
            "sub_calls": sum(1 for h in hits if h.kind == "sub"),
            "answer_ok": "error" not in result and result["runs"][0]["answer"].strip() == str(n),
            **({"error": result["error"]} if "error" in result else {}),
        }
    return {"concurrency": concurrency, "latency_s": latency, "by_n": rows}


def depth2(driver: Driver, server: RecordingServer, children: int, latency: float) -> dict[str, Any]:
    server.configure(
        make_responder(driver.convention, "depth2", children), {"sub": latency, "child": latency}
    )
    job = {"url": server.url, "size": 10_000, "repeats": 1, "max_depth": 2, "concurrency": children}
    try:
        result = driver.run(job, timeout=120)
    except TimeoutError as exc:
        return {"error": str(exc)}
    hits = server.take_hits()
    wall = fanout_turn_s(hits)
    ideal = 2 * latency
    out = {
        "children": children,
        "latency_s": latency,
        "wall_s": wall,
        "ideal_s": ideal,
        "ratio": wall / ideal if wall else None,
        "child_requests": sum(1 for h in hits if h.kind == "child"),
        "sub_calls": sum(1 for h in hits if h.kind == "sub"),
        "rss_peak": result["rss_peak"],
        "rss_base": result["rss_base"],
    }
    if "error" in result:
        out["error"] = result["error"]
    else:
        out["answer"] = result["runs"][0]["answer"]
        out["answer_ok"] = out["answer"].strip() == str(children)
    return out

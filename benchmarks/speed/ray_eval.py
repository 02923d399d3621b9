"""Eval on Ray: throughput of 1 and 2 Ray worker nodes, and scores equal to the thread executor's.

    nice -n 10 python benchmarks/speed/ray_eval.py [--n 16] [--latency 0.2]

A local Ray cluster (``ray.cluster_utils.Cluster``: a head node that runs no tasks, plus 1 or
2 worker nodes of 1 CPU each, so each node runs one example at a time) evaluates a needle
suite against the scripted OpenAI-compatible server (``rlmkit/testing/server.py``) answering
every call after ``--latency`` seconds. Each example is a real RLM run in a process sandbox:
3 root turns and 1 ``llm_query`` sub-call, so 4 calls. Every Ray worker is warmed up on
other examples first (its first task imports dspy and litellm), so the timed runs measure
steady throughput. The same examples then run on 2 threads (``programs.evaluate``'s default
executor) to compare scores.
"""

from __future__ import annotations

import argparse
import time

from _bootstrap import ROOT as REPO

import rlmkit
from programs import evaluate, program_for
from programs.tasks import generate
from rlmkit.testing.server import ScriptedServer, is_root_request

ROOT_TURNS = [
    "```repl\nprint(len(context), question[:80])\n```",
    "```repl\nnote = llm_query('Say ok.')\nprint(note)\n```",
    """```repl
import re
key = re.search(r"for (\\S+) mentioned", question).group(1)
values = re.findall(r"special magic \\w+ for " + re.escape(key) + r" is: (\\S+?)\\.(?:\\s|$)", context)
SUBMIT(answer=values)
```""",
]


def responder(body: dict) -> str:
    if is_root_request(body):
        turn = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
        return ROOT_TURNS[min(turn, len(ROOT_TURNS) - 1)]
    return "ok"


def factory(url: str):
    lm = rlmkit.LM("openai/scripted", api_base=url, api_key="test", cache=False, num_retries=0)
    return lambda: program_for("needle", lm=lm, max_iterations=5)


def ray_run(url: str, nodes: int, warm, timed) -> tuple[float, list[float]]:
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    for _ in range(nodes):
        cluster.add_node(num_cpus=1)
    ray.init(
        address=cluster.address,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
        runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}},
    )
    try:
        evaluate(factory(url), warm, ray=True)  # one task per node at a time: every node's worker warms up
        start = time.monotonic()
        result = evaluate(factory(url), timed, ray=True)
        wall = time.monotonic() - start
    finally:
        ray.shutdown()
        cluster.shutdown()
    return wall, [row.score for row in result.rows]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=16, help="timed examples")
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per model call")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    timed = generate("needle", n=args.n, length=8_000, seed=args.seed)
    warm = generate("needle", n=4, length=8_000, seed=args.seed + 1000)
    with ScriptedServer(responder, latency=args.latency) as server:
        one_wall, one_scores = ray_run(server.url, 1, warm, timed)
        two_wall, two_scores = ray_run(server.url, 2, warm, timed)
        start, calls = time.monotonic(), len(server.requests)
        threads = evaluate(factory(server.url), timed, workers=2)
        thread_wall, calls = time.monotonic() - start, len(server.requests) - calls
    thread_scores = [row.score for row in threads.rows]
    same = one_scores == two_scores == thread_scores
    print(
        f"examples: {args.n} needle (length 8,000, seed {args.seed}); {calls / args.n:.1f} calls each "
        f"at {args.latency * 1000:.0f} ms"
    )
    print("| executor | examples/s | wall s | mean score |")
    print("|---|---:|---:|---:|")
    for name, wall, scores in (
        ("Ray, 1 worker node", one_wall, one_scores),
        ("Ray, 2 worker nodes", two_wall, two_scores),
        ("threads (2)", thread_wall, thread_scores),
    ):
        print(f"| {name} | {args.n / wall:.2f} | {wall:.1f} | {sum(scores) / len(scores):.3f} |")
    print(
        f"speed-up, 2 nodes vs 1: {one_wall / two_wall:.2f}x; "
        f"per-example scores equal across all three: {same}"
    )


if __name__ == "__main__":
    main()

"""``rlmkit serve --replicas``: 2 replicas against 1 under concurrent streams, and a replica killed
between two calls of a session; writes the ``replicas`` entry of benchmarks/results/serve.json
(the other entries are serve_bench.py's and stay as they are).

    python benchmarks/speed/replicas_bench.py [--concurrent 64] [--bursts 3]
    python benchmarks/render_docs.py           # then: the tables in docs/guide/serving.md

Both layouts run on one local Ray instance (2 CPUs, no dashboard) through the same path, Ray
Serve's proxy, the front door and the replicas, so the ratio is what the second replica adds.
The program is a real ``rlmkit.RLM`` (process sandbox) with a scripted in-process model whose one
turn computes the answer from the request's own inputs and counts the calls of its REPL, so an
answer delivered to the wrong request, or a session that lost its variables, cannot match.

- **Throughput**: ``--bursts`` bursts of ``--concurrent`` streaming requests at once (the openai
  SDK's async client), after a warm-up burst; requests per second of each burst, the median
  burst of 2 replicas over that of 1. Every answer must be its own request's.
- **A replica killed mid-session**: a session answers two calls, the replica holding it is
  killed (``ray.kill``), and the next call must answer from another replica with the session's
  variable intact (restored from the shared sessions directory); the seconds that call took.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _bootstrap import RESULTS, ROOT

HERE = Path(__file__).resolve().parent
RESULTS = RESULTS / "serve.json"
KEY = "bench-key"
NOTE = (
    "Small n on a busy 2-core machine shared with other work: both layouts compete for the same "
    "two cores, so the ratio says what a second replica costs or gains here, not on a machine "
    "with a core per replica"
)


def scripted(messages: list[dict]) -> str:
    return (
        "```repl\ntry:\n    count += 1\nexcept NameError:\n    count = 1\n"
        "SUBMIT(answer=f'{question.upper()}:{len(context)}:{count}')\n```"
    )


def program():
    import rlmkit

    return rlmkit.RLM("context, question -> answer", lm=rlmkit.FunctionLM(scripted))


def expected(context: str, question: str, count: int = 1) -> str:
    return f"{question.upper()}:{len(context)}:{count}"


async def burst(url: str, n: int, tag: str) -> dict:
    import openai

    async def one(client, i: int) -> bool:
        context, question = "x" * (i * 7 + 1), f"{tag}-{i}"  # each request its own context length
        stream = await client.chat.completions.create(
            model="rlmkit",
            messages=[{"role": "user", "content": question}],
            stream=True,
            extra_body={"inputs": {"context": context}},
        )
        content = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        return content == expected(context, question)

    async with openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0, timeout=300) as client:
        started = time.perf_counter()
        outcomes = await asyncio.gather(*(one(client, i) for i in range(n)), return_exceptions=True)
        wall = time.perf_counter() - started
    return {
        "completed": sum(1 for o in outcomes if o is True),
        "mixed_up": sum(1 for o in outcomes if o is False),
        "failed": [repr(o)[:200] for o in outcomes if isinstance(o, BaseException)],
        "wall_s": wall,
        "per_s": n / wall,
    }


def wait_ready(url: str, timeout: float = 180) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health/ready", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)  # Ray Serve is starting the replicas
    raise RuntimeError("the replicas did not become ready")


def throughput(replicas: int, n: int, bursts: int) -> dict:
    from rlmkit.serve.replicas.deployment import running_replicas

    with (
        tempfile.TemporaryDirectory() as sessions,
        running_replicas(
            program, sessions_dir=sessions, replicas=replicas, api_key=KEY, max_running=16, max_waiting=128
        ) as url,
    ):
        wait_ready(url)
        asyncio.run(burst(url, 8, "warm"))
        runs = [asyncio.run(burst(url, n, f"burst{k}")) for k in range(bursts)]
    return {"replicas": replicas, "bursts": runs, "median_per_s": statistics.median(r["per_s"] for r in runs)}


def killed_mid_session() -> dict:
    import httpx
    import ray

    from rlmkit.serve.replicas.deployment import REPLICA_HEADER, running_replicas

    headers = {"Authorization": f"Bearer {KEY}"}

    def ask(client, url: str, session: str, question: str) -> tuple[str, str]:
        reply = client.post(
            f"{url}/v1/chat/completions",
            json={"model": "rlmkit", "messages": [{"role": "user", "content": question}], "session": session},
        )
        reply.raise_for_status()
        return reply.json()["choices"][0]["message"]["content"], reply.headers[REPLICA_HEADER]

    with (
        tempfile.TemporaryDirectory() as sessions,
        running_replicas(program, sessions_dir=sessions, replicas=2, api_key=KEY) as url,
        httpx.Client(timeout=120, headers=headers) as client,
    ):
        wait_ready(url)
        opened = client.post(f"{url}/v1/sessions", json={"inputs": {"context": "0123456789"}})
        session, holder = opened.json()["id"], opened.headers[REPLICA_HEADER]
        before = [ask(client, url, session, q) for q in ("one", "two")]
        name = next(a for a in ray.util.list_named_actors(all_namespaces=True) if a["name"].endswith(holder))
        ray.kill(ray.get_actor(name["name"], namespace=name["namespace"]), no_restart=True)
        started = time.perf_counter()
        try:
            answer, answered_by = ask(client, url, session, "three")
        except httpx.HTTPError as exc:  # recorded as not answered: the row says so
            answer, answered_by = f"{type(exc).__name__}: {exc}", holder
        took = time.perf_counter() - started
    kept = answer == expected("0123456789", "three", 3)
    return {
        "held_by_one_replica": all(by == holder for _, by in before),
        "answered": answered_by != holder or kept,
        "variables_kept": kept,
        "answered_by_another": answered_by != holder,
        "seconds_to_answer": took,
        "met": kept and answered_by != holder,
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--concurrent", type=int, default=64)
    parser.add_argument("--bursts", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    import provenance
    import ray

    from rlmkit.serve.replicas.deployment import runtime_env

    load = os.getloadavg()[0]
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(HERE)])  # the replicas import this script
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env=runtime_env())
    try:
        one = throughput(1, args.concurrent, args.bursts)
        two = throughput(2, args.concurrent, args.bursts)
        killed = killed_mid_session()
    finally:
        ray.shutdown()
    runs = one["bursts"] + two["bursts"]
    result = {
        "meta": {**provenance.record(__file__, argv, load), "note": NOTE, "ray": ray.__version__},
        "requests": args.concurrent,
        "one": one,
        "two": two,
        "ratio": two["median_per_s"] / one["median_per_s"],
        "all_answered": all(r["completed"] == args.concurrent for r in runs),
        "killed_mid_session": killed,
    }
    result["met"] = result["all_answered"] and killed["met"]
    doc = json.loads(args.out.read_text()) if args.out.exists() else {}
    args.out.write_text(json.dumps({**doc, "replicas": result}, indent=1) + "\n")
    print(json.dumps({"ratio": result["ratio"], "met": result["met"]}))
    return result


if __name__ == "__main__":
    main()

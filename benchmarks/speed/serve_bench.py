"""What ``rlmkit serve`` adds to a call, how it holds up under 64 concurrent streams, and what it
does with bad input; writes benchmarks/results/serve.json.

    python benchmarks/speed/serve_bench.py [--rounds 400] [--concurrent 64] [--bad 20]
    python benchmarks/render_docs.py           # then: the tables in docs/guide/serving.md

(``replicas_bench.py`` measures ``rlmkit serve --replicas`` into the same file's ``replicas``.)

The program is the real ``rlmkit.RLM`` with the default (process) sandbox and a scripted
in-process model (``FunctionLM``) whose one turn computes the answer from the request's own
inputs, so an answer delivered to the wrong request cannot match it. The server is the app under
uvicorn in a process of its own (``python -m uvicorn serve_bench:make_app --factory``), as it is
deployed; the client is httpx with one kept-alive connection.

- **Overhead**: the same call in this process (``rlm(...)``) and over HTTP, interleaved round
  by round, each round starting one kind later than the last: chat completions and the
  Responses API (``store: false``: a plain call, as the in-process one is), each whole and
  streamed; the difference of the medians, and of the p99s. Targets: <= 3 ms median, <= 5 ms
  p99, for both routes' whole responses.
- **Concurrency**: ``--concurrent`` streaming requests at once from the openai SDK's async
  client, three bursts; every answer must be its own request's. The server's memory (RSS of its
  process tree) after warm-up, and after each burst once it reports itself idle. Target: all
  complete, none mixed up, memory back within 10% of the warm level.
- **Bad input**: ``--bad`` requests of each kind (malformed JSON, a body over the limit, wrong
  types, an unknown session, no key, a wrong key, a client leaving mid-stream); each must get
  its documented status, the server must answer a good call after, and no sandbox worker or
  session may be left behind (the server's child processes and live sessions as before).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from _bootstrap import RESULTS, ROOT

HERE = Path(__file__).resolve().parent
RESULTS = RESULTS / "serve.json"
KEY = "bench-key"
BODY_LIMIT = 256 * 1024
TARGET_MEDIAN_MS, TARGET_P99_MS, TARGET_MEMORY = 3.0, 5.0, 0.10


# ------------------------------------------------------------------ the served program
def scripted(messages: list[dict]) -> str:
    return "```repl\nSUBMIT(answer=f'{question.upper()}:{len(context)}')\n```"


def program():
    import rlmkit

    return rlmkit.RLM("context, question -> answer", lm=rlmkit.FunctionLM(scripted))


def make_app():
    """``uvicorn serve_bench:make_app --factory``: the app the server process runs."""
    from rlmkit.serve import app

    return app(program(), api_key=KEY, max_body_bytes=BODY_LIMIT, max_running=16, max_waiting=128)


def expected(context: str, question: str) -> str:
    return f"{question.upper()}:{len(context)}"


# ------------------------------------------------------------------ the server process
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server() -> tuple[subprocess.Popen, str]:
    import httpx

    port = free_port()
    command = [sys.executable, "-m", "uvicorn", "serve_bench:make_app", "--factory", "--host", "127.0.0.1",
               "--port", str(port), "--no-access-log", "--log-level", "warning"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE)])}
    server = subprocess.Popen(command, cwd=ROOT, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return server, url
        except httpx.TransportError:
            time.sleep(0.05)  # not listening yet: uvicorn is importing the app
    server.kill()
    raise RuntimeError("the server did not start")


def tree_rss(pid: int) -> int:
    import psutil

    proc = psutil.Process(pid)
    return sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)])


def children(pid: int) -> int:
    import psutil

    return len(psutil.Process(pid).children(recursive=True))


def wait_children(pid: int, at_most: int, timeout: float = 30.0) -> float | None:
    """Seconds until the server has at most ``at_most`` child processes (None: not in time)."""
    started = time.monotonic()
    while children(pid) > at_most:
        if time.monotonic() - started > timeout:
            return None
        time.sleep(0.05)
    return time.monotonic() - started


def wait_idle(client, url: str, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        health = client.get(f"{url}/health").json()
        if health["running"] == 0 and health["waiting"] == 0:
            return health
        if time.monotonic() > deadline:
            raise RuntimeError(f"the server is not idle: {health}")
        time.sleep(0.05)


def chat(question: str, context: str = "", **extra) -> dict:
    return {
        "model": "rlmkit",
        "messages": [{"role": "system", "content": context}, {"role": "user", "content": question}]
        if context
        else [{"role": "user", "content": question}],
        **extra,
    }


# the calls of the overhead's rotation: in process, then over HTTP by the suffix of their rows
KINDS = ["in_process", "", "_streamed", "_responses", "_responses_streamed"]


def respond(question: str, **extra) -> dict:
    """The Responses API's request for the same call (stored: no, as a plain call is not)."""
    return {"model": "rlmkit", "input": question, "store": False, **extra}


def quantiles(samples: list[float]) -> dict:
    ordered = sorted(samples)
    return {
        "median_ms": statistics.median(ordered) * 1000,
        "p99_ms": ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] * 1000,
        "n": len(ordered),
    }


# ------------------------------------------------------------------ the measurements
def cpu_s(proc) -> float:
    times = proc.cpu_times()
    return times.user + times.system


def overhead(server: subprocess.Popen, url: str, rounds: int) -> dict:
    """Wall time of each call in this process and over HTTP, interleaved; and CPU: this
    process's for an in-process call, the server process's for a served one (neither counts
    the sandbox worker, a process of its own either way). CPU is the steadier figure on a
    loaded machine: waiting for a core shows in wall time, not in CPU time."""
    import httpx
    import psutil

    rlm = program()
    server_proc = psutil.Process(server.pid)
    headers = {"Authorization": f"Bearer {KEY}"}
    took: dict[str, list[float]] = {kind: [] for kind in KINDS}
    cpu_local, cpu_remote = [], []
    with httpx.Client(headers=headers, timeout=60) as client:

        def whole(path: str, body: dict, answer: Callable[[dict], str], question: str) -> None:
            assert answer(client.post(f"{url}/v1/{path}", json=body).json()) == expected("", question)

        def streamed(path: str, body: dict) -> None:
            with client.stream("POST", f"{url}/v1/{path}", json=body) as r:
                for _ in r.iter_bytes():
                    pass

        def in_process(q: str) -> None:
            cpu = time.process_time()
            assert rlm(context="", question=q).answer == expected("", q)
            cpu_local.append(time.process_time() - cpu)

        def chat_whole(q: str) -> None:
            cpu = cpu_s(server_proc)
            whole("chat/completions", chat(q), lambda r: r["choices"][0]["message"]["content"], q)
            cpu_remote.append(cpu_s(server_proc) - cpu)

        calls = {
            "in_process": in_process,
            "": chat_whole,
            "_streamed": lambda q: streamed("chat/completions", chat(q, stream=True)),
            "_responses": lambda q: whole(
                "responses", respond(q), lambda r: r["output"][-1]["content"][0]["text"], q
            ),
            "_responses_streamed": lambda q: streamed("responses", respond(q, stream=True)),
        }
        for i in range(rounds + 20):  # the first 20 of each are warm-up
            # each round starts one kind later: none always runs right after the same others (a
            # call's sandbox worker is replaced in the background, on the same cores)
            order = KINDS[i % len(KINDS) :] + KINDS[: i % len(KINDS)]
            for kind in order:
                started = time.perf_counter()
                calls[kind](f"q{i}")
                took[kind].append(time.perf_counter() - started)
    local = took["in_process"][20:]
    cpu = {
        "in_process_ms": statistics.mean(cpu_local[20:]) * 1000,
        "server_ms": statistics.mean(cpu_remote[20:]) * 1000,
    }
    cpu["added_ms"] = cpu["server_ms"] - cpu["in_process_ms"]
    q_local = quantiles(local)

    def added(q: dict) -> dict:
        return {"median_ms": q["median_ms"] - q_local["median_ms"], "p99_ms": q["p99_ms"] - q_local["p99_ms"]}

    rows = {kind: quantiles(samples[20:]) for kind, samples in took.items() if kind != "in_process"}
    result = {"in_process": q_local}
    result.update({f"over_http{suffix}": q for suffix, q in rows.items()})
    result.update({f"added{suffix}": added(q) for suffix, q in rows.items()})
    result["cpu_mean"] = cpu
    result["met"] = all(
        result[f"added{suffix}"]["median_ms"] <= TARGET_MEDIAN_MS
        and result[f"added{suffix}"]["p99_ms"] <= TARGET_P99_MS
        for suffix in ("", "_responses")
    )
    return result


async def burst(url: str, n: int, tag: str) -> dict:
    import openai

    async def one(client, i: int) -> bool:
        context, question = "x" * (i * 7 + 1), f"{tag}-{i}"  # each request its own context length
        stream = await client.chat.completions.create(**chat(question, context, stream=True))
        content = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        return content == expected(f"system: {context}", question)

    async with openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0, timeout=300) as client:
        started = time.perf_counter()
        outcomes = await asyncio.gather(*(one(client, i) for i in range(n)), return_exceptions=True)
        wall = time.perf_counter() - started
    return {
        "completed": sum(1 for o in outcomes if o is True),
        "mixed_up": sum(1 for o in outcomes if o is False),
        "failed": [repr(o)[:200] for o in outcomes if isinstance(o, BaseException)],
        "wall_s": wall,
    }


def concurrency(server: subprocess.Popen, url: str, n: int) -> dict:
    import httpx

    with httpx.Client(timeout=60) as client:
        asyncio.run(burst(url, 8, "warm"))
        wait_idle(client, url)
        warm = tree_rss(server.pid)
        bursts = []
        for k in range(3):
            result = asyncio.run(burst(url, n, f"burst{k}"))
            wait_idle(client, url)
            bursts.append({**result, "rss_after_bytes": tree_rss(server.pid)})
    worst = max(b["rss_after_bytes"] for b in bursts) / warm - 1
    return {
        "requests": n,
        "bursts": bursts,
        "rss_warm_bytes": warm,
        "rss_growth": worst,
        "met": all(b["completed"] == n for b in bursts) and abs(worst) <= TARGET_MEMORY,
    }


def bad_input(server: subprocess.Popen, url: str, per_kind: int) -> dict:
    import httpx

    good = {"Authorization": f"Bearer {KEY}"}
    api = f"{url}/v1/chat/completions"

    def leave_mid_stream(client) -> httpx.Response:
        with client.stream("POST", api, json=chat("leaving", stream=True), headers=good) as response:
            next(response.iter_lines())
            return response  # 200 when it began; the client then goes

    wrong_types = {"model": "rlmkit", "messages": "not a list"}
    bad_inputs = {**chat("q"), "inputs": {"context": ["not", "text"]}}
    no_session = {**chat("q"), "session": "f" * 32}
    kinds = {  # kind: (its documented status, the request)
        "malformed JSON": (400, lambda c: c.post(api, content=b'{"model": ', headers=good)),
        "body over the limit": (413, lambda c: c.post(api, json=chat("x" * BODY_LIMIT), headers=good)),
        "wrong types": (400, lambda c: c.post(api, json=wrong_types, headers=good)),
        "inputs of the wrong type": (422, lambda c: c.post(api, json=bad_inputs, headers=good)),
        "unknown session": (404, lambda c: c.post(api, json=no_session, headers=good)),
        "missing key": (401, lambda c: c.post(api, json=chat("q"))),
        "wrong key": (401, lambda c: c.post(api, json=chat("q"), headers={"Authorization": "Bearer no"})),
        "client leaves mid-stream": (200, leave_mid_stream),
    }
    with httpx.Client(timeout=60) as client:
        wait_idle(client, url)
        before = {"children": children(server.pid), **client.get(f"{url}/health").json()}
        rows = {}
        for kind, (status, send) in kinds.items():
            got = [send(client).status_code for _ in range(per_kind)]
            rows[kind] = {"expected": status, "got": sorted(set(got)), "ok": all(s == status for s in got)}
        health = wait_idle(client, url)
        after_good = client.post(api, json=chat("after"), headers=good).json()["choices"][0]["message"][
            "content"
        ]
        health = wait_idle(client, url)
        # a cancelled run's worker is stopped, and the pool refilled, in the background: wait
        # (up to 30 s) for the count to come back, and report what it came back to
        settled = wait_children(server.pid, before["children"])
        after = {"children": children(server.pid), "children_settled_s": settled, **health}
    return {
        "per_kind": per_kind,
        "kinds": rows,
        "serves_after": after_good == expected("", "after"),
        "before": before,
        "after": after,
        "met": all(r["ok"] for r in rows.values())
        and after_good == expected("", "after")
        and after["children"] <= before["children"]
        and after["sessions"] == before["sessions"] == 0,
    }


def versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for name in ("fastapi", "uvicorn", "starlette", "httptools", "uvloop", "httpx", "openai"):
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            found.append(f"{name} not installed")
    return ", ".join(found)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=400)
    parser.add_argument("--concurrent", type=int, default=64)
    parser.add_argument("--bad", type=int, default=20)
    parser.add_argument("--out", type=Path, default=RESULTS)
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    import provenance

    load = os.getloadavg()[0]
    server, url = start_server()
    try:
        results = {
            "overhead": overhead(server, url, args.rounds),
            "concurrency": concurrency(server, url, args.concurrent),
            "bad_input": bad_input(server, url, args.bad),
        }
    finally:
        server.terminate()
        server.wait(60)
    meta = {**provenance.record(__file__, argv, load), "versions": versions()}
    kept = json.loads(args.out.read_text()) if args.out.exists() else {}
    kept = {k: v for k, v in kept.items() if k == "replicas"}  # replicas_bench.py's entry stays
    args.out.write_text(json.dumps({"meta": meta, **results, **kept}, indent=1) + "\n")
    print(json.dumps({k: v.get("met") for k, v in results.items()}))
    return results


if __name__ == "__main__":
    main()

"""What one LM call costs on the client side, and local generation speed through rlmkit.

    python benchmarks/lm_client_cost.py            # client overhead against an instant local server
    python benchmarks/lm_client_cost.py --local    # + embedded model tokens/s: rlmkit.LM vs xllamacpp

Client overhead: 100 sequential calls per client against the ScriptedServer (127.0.0.1,
instant replies, tiny message; in a child process), repeated in interleaved rounds so a busy
machine hurts every client alike; the table shows the median round. Wall ms/call moves with
the machine's load; client CPU ms/call (this process only) is the steadier measure of what
the client itself costs. Plain litellm is measured before rlmkit changes any litellm setting
(rlmkit's settings are process-wide). Prints markdown tables.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rlmkit.testing.server import ScriptedServer

MESSAGES = [{"role": "user", "content": "hi"}]


def serve_in_child(ports: multiprocessing.Queue, stop: multiprocessing.Event) -> None:
    with ScriptedServer(lambda body: "hello") as server:
        ports.put(server.url)
        stop.wait()


def per_call_ms(fn: Callable[[], object], calls: int) -> tuple[float, float]:
    """(wall ms, this process's CPU ms) per call."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - wall) / calls * 1000, (time.process_time() - cpu) / calls * 1000


def async_per_call_ms(make: Callable[[], object], calls: int) -> tuple[float, float]:
    async def run() -> tuple[float, float]:
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(calls):
            await make()
        return (time.perf_counter() - wall) / calls * 1000, (time.process_time() - cpu) / calls * 1000

    return asyncio.run(run())


def client_overhead(calls: int, rounds: int) -> list[tuple[str, float, float]]:
    """The server runs in a child process, so CPU time here is the client's alone."""
    ctx = multiprocessing.get_context("fork")  # before litellm starts any thread
    ports, stop = ctx.Queue(), ctx.Event()
    child = ctx.Process(target=serve_in_child, args=(ports, stop), daemon=True)
    child.start()
    url = ports.get(timeout=30)
    try:
        return measure_clients(url, calls, rounds)
    finally:
        stop.set()
        child.join(5)


def measure_clients(url: str, calls: int, rounds: int) -> list[tuple[str, float, float]]:
    import httpx
    import litellm

    http = httpx.Client()
    body = {"model": "scripted", "messages": MESSAGES}

    def litellm_call() -> object:
        return litellm.completion(model="openai/scripted", api_base=url, api_key="x", messages=MESSAGES)

    def litellm_acall() -> object:
        return litellm.acompletion(model="openai/scripted", api_base=url, api_key="x", messages=MESSAGES)

    raw = {"raw httpx (one shared client)": lambda n: per_call_ms(
        lambda: http.post(url + "/chat/completions", json=body).json(), n
    )}  # fmt: skip
    # Phase 1, plain litellm: before rlmkit changes any process-wide litellm setting.
    results = run_rounds(raw | {
        "litellm.completion": lambda n: per_call_ms(litellm_call, n),
        "litellm.acompletion": lambda n: async_per_call_ms(litellm_acall, n),
    }, calls, rounds)  # fmt: skip
    from rlmkit.lm import LM

    lm = LM("openai/scripted", api_base=url, api_key="x", cache=False)
    cached = LM("openai/scripted", api_base=url, api_key="x", cache=Path(tempfile.mkdtemp()))
    cached.complete(MESSAGES)
    # Phase 2, rlmkit; raw httpx runs in both phases, so a change in the machine's load shows.
    for name, values in run_rounds(raw | {
        "rlmkit.LM.complete": lambda n: per_call_ms(lambda: lm.complete(MESSAGES), n),
        "rlmkit.LM.acomplete": lambda n: async_per_call_ms(lambda: lm.acomplete(MESSAGES), n),
        "rlmkit.LM.complete, cache hit": lambda n: per_call_ms(lambda: cached.complete(MESSAGES), n),
    }, calls, rounds).items():  # fmt: skip
        results[name + (" (phase 2)" if name in results else "")] = values
    return [(name, min(w for w, _ in values), min(c for _, c in values)) for name, values in results.items()]


def run_rounds(clients: dict[str, Callable[[int], tuple[float, float]]], calls: int, rounds: int) -> dict:
    for measure in clients.values():
        measure(5)  # warm up connection pools and lazy imports
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in clients}
    for _ in range(rounds):
        for name, measure in clients.items():
            results[name].append(measure(calls))
    return results


def local_generation(prompts: int, max_tokens: int) -> list[tuple[str, float, float]]:
    """(path, generated tokens/s, wall tokens/s) for the embedded model, one request at a time."""
    import xllamacpp

    from rlmkit.lm import LM
    from rlmkit.local import LOCAL_MODEL_NAME, LocalServer, ensure_model

    path = ensure_model()
    questions = [
        f"Write a Python function that returns the sum of the first {i + 5} squares." for i in range(prompts)
    ]
    rows = []
    with LocalServer(path) as server:
        lm = LM(LOCAL_MODEL_NAME, api_base=server.url, api_key="local", cache=False, temperature=0.0,
                max_tokens=max_tokens, timeout=600)  # fmt: skip
        lm.complete([{"role": "user", "content": "warm up"}], max_tokens=4)
        tokens = seconds = 0.0
        for q in questions:
            reply = lm.complete([{"role": "user", "content": q}])
            tokens += reply.usage.completion_tokens
            seconds += reply.duration_s
        rows.append(("rlmkit.LM -> xllamacpp HTTP server (child process)", float("nan"), tokens / seconds))
        import httpx

        tokens = seconds = 0.0
        gen_rates = []
        for q in questions:
            started = time.perf_counter()
            out = httpx.post(server.url + "/chat/completions", timeout=600, json={
                "messages": [{"role": "user", "content": q}], "max_tokens": max_tokens, "temperature": 0.0,
            }).json()  # fmt: skip
            seconds += time.perf_counter() - started
            tokens += out["usage"]["completion_tokens"]
            gen_rates.append(out["timings"]["predicted_per_second"])
        rows.append(("raw httpx POST -> same HTTP server", statistics.mean(gen_rates), tokens / seconds))

    params = xllamacpp.CommonParams()
    params.model.path = str(path)
    params.n_ctx = 16384
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = os.cpu_count() or 2
    direct = xllamacpp.Server(params)  # in-process; its logs go to this terminal's stderr
    direct.handle_chat_completions({"messages": [{"role": "user", "content": "warm up"}], "max_tokens": 4})
    tokens = seconds = 0.0
    gen_rates = []
    for q in questions:
        started = time.perf_counter()
        out = direct.handle_chat_completions(
            {"messages": [{"role": "user", "content": q}], "max_tokens": max_tokens, "temperature": 0.0}
        )
        seconds += time.perf_counter() - started
        tokens += out["usage"]["completion_tokens"]
        gen_rates.append(out["timings"]["predicted_per_second"])
    rows.append(
        (
            "xllamacpp.Server.handle_chat_completions (in-process)",
            statistics.mean(gen_rates),
            tokens / seconds,
        )
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--local", action="store_true", help="also measure the embedded model's tokens/s")
    parser.add_argument("--local-only", action="store_true", help="only the embedded model's tokens/s")
    parser.add_argument("--prompts", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args()

    if not args.local_only:
        print(f"## LM client cost per call ({args.calls} calls x {args.rounds} rounds, best round)\n")
        print("| client | wall ms/call | client CPU ms/call |\n|---|---:|---:|")
        for name, wall, cpu in client_overhead(args.calls, args.rounds):
            print(f"| {name} | {wall:.2f} | {cpu:.2f} |")
    if args.local or args.local_only:
        print(
            f"\n## Embedded model generation ({args.prompts} prompts, max_tokens={args.max_tokens}, one at a time)\n"
        )
        print("| path | llama.cpp decode tok/s | wall tok/s (incl. prompt) |\n|---|---:|---:|")
        for name, decode, wall in local_generation(args.prompts, args.max_tokens):
            shown = "-" if math.isnan(decode) else f"{decode:.1f}"  # not reported over HTTP here
            print(f"| {name} | {shown} | {wall:.1f} |")


if __name__ == "__main__":
    main()

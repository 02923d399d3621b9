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
    from rlmkit.models.lm import LM

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


def local_generation(prompts: int, max_tokens: int, in_process: bool) -> list[tuple[str, float, float]]:
    """(path, llama.cpp decode tok/s, wall tok/s) for the embedded model, one request at a time.

    rlmkit.LM and a raw POST go to the same server, alternating prompt by prompt, so other load
    on the machine hits both alike. The in-process run loads a second copy of the model after.
    """
    import httpx

    from rlmkit.local import LOCAL_MODEL_NAME, LocalServer, ensure_model
    from rlmkit.models.lm import LM

    path = ensure_model()
    questions = [
        f"Write a Python function that returns the sum of the first {i + 5} squares." for i in range(prompts)
    ]
    sampling = {"max_tokens": max_tokens, "temperature": 0.0}
    totals = {name: [0.0, 0.0, []] for name in ("lm", "raw", "in-process")}  # tokens, seconds, decode rates

    def record(name: str, started: float, tokens: int, decode_rate: float | None = None) -> None:
        totals[name][0] += tokens
        totals[name][1] += time.perf_counter() - started
        if decode_rate is not None:
            totals[name][2].append(decode_rate)

    with LocalServer(path) as server:
        lm = LM(LOCAL_MODEL_NAME, api_base=server.url, api_key="local", cache=False, timeout=900, **sampling)
        lm.complete([{"role": "user", "content": "warm up"}], max_tokens=4)
        for q in questions:
            started = time.perf_counter()
            record("lm", started, lm.complete([{"role": "user", "content": q}]).usage.completion_tokens)
            started = time.perf_counter()
            body = {"messages": [{"role": "user", "content": q}], **sampling}
            out = httpx.post(server.url + "/chat/completions", json=body, timeout=900).json()
            record("raw", started, out["usage"]["completion_tokens"], out["timings"]["predicted_per_second"])
    if in_process:
        import xllamacpp

        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.n_ctx = 16384
        params.cpuparams.n_threads = params.cpuparams_batch.n_threads = os.cpu_count() or 2
        direct = xllamacpp.Server(params)  # in-process: its logs go to this terminal's stderr
        direct.handle_chat_completions(
            {"messages": [{"role": "user", "content": "warm up"}], "max_tokens": 4}
        )
        for q in questions:
            started = time.perf_counter()
            out = direct.handle_chat_completions({"messages": [{"role": "user", "content": q}], **sampling})
            record(
                "in-process",
                started,
                out["usage"]["completion_tokens"],
                out["timings"]["predicted_per_second"],
            )
    labels = {
        "lm": "rlmkit.LM -> xllamacpp HTTP server (child process)",
        "raw": "raw httpx POST -> the same server",
        "in-process": "xllamacpp.Server.handle_chat_completions (in-process)",
    }
    return [
        (labels[name], statistics.mean(rates) if rates else math.nan, tokens / seconds)
        for name, (tokens, seconds, rates) in totals.items()
        if seconds
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--local", action="store_true", help="also measure the embedded model's tokens/s")
    parser.add_argument("--local-only", action="store_true", help="only the embedded model's tokens/s")
    parser.add_argument("--in-process", action="store_true", help="with --local: also xllamacpp in-process")
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
            f"\n## Embedded model generation ({args.prompts} prompts, "
            f"max_tokens={args.max_tokens}, one at a time)\n"
        )
        print("| path | llama.cpp decode tok/s | wall tok/s (incl. prompt) |\n|---|---:|---:|")
        for name, decode, wall in local_generation(args.prompts, args.max_tokens, args.in_process):
            shown = "-" if math.isnan(decode) else f"{decode:.1f}"  # not reported over HTTP here
            print(f"| {name} | {shown} | {wall:.1f} |")


if __name__ == "__main__":
    main()

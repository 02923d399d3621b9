"""(6) The embedded model through rlmkit against the raw runtime: tokens per second, same prompts.

    nice -n 19 python benchmarks/speed/local_throughput.py     # 3 prompts x 128 tokens, each path
    python benchmarks/speed/local_throughput.py --rounds 2 --out benchmarks/out/local_throughput.json

It uses the machine's running llama.cpp server (``rlmkit.local.machine``) and never starts or
stops one: with none running it says so and exits. Each prompt goes twice, once straight to the
server over raw httpx and once through ``rlmkit.LM`` (``rlmkit.local.local_lm(cache=False)``),
with the order alternating per prompt, greedy (temperature 0), a fixed ``max_tokens``, and
``cache_prompt: false`` on both so neither reuses the other's prefill. Tokens per second is the
server's ``completion_tokens`` over the request's wall time, as the caller sees it. The server is
shared (other processes may be using its slots meanwhile): the load average is reported with it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import _bootstrap  # noqa: F401 - the checkout and the benchmark folders on sys.path

PROMPTS = [
    "Write a Python function that returns the n-th Fibonacci number iteratively, with a docstring.",
    "Explain in plain words what a hash map is and when a list is the better choice.",
    "Write a Python snippet that counts how often each word occurs in a text and prints the top 5.",
]


def raw_call(url: str, prompt: str, max_tokens: int) -> tuple[int, float]:
    import httpx

    body = {
        "model": "local",
        "messages": [{"role": "user", "content": prompt}],
        "temperature": 0,
        "max_tokens": max_tokens,
        "cache_prompt": False,
    }
    start = time.perf_counter()
    response = httpx.post(f"{url}/chat/completions", json=body, timeout=900)
    wall = time.perf_counter() - start
    response.raise_for_status()
    return int(response.json()["usage"]["completion_tokens"]), wall


def rlmkit_call(lm: Any, prompt: str, max_tokens: int) -> tuple[int, float]:
    start = time.perf_counter()
    completion = lm.complete([{"role": "user", "content": prompt}], max_tokens=max_tokens)
    return completion.usage.completion_tokens, time.perf_counter() - start


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=1, help="times each prompt goes through each path")
    parser.add_argument("--out", type=Path, help="also write the result here as JSON")
    args = parser.parse_args(argv)
    from rlmkit.local import local_lm, machine

    info = machine.status()
    if info is None:
        print("no embedded-model server is running on this machine; not measured (nothing started)")
        return {"error": "no running server"}
    load_start = os.getloadavg()
    lm = local_lm(cache=False, temperature=0, cache_prompt=False)  # finds the running server
    rows, totals = [], {"raw": [0, 0.0], "rlmkit": [0, 0.0]}
    for round_ in range(args.rounds):
        for i, prompt in enumerate(PROMPTS):
            order = ["raw", "rlmkit"] if (i + round_) % 2 == 0 else ["rlmkit", "raw"]
            for path in order:
                tokens, wall = (
                    raw_call(info["url"], prompt, args.max_tokens)
                    if path == "raw"
                    else rlmkit_call(lm, prompt, args.max_tokens)
                )
                totals[path][0] += tokens
                totals[path][1] += wall
                rows.append({"prompt": i, "path": path, "tokens": tokens, "wall_s": round(wall, 3)})
                rate = tokens / wall
                print(f"prompt {i} {path:7s} {tokens:4d} tokens in {wall:6.2f} s = {rate:5.2f} tok/s")
    tok_s = {path: tokens / wall for path, (tokens, wall) in totals.items()}
    result = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "server": {k: info[k] for k in ("ctx", "parallel", "threads", "backend")},
        "load_average": {"start": round(load_start[0], 2), "end": round(os.getloadavg()[0], 2)},
        "max_tokens": args.max_tokens,
        "rows": rows,
        "tok_s": {k: round(v, 3) for k, v in tok_s.items()},
        "ratio": round(tok_s["rlmkit"] / tok_s["raw"], 3),
        # one request stuck behind another process's on the shared server skews the totals: medians too
        "median_tok_s": {
            path: round(statistics.median(r["tokens"] / r["wall_s"] for r in rows if r["path"] == path), 3)
            for path in ("raw", "rlmkit")
        },
    }
    print(
        f"raw {tok_s['raw']:.2f} tok/s, rlmkit {tok_s['rlmkit']:.2f} tok/s: ratio {result['ratio']:.3f} "
        f"(load average {result['load_average']['start']} -> {result['load_average']['end']})"
    )
    print(f"medians per request: {result['median_tok_s']} tok/s")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()

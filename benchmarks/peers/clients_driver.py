"""(7) LM client cost per call (system python): ``python clients_driver.py URL CALLS ROUNDS``.

Each client sends CALLS sequential tiny chat requests to the instant server at URL, in ROUNDS
interleaved rounds (a busy machine then hurts every client alike); prints one JSON line with
each client's per-round ms/call. The server runs in another process, so its threads do not
compete with the client for this interpreter's GIL.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

MESSAGES = [{"role": "user", "content": "hi"}]


def clients(url: str) -> dict[str, Callable[[int], None]]:
    import dspy
    import httpx
    import litellm
    import openai

    import rlmkit

    http = httpx.Client()
    oai = openai.OpenAI(base_url=url, api_key="bench")
    dlm = dspy.LM("openai/scripted", api_base=url, api_key="bench", cache=False)
    rlm_lm = rlmkit.LM("openai/scripted", api_base=url, api_key="bench", cache=False)
    body = {"model": "scripted", "messages": MESSAGES}

    def loop(call: Callable[[], object]) -> Callable[[int], None]:
        def run(n: int) -> None:
            for _ in range(n):
                call()

        return run

    def aloop(make: Callable[[], object]) -> Callable[[int], None]:
        async def many(n: int) -> None:
            for _ in range(n):
                await make()

        return lambda n: asyncio.run(many(n))

    return {
        "raw httpx": loop(lambda: http.post(url + "/chat/completions", json=body).json()),
        "openai client": loop(lambda: oai.chat.completions.create(model="scripted", messages=MESSAGES)),
        "dspy.LM": loop(lambda: dlm(messages=MESSAGES)),
        "litellm.completion": loop(
            lambda: litellm.completion(
                model="openai/scripted", api_base=url, api_key="bench", messages=MESSAGES
            )
        ),
        "rlmkit.LM.complete": loop(lambda: rlm_lm.complete(MESSAGES)),
        "rlmkit.LM.acomplete": aloop(lambda: rlm_lm.acomplete(MESSAGES)),
    }


def main() -> None:
    url, calls, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    runners = clients(url)
    for run in runners.values():
        run(5)  # warm up: connection pools, lazy imports
    per_round: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(rounds):
        for name, run in runners.items():
            started = time.perf_counter()
            run(calls)
            per_round[name].append((time.perf_counter() - started) / calls * 1000)
    print("@@RESULT " + json.dumps(per_round), flush=True)


if __name__ == "__main__":
    main()

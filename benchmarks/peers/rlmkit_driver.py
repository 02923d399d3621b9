"""rlmkit driver (system python): ``rlmkit.RLM`` with its default process sandbox and a JSONL log.

``--httpx`` (diagnostic only): the same RLM, but its model calls go through one shared
``httpx.AsyncClient`` per event loop instead of litellm. The difference between the two
columns is what rlmkit's LM client costs; everything else (loop, sandbox, sub-call dispatch,
trajectory, log) is the same code.
"""

from __future__ import annotations

import asyncio
import functools
import os
import sys
import time
from pathlib import Path

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parent)]

from driver_base import QUESTION, dir_bytes, serve

started = time.monotonic()
import rlmkit  # lazy: litellm and dspy load on the first run, which the cold-start figures show
from rlmkit.trajectory import Usage

IMPORT_S = time.monotonic() - started
HTTPX = "--httpx" in sys.argv


class HttpxLM(rlmkit.LM):
    """rlmkit.LM with litellm replaced by a plain OpenAI-style POST (same Completion, same limit)."""

    def __init__(self, url: str, max_concurrency: int):
        super().__init__("openai/scripted", api_base=url, api_key="bench", cache=False, max_concurrency=max_concurrency)
        self._clients: dict[int, object] = {}

    async def acomplete(self, messages, **overrides):
        import httpx

        loop = asyncio.get_running_loop()
        client = self._clients.get(id(loop))
        if client is None:  # one per event loop: each RLM call runs on its own loop
            client = httpx.AsyncClient(base_url=self.api_base, timeout=self.timeout, verify=_ssl_context())
            self._clients[id(loop)] = client
        async with self._limit.aslot():
            started = time.perf_counter()
            response = await client.post("/chat/completions", json={"model": "scripted", "messages": messages})
            body = response.json()
        usage = body.get("usage", {})
        return rlmkit.lm.Completion(
            body["choices"][0]["message"]["content"], body.get("model", self.model),
            Usage(calls=1, prompt_tokens=usage.get("prompt_tokens", 0),
                         completion_tokens=usage.get("completion_tokens", 0)),
            False, time.perf_counter() - started, body["choices"][0].get("finish_reason"))


@functools.cache
def _ssl_context():
    """Built once: httpx loads the CA bundle for every new client otherwise (tens of ms)."""
    import httpx

    return httpx.create_ssl_context()


def run_once(job: dict, context: str, log_dir: str) -> tuple[str, int]:
    concurrency = job.get("concurrency", 16)
    if HTTPX:
        lm = HttpxLM(job["url"], concurrency)
    else:
        lm = rlmkit.LM("openai/scripted", api_base=job["url"], api_key="bench", cache=False, max_concurrency=concurrency)
    rlm = rlmkit.RLM("context, question -> answer", lm=lm, max_iterations=job.get("max_iterations", 8),
                     max_depth=job.get("max_depth", 1), max_concurrency=concurrency, log_dir=log_dir)
    pred = rlm(context=context, question=QUESTION)
    return pred.answer, dir_bytes(log_dir)


if __name__ == "__main__":
    serve("rlmkit+httpx" if HTTPX else "rlmkit", IMPORT_S, run_once)

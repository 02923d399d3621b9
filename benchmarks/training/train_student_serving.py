"""Which way of serving a student is faster here: llama.cpp on the quantised GGUF, or
in-process transformers generation on the same file dequantised to float32.

Both answer the same chat prompt greedily with the same token cap; tokens/s counts the
tokens each generated over the wall time of the request (prompt reading included).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

PROMPT = [
    {"role": "system", "content": "You write Python in ```repl blocks."},
    {"role": "user", "content": "Find the line containing 'magic number' in the string `context`."},
]


def measure_serving(path: Path, *, max_tokens: int = 32) -> dict[str, Any]:
    return {
        "prompt_messages": len(PROMPT),
        "max_tokens": max_tokens,
        **_llama_cpp(path, max_tokens),
        **_hf(path, max_tokens),
    }


def _llama_cpp(path: Path, max_tokens: int) -> dict[str, Any]:
    from optimizers.students import serve_student, student_lm
    from rlmkit.local import LocalServerConfig

    started = time.perf_counter()
    with serve_student(path, config=LocalServerConfig(ctx=4096, parallel=1)) as server:
        load_s = time.perf_counter() - started
        lm = student_lm(server, cache=False, preset=None)
        started = time.perf_counter()
        reply = lm.complete(PROMPT, max_tokens=max_tokens, temperature=0.0)
        wall = time.perf_counter() - started
    tokens = reply.usage.completion_tokens
    return {"llama_cpp": _row(load_s, tokens, wall)}


def _hf(path: Path, max_tokens: int) -> dict[str, Any]:
    from optimizers.trainloop.hf_serve import HFChatModel

    started = time.perf_counter()
    model = HFChatModel(str(path.parent), gguf_file=path.name, max_new_tokens=max_tokens)
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    reply = model({"messages": PROMPT, "max_tokens": max_tokens})
    wall = time.perf_counter() - started
    tokens = reply["usage"]["completion_tokens"]
    return {"transformers": _row(load_s, tokens, wall)}


def _row(load_s: float, tokens: int, wall: float) -> dict[str, Any]:
    # the load average beside each figure: on a shared machine it moves more than either path does
    return {
        "load_s": round(load_s, 1),
        "tokens": tokens,
        "tok_s": round(tokens / wall, 2),
        "load": os.getloadavg()[0],
    }

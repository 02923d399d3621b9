"""rlmkit driver (system python): ``rlmkit.RLM`` with its default process sandbox and a JSONL log;
its model calls go through rlmkit's direct OpenAI-compatible transport (what ``openai/...`` with an
``api_base`` picks)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parent)]

from driver_base import QUESTION, dir_bytes, serve

started = time.monotonic()
import rlmkit  # lazy: dspy loads on the first run, which the cold-start figures show

IMPORT_S = time.monotonic() - started


def run_once(job: dict, context: str, log_dir: str) -> tuple[str, int]:
    concurrency = job.get("concurrency", 16)
    lm = rlmkit.LM(
        "openai/scripted", api_base=job["url"], api_key="bench", cache=False, max_concurrency=concurrency
    )
    rlm = rlmkit.RLM(
        "context, question -> answer",
        lm=lm,
        max_iterations=job.get("max_iterations", 8),
        max_depth=job.get("max_depth", 1),
        max_concurrency=concurrency,
        log_dir=log_dir,
    )
    pred = rlm(context=context, question=QUESTION)
    return pred.answer, dir_bytes(log_dir)


if __name__ == "__main__":
    serve("rlmkit", IMPORT_S, run_once)

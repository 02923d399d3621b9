"""rlmkit driver (system python): ``rlmkit.RLM`` with its default process sandbox and a JSONL log."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parent)]

from driver_base import QUESTION, dir_bytes, serve  # noqa: E402

started = time.monotonic()
import litellm  # noqa: E402,F401 - rlmkit imports it on the first call; time it with the framework

import rlmkit  # noqa: E402

IMPORT_S = time.monotonic() - started


def run_once(job: dict, context: str, log_dir: str) -> tuple[str, int]:
    lm = rlmkit.LM("openai/scripted", api_base=job["url"], api_key="bench", cache=False,
                   max_concurrency=job.get("concurrency", 16))
    rlm = rlmkit.RLM("context, question -> answer", lm=lm, max_iterations=job.get("max_iterations", 8),
                     max_depth=job.get("max_depth", 1), max_concurrency=job.get("concurrency", 16),
                     log_dir=log_dir)
    pred = rlm(context=context, question=QUESTION)
    return pred.answer, dir_bytes(log_dir)


if __name__ == "__main__":
    serve("rlmkit", IMPORT_S, run_once)

"""rlms 0.1.3 driver (peers' venv): ``rlm.RLM`` with its ``local`` environment and ``RLMLogger``."""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from driver_base import QUESTION, dir_bytes, serve

started = time.monotonic()
from rlm import RLM
from rlm.logger import RLMLogger

IMPORT_S = time.monotonic() - started


def run_once(job: dict, context: str, log_dir: str) -> tuple[str, int]:
    rlm = RLM(
        backend="openai",
        backend_kwargs={"model_name": "scripted", "base_url": job["url"], "api_key": "bench"},
        environment="local",
        max_iterations=job.get("max_iterations", 8),
        max_depth=job.get("max_depth", 1),
        max_concurrent_subcalls=job.get("concurrency", 16),
        logger=RLMLogger(log_dir),
    )
    result = rlm.completion(context, root_prompt=QUESTION)
    return result.response, dir_bytes(log_dir)


if __name__ == "__main__":
    serve("rlms", IMPORT_S, run_once)

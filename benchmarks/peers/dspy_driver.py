"""dspy.RLM driver (peers' venv). Its default sandbox (Deno + Pyodide) downloads its runtime on
first start and cannot start offline, so this uses dspy's ``LocalInterpreter`` (a plain local
subprocess, not a sandbox). The log is its returned ``trajectory``, serialised as JSON."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from driver_base import QUESTION, serve

started = time.monotonic()
import dspy

IMPORT_S = time.monotonic() - started


def run_once(job: dict, context: str, log_dir: str) -> tuple[str, int]:
    lm = dspy.LM("openai/scripted", api_base=job["url"], api_key="bench", cache=False)
    dspy.configure(lm=lm)
    rlm = dspy.RLM(
        "context, question -> answer",
        max_iters=job.get("max_iterations", 8),
        max_llm_calls=10_000,
        interpreter_factory=dspy.LocalInterpreter,
    )
    pred = rlm(context=context, question=QUESTION)
    log = Path(log_dir) / "trajectory.json"
    log.write_text(json.dumps(pred.trajectory, default=str))
    return pred.answer, log.stat().st_size


if __name__ == "__main__":
    serve("dspy.RLM", IMPORT_S, run_once)

"""What every framework driver shares. Standard library only: it also runs in the peers' venv.

A driver is a long-lived subprocess that imports one framework once, then runs jobs sent by
``benchmarks/speed/run.py`` as JSON lines on stdin, answering each with one ``@@RESULT {json}`` line.
The framework's own prints go to stderr (fd 1 is pointed there), so they never mix with results.
Timestamps are ``time.monotonic()``: system-wide on Linux, so the orchestrator can line them up
with the server's request log.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

QUESTION = "BENCH-ROOT How many chunks were summarised?"
_LINE = "".join(
    f"record {i:04d}: lorem ipsum dolor sit amet, consectetur adipiscing elit\n" for i in range(1000)
)


def make_context(size: int) -> str:
    """A deterministic text of exactly ``size`` characters, built with one allocation of that size."""
    whole, rest = divmod(size, len(_LINE))
    return "".join([_LINE] * whole + [_LINE[:rest]])


def dir_bytes(path: str | os.PathLike) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def serve(name: str, import_s: float, run_once: Callable[[dict, str, str], tuple[Any, int]]) -> None:
    """Answer jobs until stdin closes.

    ``run_once(job, context, log_dir) -> (answer, log_bytes)`` runs one RLM call against
    ``job["url"]``. Job kinds: ``run`` (``size``, ``repeats``) and ``quit``.
    """
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything the framework prints (even from C) lands on stderr
    sys.stdout = sys.stderr
    out.write("@@RESULT " + json.dumps({"ready": True, "framework": name, "import_s": import_s}) + "\n")
    contexts: dict[int, str] = {}
    for line in sys.stdin:
        job = json.loads(line)
        if job.get("kind") == "quit":
            break
        try:
            size = int(job["size"])
            if size not in contexts:
                contexts.clear()  # keep one context alive: memory is measured per size
                contexts[size] = make_context(size)
            runs = []
            for _ in range(int(job.get("repeats", 1))):
                log_dir = tempfile.mkdtemp(prefix=f"bench-{name}-log-")
                try:
                    start = time.monotonic()
                    answer, log_bytes = run_once(job, contexts[size], log_dir)
                    end = time.monotonic()
                finally:
                    shutil.rmtree(log_dir, ignore_errors=True)
                runs.append({"start": start, "end": end, "answer": str(answer)[:200], "log_bytes": log_bytes})
            result: dict[str, Any] = {"runs": runs}
        except BaseException as exc:  # noqa: BLE001 - reported, the orchestrator decides
            result = {
                "error": f"{type(exc).__name__}: {str(exc)[:500]}",
                "traceback": traceback.format_exc()[-3000:],
            }
        out.write("@@RESULT " + json.dumps(result) + "\n")

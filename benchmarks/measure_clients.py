"""(7) LM client cost per call, and (6) embedded-model tokens/s (optional, needs the local model)."""

from __future__ import annotations

import json
import math
import os
import signal
import statistics
import subprocess
import sys
from typing import Any

from harness import HERE, RecordingServer


def client_cost(server: RecordingServer, calls: int, rounds: int) -> dict[str, Any]:
    server.configure(lambda kind, body: "hello")
    proc = subprocess.run(
        [sys.executable, str(HERE / "peers" / "clients_driver.py"), server.url, str(calls), str(rounds)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=HERE,
        check=False,
    )
    hits = server.take_hits()
    lines = [line for line in proc.stdout.splitlines() if line.startswith("@@RESULT ")]
    if not lines:
        return {"error": f"clients driver failed: {proc.stderr[-1500:]}"}
    per_round = json.loads(lines[-1][len("@@RESULT ") :])
    server_ms = statistics.median((h.end - h.start) * 1000 for h in hits) if hits else None
    return {
        "calls": calls,
        "rounds": rounds,
        "server_ms_per_call": server_ms,
        "ms_per_call": {name: statistics.median(values) for name, values in per_round.items()},
        "per_round": per_round,
    }


def embedded_model(prompts: int, max_tokens: int, timeout_s: float) -> dict[str, Any]:
    """Reuses the LM engineer's measurement (benchmarks/lm_client_cost.py), in a subprocess with a time limit:
    the 1.5B model on 2 busy cores can take many minutes."""
    if not (HERE / "lm_client_cost.py").exists():
        return {"error": "benchmarks/lm_client_cost.py is not available; not measured"}
    code = (
        "import json, sys; sys.path[:0] = [sys.argv[1], sys.argv[2]]\n"
        "import inspect\nfrom lm_client_cost import local_generation\n"
        "args = [int(sys.argv[3]), int(sys.argv[4])]\n"
        "kw = {'in_process': False} "
        "if 'in_process' in inspect.signature(local_generation).parameters else {}\n"
        "print('@@RESULT ' + json.dumps(local_generation(*args, **kw)))"
    )
    # Its own session, so a timeout ends the model server it started too, not just the script.
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(HERE), str(HERE.parent), str(prompts), str(max_tokens)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=HERE,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {"error": f"did not finish within {timeout_s:.0f} s on this machine; not measured"}
    lines = [line for line in stdout.splitlines() if line.startswith("@@RESULT ")]
    if not lines:
        return {"error": f"failed: {(stderr.strip().splitlines() or ['no output'])[-1][:300]}"}
    rows = json.loads(lines[-1][len("@@RESULT ") :])
    return {
        "prompts": prompts,
        "max_tokens": max_tokens,
        "rows": [
            {"path": p, "decode_tok_s": None if d is None or math.isnan(d) else d, "wall_tok_s": w}
            for p, d, w in rows
        ],
    }

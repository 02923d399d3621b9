"""(7) LM client cost per call, and (6) embedded-model tokens/s (optional, needs the local model)."""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
from typing import Any

from harness import HERE, RecordingServer


def client_cost(server: RecordingServer, calls: int, rounds: int) -> dict[str, Any]:
    server.configure(lambda kind, body: "hello")
    proc = subprocess.run([sys.executable, str(HERE / "peers" / "clients_driver.py"), server.url, str(calls), str(rounds)],
                          capture_output=True, text=True, timeout=600, cwd=HERE, check=False)
    hits = server.take_hits()
    lines = [line for line in proc.stdout.splitlines() if line.startswith("@@RESULT ")]
    if not lines:
        return {"error": f"clients driver failed: {proc.stderr[-1500:]}"}
    per_round = json.loads(lines[-1][len("@@RESULT "):])
    server_ms = statistics.median((h.end - h.start) * 1000 for h in hits) if hits else None
    return {"calls": calls, "rounds": rounds, "server_ms_per_call": server_ms,
            "ms_per_call": {name: statistics.median(values) for name, values in per_round.items()},
            "per_round": per_round}


def embedded_model(prompts: int, max_tokens: int) -> dict[str, Any]:
    """Reuses the LM engineer's measurement (benchmarks/lm_client_cost.py) when it is there."""
    try:
        from lm_client_cost import local_generation
    except ImportError as exc:
        return {"error": f"benchmarks/lm_client_cost.py is not available ({exc}); not measured"}
    try:
        rows = local_generation(prompts, max_tokens)
    except Exception as exc:  # noqa: BLE001 - e.g. the model file cannot be assembled here
        return {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    return {"prompts": prompts, "max_tokens": max_tokens,
            "rows": [{"path": p, "decode_tok_s": None if math.isnan(d) else d, "wall_tok_s": w} for p, d, w in rows]}

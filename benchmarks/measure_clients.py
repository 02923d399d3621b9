"""(7) LM client cost per call, and (6) embedded-model tokens/s (optional, needs the running local model)."""

from __future__ import annotations

import json
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


def embedded_model(rounds: int, max_tokens: int, timeout_s: float) -> dict[str, Any]:
    """``local_throughput.py`` in a subprocess with a time limit: the machine's running model server
    (never a second one started), the same prompts raw and through rlmkit.LM, interleaved,
    ``rounds`` times each (one request's speed varies by about 10% on this VM's 2 cores)."""
    out = HERE / "out" / "local_throughput.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    cmd = [
        sys.executable,
        str(HERE / "local_throughput.py"),
        "--max-tokens",
        str(max_tokens),
        "--rounds",
        str(rounds),
        "--out",
        str(out),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=HERE)
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()  # only the script: the server is the machine's, shared, and stays up
        proc.communicate()
        return {"error": f"did not finish within {timeout_s:.0f} s on this machine; not measured"}
    if not out.exists():
        lines = (stdout + stderr).strip().splitlines() or ["no output"]
        return {"error": f"not measured: {lines[-1][:300]}"}
    found = json.loads(out.read_text())
    return {
        "prompts": len({row["prompt"] for row in found["rows"]}),
        "rounds": rounds,
        "max_tokens": found["max_tokens"],
        "load_average": found["load_average"],
        "rows": [  # rlmkit first, the raw runtime last: what verdicts.py compares
            {"path": "rlmkit.LM", "decode_tok_s": None, "wall_tok_s": found["tok_s"]["rlmkit"]},
            {"path": "raw httpx to llama.cpp", "decode_tok_s": None, "wall_tok_s": found["tok_s"]["raw"]},
        ],
    }

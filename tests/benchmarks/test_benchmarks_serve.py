"""Smoke test of the serving benchmark: a few rounds of each measurement against a real server
process, so a broken benchmark shows up here rather than when the docs' figures are remade."""

from __future__ import annotations

import json
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "speed"
sys.path.insert(0, str(BENCH))

import serve_bench  # noqa: E402
import serve_report  # noqa: E402


def test_a_short_serving_benchmark_measures_and_renders(tmp_path):
    out = tmp_path / "serve.json"
    serve_bench.main(["--rounds", "5", "--concurrent", "8", "--bad", "1", "--out", str(out)])
    results = json.loads(out.read_text())
    over = results["overhead"]
    assert over["in_process"]["n"] == over["over_http"]["n"] == over["over_http_responses_streamed"]["n"] == 5
    assert all(b["completed"] == 8 and b["mixed_up"] == 0 for b in results["concurrency"]["bursts"])
    bad = results["bad_input"]
    assert all(row["ok"] for row in bad["kinds"].values()) and bad["serves_after"], bad
    table = serve_report.render(results)
    assert "| chat completions, streamed |" in table and "| Responses API, streamed |" in table
    assert "| malformed JSON | 400 | 400 |" in table
    assert "python benchmarks/speed/serve_bench.py --rounds 5" in table

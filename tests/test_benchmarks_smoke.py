"""Smoke test of the benchmark harness: one per-turn measurement, small context, rlmkit alone.

It runs the real thing (driver subprocess, scripted server, RSS sampler, table), so a broken
harness shows up here rather than in a 10-minute benchmark run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

import run


def test_one_turns_measurement_for_rlmkit(tmp_path):
    results = run.main(
        [
            "--frameworks",
            "rlmkit",
            "--sizes",
            "20000",
            "--repeats",
            "1",
            "--skip-fanout",
            "--skip-clients",
            "--out",
            str(tmp_path),
        ]
    )
    entry = results["turns"]["rlmkit"]["20000"]
    assert entry["answers_ok"], entry
    assert entry["root_calls"] == [5] and entry["sub_calls"] == [
        9
    ]  # the scripted 5-turn run, 1 + 8 sub-calls
    run_ = entry["runs"][0]
    assert len(run_["turn_overheads_s"]) == 5
    assert all(0 <= t < run_["wall_s"] for t in run_["turn_overheads_s"])
    assert 0 < entry["startup_median_s"] < run_["wall_s"]
    assert entry["rss_peak"] >= entry["rss_base"] > 0
    assert entry["log_bytes"] > 0
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["turns"]["rlmkit"]["20000"]["answers_ok"]
    table = (tmp_path / "README_TABLE.md").read_text()
    assert "| 2e4 chars |" in table and "rlmkit" in table

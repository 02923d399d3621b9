"""Smoke test of the sessions benchmark: every row at small sizes, and its table rendered."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "speed"
sys.path.insert(0, str(BENCH))

import sessions  # noqa: E402
import sessions_report  # noqa: E402


def test_every_row_runs_and_renders(tmp_path):
    results = sessions.main(["--quick", "--out", str(tmp_path / "sessions.json")])
    assert results["kill_between_calls"]["answer"] == "60"
    assert results["save_restore"]["restored_answer_ok"]
    assert set(results["second_call"]) == {"100000", "1000000"}
    long = results["long_session"]
    assert long["met"] and long["answered"] == 50 and long["max_task_chars"] <= long["limit_chars"]
    table = sessions_report.render(results)
    assert (
        table.count("\n| ") >= 10
        and "50 calls of one session" in table
        and "python benchmarks/speed/sessions.py --quick" in table
    )

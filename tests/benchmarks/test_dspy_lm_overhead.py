"""benchmarks/speed/dspy_lm_overhead.py measures rlmkit.RLM's turns with a model string and with a
dspy.LM on one scripted server, and benchmarks/speed/run.py's report shows both rows."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "speed"))

import dspy_lm_overhead  # noqa: E402
import report  # noqa: E402


def test_a_model_string_and_a_dspy_lm_are_measured_and_reported():
    found = dspy_lm_overhead.per_turn_by_kind(2, 1, ("model string", "dspy.LM"))
    assert list(found) == ["model string", "dspy.LM"]
    assert all(0 < row["min_ms_per_turn"] <= row["median_ms_per_turn"] for row in found.values()), found

    results = {"frameworks": [], "turns": {}, "imports": {}, "lm_kinds": {"turns": 2, "runs": 1, "ms": found}}
    table = report.tables(results)
    assert "per turn by kind of model" in table
    assert f"| dspy.LM | {found['dspy.LM']['median_ms_per_turn']:.2f} |" in table

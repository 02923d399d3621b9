"""benchmarks/quality/demo_accuracy.py's pieces that need no model: the seeds it accepts, the summary
it writes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "quality"))

import demo_accuracy  # noqa: E402


def test_seeds_are_ranges_or_lists_and_never_tuning_seeds():
    assert demo_accuracy.parse_seeds("2000-2002,2010") == [2000, 2001, 2002, 2010]
    with pytest.raises(SystemExit, match="tuning seeds"):
        demo_accuracy.parse_seeds("999-1001")


def test_training_seeds_run_only_when_asked_for():
    assert demo_accuracy.parse_seeds("100-101", training=True) == [100, 101]
    with pytest.raises(SystemExit, match="tuning seeds only"):
        demo_accuracy.parse_seeds("999-1001", training=True)


def test_summary_scores_the_held_answers_as_the_run_without_the_hold_would_have():
    rows = [
        {"seed": 100, "score": 1.0, "seconds": 60.0, "error": None, "held": "0", "held_score": 0.0},
        {"seed": 101, "score": 1.0, "seconds": 60.0, "error": None},
    ]
    summary = demo_accuracy.summary(rows)
    assert summary["right"] == 2 and summary["right_without_hold"] == 1 and summary["held"] == 1


def test_summary_counts_right_answers_and_budget_cuts():
    rows = [
        {"seed": 2000, "score": 1.0, "seconds": 60.0, "error": None},
        {"seed": 2001, "score": 0.0, "seconds": 900.2, "error": "BudgetExceeded: seconds"},
        {"seed": 2002, "score": 1.0, "seconds": 80.0, "error": None},
    ]
    summary = demo_accuracy.summary(rows)
    assert summary == {"n": 3, "accuracy": 0.667, "right": 2, "median_seconds": 80.0, "cut_at_budget": 1}

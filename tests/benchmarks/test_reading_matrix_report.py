"""The held-out matrix's docs block names, for each later adapter arm, the base run beside it."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "training"))

import reading_matrix_report  # noqa: E402


def row(suite: str, means: dict[str, float]) -> dict:
    base, *others = means
    return {
        "suite": suite, "n": 20, "finished": True, "means": means,
        "versus_base": {name: {"gain": means[name] - means[base], "ci95": [0.0, 0.1]} for name in others},
    }  # fmt: skip


def test_each_rounds_adapter_is_shown_beside_its_own_base_and_each_base_against_the_first():
    arms = ["base", "prompt", "adapter", "reading", "base_again", "round2", "base_round2"]
    data = {
        "date": "2026-12-05", "commit": "abc1234", "machine": "x86_64", "command": "python m.py",
        "matrix": {"arms": [{"name": name} for name in arms], "seed": 1000, "program": "plain",
                   "iterations": 6, "max_seconds": 240, "threads": 1, "suites": []},
        "partial": False,
        "arms_added_later": arms[3:],
        "table": [row("needle-20k", {"base": 0.1, "prompt": 0.1, "adapter": 0.2})],
        "added_tables": {
            "reading": [row("needle-20k", {"base_again": 0.1, "prompt": 0.1, "reading": 0.9})],
            "round2": [row("needle-20k", {"base_round2": 0.2, "prompt": 0.1, "round2": 0.8})],
        },
        "added_beside": {"reading": "base_again", "round2": "base_round2"},
        "bases_compared": {
            "base_again": [row("needle-20k", {"base": 0.1, "base_again": 0.1})],
            "base_round2": [row("needle-20k", {"base": 0.1, "base_round2": 0.2})],
        },
        "gate": {"rule": {"max_drop": 0.05, "min_n": {"real_text": 30, "synthetic": 20}},
                 "trained_families": {}},
    }  # fmt: skip
    text = reading_matrix_report.section(data)
    assert "In brackets" not in text  # these rows do not count right runs
    assert "The `round2` arm, measured after the others, beside `base_round2`" in text
    assert "The `reading` arm, measured after the others, beside `base_again`" in text
    assert (
        "the first `base` arm and `base_round2`" in text and "the first `base` arm and `base_again`" in text
    )
    assert "**round2**, the second round's final adapter" in text


def test_each_mean_shows_its_right_runs_where_the_row_counts_them():
    counted = row("needle-20k", {"base": 0.07, "round2": 0.0}) | {"right": {"base": 0, "round2": 0}}
    older = row("prose-60k", {"base": 0.14, "round2": 0.61})
    lines = reading_matrix_report._table(["base", "round2"], [counted, older])
    assert "| needle-20k | 20 | 0.07 (0) | 0.00 (0) |" in lines[2]
    assert "| prose-60k | 20 | 0.14 | 0.61 |" in lines[3]


def test_the_verdicts_say_which_adapter_the_embedded_model_serves():
    gate = {
        "adapter": {"ships": False, "failures": ["no real-text suite gains"]},
        "round3": {"ships": True, "failures": []},
        "prompt": {"ships": False, "failures": ["prose-60k: below the base"]},
    }
    held = reading_matrix_report._verdict_lines("adapter", ["needle"], gate, serves=None)
    assert "serves the base model by default, with today's prompt" in held[-1]
    replaced = reading_matrix_report._verdict_lines("adapter", ["needle"], gate, serves="round3")
    assert replaced[-1].startswith("It no longer ships: the `round3` adapter, which passes the gate")
    ships = reading_matrix_report._verdict_lines("round3", ["prose"], gate, serves="round3")
    assert "it passes the gate, and ships: the embedded model serves it by default" in ships[0]
    assert reading_matrix_report._verdict_lines("round3", ["prose"], gate, serves=None)[0].endswith(
        "it passes the gate."
    )

"""benchmarks/training/reading_matrix.py's own choices: which stages a run measures."""

from __future__ import annotations

from pathlib import Path

import pytest

from optimizers.selftrain import SuitePlan

ROOT = Path(__file__).resolve().parents[2]


def test_a_matrix_run_measures_only_the_arms_and_suites_named(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks" / "training"))
    import reading_matrix

    from optimizers.selftrain.matrix import Arm, Matrix

    matrix = Matrix(
        suites=(SuitePlan(suite="needle", length=20_000, n=2), SuitePlan(suite="prose", length=60_000, n=2)),
        arms=(Arm(name="base"), Arm(name="reading_sft", adapter="a.gguf")),
    )
    only = reading_matrix.selected(matrix, "reading_sft", None)
    assert [name for name in ("eval-reading_sft-needle-20k", "eval-reading_sft-prose-60k") if only(name)] == [
        "eval-reading_sft-needle-20k",
        "eval-reading_sft-prose-60k",
    ]
    assert not only("eval-base-needle-20k")
    only = reading_matrix.selected(matrix, None, "prose")
    assert only("eval-base-prose-60k") and not only("eval-base-needle-20k")
    with pytest.raises(SystemExit, match="no arm reading in the matrix: base, reading_sft"):
        reading_matrix.selected(matrix, "reading", None)
    with pytest.raises(SystemExit, match="no suite source"):
        reading_matrix.selected(matrix, None, "source")
